// Decoding kernels: one block per (b, h) for the attention of the new query.
// Each warp walks a strided subset of the cached keys with its own running
// max and sum (online softmax); lane t owns output columns t, t + 32, ...;
// the warps' partial results are merged through shared memory at the end.
// ALiBi's bias, when asked for, is one FMA on each key's score; T5's is one
// load from its gathered table (a few KB, cached).
#include "core/t5_bias.h"
#include "kernels/attention_masks.cuh"
#include "kernels/common.cuh"
#include "kernels/decode_attention.cuh"

namespace rotor::kernels {
namespace {

constexpr int kDecodeWarps = 4;
constexpr int kMaxColsPerLane = 8;  // D <= 256

template <class T>
__global__ void kv_cache_write_kernel(const T* __restrict__ src, T* __restrict__ cache, int64_t BH,
                                      int64_t Tmax, int64_t D, int64_t position) {
  const int64_t n = BH * D;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bh = e / D, c = e % D;
    cache[(bh * Tmax + position) * D + c] = src[e];
  }
}

template <class T>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    decode_attention_kernel(const T* __restrict__ q, const T* __restrict__ kc,
                            const T* __restrict__ vc, T* __restrict__ out, int64_t Tmax, int D,
                            int64_t length, DecodeBias bias) {
  const int64_t alibi_heads = bias.alibi_heads;
  __shared__ float s_m[kDecodeWarps], s_l[kDecodeWarps];
  __shared__ float s_acc[kDecodeWarps][kMaxColsPerLane * 32];
  const int64_t bh = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int cols = (D + 31) / 32;
  float qv[kMaxColsPerLane], acc[kMaxColsPerLane];
#pragma unroll
  for (int u = 0; u < kMaxColsPerLane; ++u) {
    const int c = lane + 32 * u;
    qv[u] = (u < cols && c < D) ? to_f32(q[bh * D + c]) : 0.0f;
    acc[u] = 0.0f;
  }
  // ALiBi: the query at position length - 1, key j at j.
  const float neg_slope =
      alibi_heads > 0 ? -static_cast<float>(alibi::slope(bh % alibi_heads, alibi_heads)) : 0.0f;
  const float origin = static_cast<float>(length - 1);
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = warp; j < length; j += kDecodeWarps) {
    const T* kr = kc + (bh * Tmax + j) * D;
    float s = 0.0f;
#pragma unroll
    for (int u = 0; u < kMaxColsPerLane; ++u) {
      const int c = lane + 32 * u;
      if (u < cols && c < D) s = fmaf(qv[u], to_f32(kr[c]), s);
    }
    s = warp_sum(s);
    if (alibi_heads > 0) s = alibi_add(s, neg_slope, origin, static_cast<float>(j));
    if (bias.rel)
      s += __ldg(bias.rel + t5::relative_row(j - (length - 1), bias.rel_max) * bias.heads +
                 bh % bias.heads);
    const float m_new = fmaxf(m, s);
    const float alpha = expf(m - m_new);  // m = -inf on the first key: 0
    const float pr = expf(s - m_new);
    l = l * alpha + pr;
    m = m_new;
    const T* vr = vc + (bh * Tmax + j) * D;
#pragma unroll
    for (int u = 0; u < kMaxColsPerLane; ++u) {
      const int c = lane + 32 * u;
      if (u < cols && c < D) acc[u] = fmaf(pr, to_f32(vr[c]), acc[u] * alpha);
    }
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
#pragma unroll
  for (int u = 0; u < kMaxColsPerLane; ++u) s_acc[warp][lane + 32 * u] = acc[u];
  __syncthreads();
  if (warp != 0) return;
  float M = -INFINITY;
  for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, s_m[w]);
  float L = 0.0f;
  for (int w = 0; w < kDecodeWarps; ++w)
    if (s_l[w] > 0.0f) L += s_l[w] * expf(s_m[w] - M);
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
#pragma unroll
  for (int u = 0; u < kMaxColsPerLane; ++u) {
    const int c = lane + 32 * u;
    if (u >= cols || c >= D) continue;
    float a = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w)
      if (s_l[w] > 0.0f) a += s_acc[w][lane + 32 * u] * expf(s_m[w] - M);
    out[bh * D + c] = from_f32<T>(a * inv);
  }
}

template <class W>
__global__ void index_select_kernel(const W* __restrict__ src, const int32_t* __restrict__ index,
                                    W* __restrict__ dst, int64_t M, int64_t row_words) {
  const int64_t n = M * row_words;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / row_words, w = e % row_words;
    dst[e] = src[static_cast<int64_t>(index[i]) * row_words + w];
  }
}

}  // namespace

cudaError_t kv_cache_write(const void* src, void* cache, int64_t BH, int64_t Tmax, int64_t D,
                           int64_t position, DType dt, cudaStream_t stream) {
  if (BH * D == 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      kv_cache_write_kernel<T><<<grid_for(BH * D), kThreads, 0, stream>>>(
          static_cast<const T*>(src), static_cast<T*>(cache), BH, Tmax, D, position));
  return cudaGetLastError();
}

cudaError_t decode_attention(const void* q, const void* k_cache, const void* v_cache, void* out,
                             int64_t BH, int64_t Tmax, int64_t D, int64_t length, DType dt,
                             cudaStream_t stream, const DecodeBias& bias) {
  const int64_t alibi_heads = bias.alibi_heads;
  if (D > kMaxColsPerLane * 32 || BH > 2147483647 || length > Tmax || alibi_heads < 0 ||
      (alibi_heads > 0 && BH % alibi_heads != 0) ||
      (bias.rel && (alibi_heads > 0 || bias.heads < 1 || BH % bias.heads != 0 || bias.rel_max < 0)))
    return cudaErrorInvalidValue;
  if (BH == 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      decode_attention_kernel<T><<<static_cast<unsigned>(BH), kDecodeWarps * 32, 0, stream>>>(
          static_cast<const T*>(q), static_cast<const T*>(k_cache), static_cast<const T*>(v_cache),
          static_cast<T*>(out), Tmax, static_cast<int>(D), length, bias));
  return cudaGetLastError();
}

cudaError_t index_select_rows(const void* src, const int32_t* index, void* dst, int64_t M,
                              size_t row_bytes, cudaStream_t stream) {
  if (M == 0 || row_bytes == 0) return cudaSuccess;
  if (row_bytes % 4 == 0) {
    const int64_t words = static_cast<int64_t>(row_bytes / 4);
    index_select_kernel<uint32_t><<<grid_for(M * words), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src), index, static_cast<uint32_t*>(dst), M, words);
  } else {
    const int64_t words = static_cast<int64_t>(row_bytes);
    index_select_kernel<uint8_t><<<grid_for(M * words), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(src), index, static_cast<uint8_t*>(dst), M, words);
  }
  return cudaGetLastError();
}

}  // namespace rotor::kernels
