// Causal linear attention with the chunks in parallel: the row kernels
// (kernels/linear_attention_chunks.cuh). Each is a grid-stride loop over its
// outputs, one element a thread; the scan walks the chunks of one (bh, e)
// in turn, neighbouring threads on neighbouring e (coalesced).
#include <math.h>

#include "kernels/common.cuh"
#include "kernels/linear_attention_chunks.cuh"

namespace rotor::kernels {
namespace {

__device__ __forceinline__ int64_t key_count(const int32_t* key_len, int64_t H, int64_t bh,
                                             int64_t T) {
  if (!key_len) return T;
  const int64_t n = key_len[bh / H];
  return n < 0 ? 0 : n > T ? T : n;
}

// s_t: the stabilizer of key min(t, len - 1), 0 without stabilizers or keys.
__device__ __forceinline__ float stab_at(const float* ck, int64_t bh, int64_t T, int64_t len,
                                         int64_t t) {
  if (!ck || len == 0) return 0.0f;
  return ck[bh * T + (t < len - 1 ? t : len - 1)];
}

__global__ void rows_kernel(const float* __restrict__ src, int64_t src_rows,
                            float* __restrict__ dst, int64_t dst_rows, int64_t X, int64_t n,
                            const float* __restrict__ scale) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % X, row = e / X, t = row % dst_rows, bh = row / dst_rows;
    float v = 0.0f;
    if (t < src_rows) {
      v = src[(bh * src_rows + t) * X + i];
      if (scale) v *= scale[row];
    }
    dst[e] = v;
  }
}

__global__ void factors_kernel(const float* __restrict__ ck, const int32_t* __restrict__ key_len,
                               int64_t H, int64_t T, int64_t Tpad, int64_t L, float* __restrict__ s,
                               float* __restrict__ f, float* __restrict__ g,
                               float* __restrict__ decay, int64_t n) {
  const int64_t C = Tpad / L;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e % Tpad, bh = e / Tpad, c = t / L;
    const int64_t len = key_count(key_len, H, bh, T);
    const float st = stab_at(ck, bh, T, len, t);
    const float last = stab_at(ck, bh, T, len, c * L + L - 1);
    const float prev = stab_at(ck, bh, T, len, c > 0 ? c * L - 1 : 0);
    s[e] = st;
    f[e] = t < len ? expf(st - last) : 0.0f;
    g[e] = expf(prev - st);
    if (t == c * L) decay[bh * C + c] = expf(prev - last);
  }
}

__global__ void scan_kernel(float* __restrict__ x, int64_t C, int64_t E,
                            const float* __restrict__ decay, bool reverse, int64_t n) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = idx % E, bh = idx / E;
    float acc = 0.0f;
#pragma unroll 4  // the loads of later chunks issued before this one's sum
    for (int64_t i = 0; i < C; ++i) {
      const int64_t c = reverse ? C - 1 - i : i;
      float* p = x + (bh * C + c) * E + e;
      const float u = *p;
      *p = acc;
      acc = decay[bh * C + c] * acc + u;
    }
  }
}

__global__ void weights_kernel(float* __restrict__ p, const float* __restrict__ s,
                               const float* __restrict__ coef, const int32_t* __restrict__ key_len,
                               int64_t H, int64_t T, int64_t C, int64_t L, bool multiply,
                               int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % L, m = (e / L) % L, chunk = e / (L * L);  // chunk = bh C + c
    const int64_t bh = chunk / C, c = chunk % C;
    const int64_t len = key_count(key_len, H, bh, T);
    const int64_t tm = c * L + m, tn = c * L + j, base = bh * C * L;
    const float w = j <= m && tn < len ? expf(s[base + tn] - s[base + tm]) : 0.0f;
    p[e] = multiply ? p[e] * w : w * coef[base + tm];
  }
}

}  // namespace

cudaError_t la_chunk_rows(const float* src, int64_t src_rows, float* dst, int64_t dst_rows,
                          int64_t X, int64_t BH, const float* scale, cudaStream_t stream) {
  const int64_t n = BH * dst_rows * X;
  if (n <= 0) return cudaSuccess;
  rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(src, src_rows, dst, dst_rows, X, n, scale);
  return cudaGetLastError();
}

cudaError_t la_chunk_factors(const float* ck, const int32_t* key_len, int64_t H, int64_t BH,
                             int64_t T, int64_t Tpad, int64_t L, float* s, float* f, float* g,
                             float* decay, cudaStream_t stream) {
  if (L < 1 || Tpad % L != 0 || H < 1) return cudaErrorInvalidValue;
  const int64_t n = BH * Tpad;
  if (n <= 0) return cudaSuccess;
  factors_kernel<<<grid_for(n), kThreads, 0, stream>>>(ck, key_len, H, T, Tpad, L, s, f, g, decay,
                                                       n);
  return cudaGetLastError();
}

cudaError_t la_chunk_scan(float* x, int64_t BH, int64_t C, int64_t E, const float* decay,
                          bool reverse, cudaStream_t stream) {
  const int64_t n = BH * E;
  if (n <= 0 || C <= 0) return cudaSuccess;
  scan_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, C, E, decay, reverse, n);
  return cudaGetLastError();
}

cudaError_t la_chunk_weights(float* p, const float* s, const float* coef, const int32_t* key_len,
                             int64_t H, int64_t T, int64_t BH, int64_t C, int64_t L, bool multiply,
                             cudaStream_t stream) {
  if (L < 1 || H < 1 || (!multiply && !coef)) return cudaErrorInvalidValue;
  const int64_t n = BH * C * L * L;
  if (n <= 0) return cudaSuccess;
  weights_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, s, coef, key_len, H, T, C, L, multiply,
                                                       n);
  return cudaGetLastError();
}

}  // namespace rotor::kernels
