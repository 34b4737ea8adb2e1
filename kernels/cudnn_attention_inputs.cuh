// The small device inputs of a cuDNN attention graph that rotor does not
// already hold (src/ops/cudnn_attention_cuda.cpp): the query lengths of the
// padding mask and the dropout seed and offset. Written by one kernel whose
// arguments carry the values, so no host copy (and no synchronization) is
// needed inside a training step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace rotor::kernels {

// seq_q[b] = tq for b < B (seq_q may be null when B == 0); seed_offset[0] =
// seed and seed_offset[1] = offset (seed_offset may be null).
cudaError_t sdpa_write_inputs(int32_t* seq_q, int64_t B, int32_t tq, int64_t* seed_offset,
                              int64_t seed, int64_t offset, cudaStream_t stream);

}  // namespace rotor::kernels
