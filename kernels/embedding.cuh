// Token embedding lookup and its (deterministic) backward.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// out[i, :] = table[ids[i], :] * scale. An id outside [0, V) cannot raise an
// error without a host synchronization: its row is written as zeros.
cudaError_t embedding_forward(const int32_t* ids, int64_t n, const void* table, DType dt,
                              int64_t vocab, int64_t d, float scale, void* out,
                              cudaStream_t stream);

// Workspace for the backward of n rows of d into a table of `vocab` rows (the
// radix sort of the ids and per-block partial sums).
size_t embedding_backward_workspace(int64_t n, int64_t vocab, int64_t d);
// dtable[ids[i], :] += dout[i, :] * scale for ids != pad_id. Deterministic
// (no atomics; the same sums in the same order on every run) whatever the
// distribution of ids: tiny tables are a column sum over blocks of rows,
// larger ones sort the positions by id and sum fixed-size chunks of the
// sorted list, a frequent id over many blocks. Any dtypes (dout_dt and dt may
// differ: 16-bit rows into an f32 gradient). Out-of-range ids are skipped.
cudaError_t embedding_backward(const int32_t* ids, int64_t n, const void* dout, DType dout_dt,
                               float scale, void* dtable, DType dt, int64_t vocab, int64_t d,
                               int pad_id, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream);

}  // namespace rotor::kernels
