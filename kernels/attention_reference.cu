// Row kernels of the reference attention: one block per (b, h, i) row of the
// [Tq, Tk] matrix. Only keys 0..n-1 are visible (key padding and the causal
// mask both cut a prefix), so masking is a row length. ALiBi's bias is added
// to the scores as the forward reads them (kernels/attention_masks.cuh).
#include "core/philox.h"
#include "kernels/attention_masks.cuh"
#include "kernels/attention_reference.cuh"
#include "kernels/common.cuh"

namespace rotor::kernels {
namespace {

// Keys 0..n-1 are visible to flat row (b, h, i) of [B, H, Tq].
__device__ __forceinline__ int64_t visible_keys_of_row(const AttentionMask& m, int64_t row) {
  return visible_keys(m, key_length_of(m, row / (m.Tq * m.H)), row % m.Tq);
}

template <class T>
__global__ void attn_softmax_fwd_kernel(const float* scores, T* probs, T* dropped, AttentionMask m,
                                        int64_t rows, float keep_scale) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t n = visible_keys_of_row(m, r);
    const float* sr = scores + r * m.Tk;
    T* pr = probs + r * m.Tk;
    T* dr = dropped ? dropped + r * m.Tk : nullptr;
    // ALiBi: head (r / Tq) % H, query r % Tq (a zero slope adds nothing).
    const float neg_slope = alibi_neg_slope(m, (r / m.Tq) % m.H);
    const float origin = alibi_origin(m, r % m.Tq);
    auto score = [&](int64_t j) {
      return alibi_add(sr[j], neg_slope, origin, static_cast<float>(j));
    };
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, score(j));
    mx = block_max(mx, scratch);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += expf(score(j) - mx);
    s = block_sum(s, scratch);
    const float inv = n > 0 ? 1.0f / s : 0.0f;
    const uint64_t flat0 = static_cast<uint64_t>(r * m.Tk);
    for (int64_t j = threadIdx.x; j < m.Tk; j += blockDim.x) {
      const float p = j < n ? expf(score(j) - mx) * inv : 0.0f;
      pr[j] = from_f32<T>(p);
      if (dr) dr[j] = from_f32<T>(p == 0.0f ? 0.0f : p * keep_factor(m, keep_scale, flat0 + j));
    }
  }
}

template <class T>
__global__ void attn_dropout_probs_kernel(const T* probs, T* dropped, AttentionMask m,
                                          int64_t total, float keep_scale) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x)
    dropped[e] =
        from_f32<T>(to_f32(probs[e]) * keep_factor(m, keep_scale, static_cast<uint64_t>(e)));
}

template <class T>
__global__ void attn_softmax_bwd_kernel(const T* probs, const float* dp_dropped, T* ds, float scale,
                                        AttentionMask m, int64_t rows, float keep_scale) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t n = visible_keys_of_row(m, r);
    const T* pr = probs + r * m.Tk;
    const float* gr = dp_dropped + r * m.Tk;
    T* dr = ds + r * m.Tk;
    const uint64_t flat0 = static_cast<uint64_t>(r * m.Tk);
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dot += gr[j] * keep_factor(m, keep_scale, flat0 + j) * to_f32(pr[j]);
    dot = block_sum(dot, scratch);
    for (int64_t j = threadIdx.x; j < m.Tk; j += blockDim.x) {
      float v = 0.0f;
      if (j < n) {
        const float dp = gr[j] * keep_factor(m, keep_scale, flat0 + j);
        v = to_f32(pr[j]) * (dp - dot) * scale;
      }
      dr[j] = from_f32<T>(v);
    }
  }
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 30) ? rows : (1 << 30));
}
float keep_scale_of(const AttentionMask& m) {
  return m.dropout > 0.0f ? 1.0f / (1.0f - m.dropout) : 1.0f;
}

}  // namespace

cudaError_t attention_softmax_forward(const float* scores, void* probs, void* dropped, DType dt,
                                      const AttentionMask& m, cudaStream_t stream) {
  const int64_t rows = m.B * m.H * m.Tq;
  if (rows <= 0 || m.Tk <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      attn_softmax_fwd_kernel<T><<<row_grid(rows), row_threads(m.Tk, 256), 0, stream>>>(
          scores, static_cast<T*>(probs), static_cast<T*>(dropped), m, rows, keep_scale_of(m)));
  return cudaGetLastError();
}

cudaError_t attention_dropout_probs(const void* probs, void* dropped, DType dt,
                                    const AttentionMask& m, cudaStream_t stream) {
  const int64_t total = m.B * m.H * m.Tq * m.Tk;
  if (total <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      attn_dropout_probs_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(
          static_cast<const T*>(probs), static_cast<T*>(dropped), m, total, keep_scale_of(m)));
  return cudaGetLastError();
}

cudaError_t attention_softmax_backward(const void* probs, const float* dp_dropped, void* ds,
                                       DType dt, float scale, const AttentionMask& m,
                                       cudaStream_t stream) {
  const int64_t rows = m.B * m.H * m.Tq;
  if (rows <= 0 || m.Tk <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     attn_softmax_bwd_kernel<T>
                     <<<row_grid(rows), row_threads(m.Tk, 256), 0, stream>>>(
                         static_cast<const T*>(probs), dp_dropped, static_cast<T*>(ds), scale, m,
                         rows, keep_scale_of(m)));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
