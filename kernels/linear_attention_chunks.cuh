// The row kernels of causal linear attention with the chunks in parallel
// (ops/linear_attention_chunked.h, whose CpuBackend is their twin; the
// products around them are cuBLASLt GEMMs in src/ops/linear_attention_
// cuda.cpp). f32 throughout; every launcher returns cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace rotor::kernels {

// dst [BH, dst_rows, X] = src [BH, src_rows, X] (times scale [BH,
// dst_rows] when not null), rows past src_rows zero.
cudaError_t la_chunk_rows(const float* src, int64_t src_rows, float* dst, int64_t dst_rows,
                          int64_t X, int64_t BH, const float* scale, cudaStream_t stream);
// s, f, g [BH, Tpad], decay [BH, Tpad / L] from the prefix stabilizers ck
// [BH, T] (or null) and key_len [B] (or null), as Backend::factors says.
cudaError_t la_chunk_factors(const float* ck, const int32_t* key_len, int64_t H, int64_t BH,
                             int64_t T, int64_t Tpad, int64_t L, float* s, float* f, float* g,
                             float* decay, cudaStream_t stream);
// The decayed exclusive scan over the chunks of x [BH, C, E], forward or
// reverse (Backend::scan): one thread per (bh, e), c in turn.
cudaError_t la_chunk_scan(float* x, int64_t BH, int64_t C, int64_t E, const float* decay,
                          bool reverse, cudaStream_t stream);
// The causal weights of each chunk's [L, L] block of p [BH, C, L, L]
// (Backend::weights): multiply, or write them times coef [BH, C L].
cudaError_t la_chunk_weights(float* p, const float* s, const float* coef, const int32_t* key_len,
                             int64_t H, int64_t T, int64_t BH, int64_t C, int64_t L, bool multiply,
                             cudaStream_t stream);

}  // namespace rotor::kernels
