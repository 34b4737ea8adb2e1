// Dropout with Philox masks: element i is kept when
// philox_uniform(seed, stream, i) >= p and then scaled by 1/(1-p) -- the very
// mask the CPU draws (core/philox.h). A dropped element is +0 whatever its
// value (-1, inf or NaN alike), as on the CPU, not x * 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// y = x * keep / (1 - p) over n elements (y may alias x). Forward and backward
// are the same map. p in [0, 1); p == 0 copies.
cudaError_t dropout_apply(const void* x, void* y, DType dt, int64_t n, float p, uint64_t seed,
                          uint64_t stream_id, cudaStream_t stream);

// y = residual + x * keep / (1 - p): the end of a residual branch in one pass
// (the mask of dropout_apply; y may alias residual or x).
cudaError_t dropout_add(const void* residual, const void* x, void* y, DType dt, int64_t n, float p,
                        uint64_t seed, uint64_t stream_id, cudaStream_t stream);

}  // namespace rotor::kernels
