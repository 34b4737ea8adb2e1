// Row kernels of the reference attention: one block per (b, h, i) row of the
// [Tq, Tk] matrix. Only keys 0..n-1 are visible (key padding and the causal
// mask both cut a prefix), so masking is a row length. ALiBi's bias
// (kernels/attention_masks.cuh), T5's (core/t5_bias.h) and a dense one
// (TUPE's) are added to the scores as the forward reads them; T5's table gradient is reduced
// without atomics by the diagonal and table kernels at the end.
#include "core/philox.h"
#include "core/t5_bias.h"
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
    // ALiBi: head h, query i (a zero slope adds nothing). T5: key j reads
    // table row relative_row(j - rel_origin) of column h, j - rel_origin being
    // p_j - p_i (as src/ops/attention_common.h's BiasRow).
    const int64_t h = (r / m.Tq) % m.H, i = r % m.Tq;
    const float neg_slope = alibi_neg_slope(m, h);
    const float origin = alibi_origin(m, i);
    const float* rel = m.rel ? m.rel + h : nullptr;
    const int64_t rel_origin = m.bias_q_offset + i + (m.Tk - m.Tq) - m.bias_k_offset;
    const float* dense = m.bias ? m.bias + r * m.Tk : nullptr;
    auto score = [&](int64_t j) {
      float s = alibi_add(sr[j], neg_slope, origin, static_cast<float>(j));
      if (rel) s += rel[t5::relative_row(j - rel_origin, m.rel_max) * m.H];
      if (dense) s += dense[j];
      return s;
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

// g (optional, may alias dp_dropped: the thread that reads gr[j] is the one
// that writes gw[j], after its reads) receives the unscaled dS in f32.
template <class T>
__global__ void attn_softmax_bwd_kernel(const T* probs, const float* dp_dropped, T* ds, float* g,
                                        float scale, AttentionMask m, int64_t rows,
                                        float keep_scale) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t n = visible_keys_of_row(m, r);
    const T* pr = probs + r * m.Tk;
    const float* gr = dp_dropped + r * m.Tk;
    T* dr = ds + r * m.Tk;
    float* gw = g ? g + r * m.Tk : nullptr;
    const uint64_t flat0 = static_cast<uint64_t>(r * m.Tk);
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dot += gr[j] * keep_factor(m, keep_scale, flat0 + j) * to_f32(pr[j]);
    dot = block_sum(dot, scratch);
    for (int64_t j = threadIdx.x; j < m.Tk; j += blockDim.x) {
      float v = 0.0f;  // P (dP - rowsum): dS / scale, 0 on the masked keys
      if (j < n) {
        const float dp = gr[j] * keep_factor(m, keep_scale, flat0 + j);
        v = to_f32(pr[j]) * (dp - dot);
      }
      dr[j] = from_f32<T>(v * scale);
      if (gw) gw[j] = v;
    }
  }
}

// T5's table gradient in two deterministic passes (no atomics: every sum has
// one thread, or one warp with a fixed lane split, and a fixed order).
// Diagonal d = j - i + Tq - 1 of [Tq, Tk] (0 .. Tq + Tk - 2) holds the scores
// (i, i + d - (Tq - 1)) for i in [lo(d), hi(d)), lo(d) = max(0, Tq - 1 - d),
// hi(d) = min(Tq, Tq + Tk - 1 - d); all of them have the same p_j - p_i, so
// read the same table row.
//
// Pass 1, one thread per (bh, d): diag[bh, d] = the sum of g over diagonal d
// of [B H, Tq, Tk], in double, i increasing. The threads of a warp (blockIdx.y
// = bh, consecutive d) all walk the union of their i ranges, so that at each
// step they read consecutive keys of one query row (coalesced); each adds
// only its own scores.
__global__ void rel_diag_kernel(const float* g, double* diag, int64_t BH, int64_t Tq, int64_t Tk) {
  const int64_t ndiag = Tq + Tk - 1;
  const int64_t d = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (d >= ndiag) return;
  const int64_t d0 = d - (threadIdx.x & 31);  // the warp's first and last diagonals
  const int64_t d1 = d0 + 31 < ndiag ? d0 + 31 : ndiag - 1;
  const int64_t lo = Tq - 1 - d1 > 0 ? Tq - 1 - d1 : 0;              // lo(d1) <= lo(d)
  const int64_t hi = Tq + Tk - 1 - d0 < Tq ? Tq + Tk - 1 - d0 : Tq;  // hi(d0) >= hi(d)
  const int64_t delta = d - (Tq - 1);                                // j - i
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const float* gb = g + bh * Tq * Tk;
    double s = 0.0;
    for (int64_t i = lo; i < hi; ++i) {
      // Off its own diagonal a thread loads a clamped (valid) key and adds
      // 0: unconditional loads, which the compiler can issue ahead.
      const int64_t j = i + delta, jc = j < 0 ? 0 : (j < Tk ? j : Tk - 1);
      const float x = gb[i * Tk + jc];
      s += static_cast<double>(j == jc ? x : 0.0f);
    }
    diag[bh * ndiag + d] = s;
  }
}

// Pass 2, one warp per (row, h) of the [2 rel_max + 1, H] table. Diagonal d
// has p_j - p_i = d + off, so an interior row is read by the one diagonal
// d + off = row - rel_max, and an edge row by every diagonal at or beyond its
// edge (t5::relative_row clamps): the range [dlo, dhi). For b = 0 .. B - 1 in
// turn lane l adds, in double, diagonals dlo + l, dlo + l + 32, ... of (b, h);
// the warp's butterfly sum (the same order every run) is rounded to f32 and
// added into grad[row, h].
__global__ void rel_table_kernel(const double* diag, float* grad, int64_t B, int64_t H,
                                 int64_t ndiag, int64_t off, int64_t rel_max) {
  const int64_t entries = (2 * rel_max + 1) * H;
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t e = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32; e < entries; e += warps) {
    const int64_t row = e / H, h = e % H, r = row - rel_max;
    int64_t dlo = 0, dhi = ndiag;                 // the diagonals [dlo, dhi) that read the row
    if (row > 0 && r - off > dlo) dlo = r - off;  // d + off >= r
    if (row < 2 * rel_max && r - off + 1 < dhi) dhi = r - off + 1;  // d + off <= r
    double t = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      const double* db = diag + (b * H + h) * ndiag;
      for (int64_t d = dlo + lane; d < dhi; d += 32) t += db[d];
    }
    t = warp_sum(t);
    if (lane == 0) grad[e] += static_cast<float>(t);  // e = row H + h
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
                                       DType dt, float scale, const AttentionMask& m, float* g,
                                       cudaStream_t stream) {
  const int64_t rows = m.B * m.H * m.Tq;
  if (rows <= 0 || m.Tk <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     attn_softmax_bwd_kernel<T>
                     <<<row_grid(rows), row_threads(m.Tk, 256), 0, stream>>>(
                         static_cast<const T*>(probs), dp_dropped, static_cast<T*>(ds), g, scale, m,
                         rows, keep_scale_of(m)));
  return cudaGetLastError();
}

int64_t attention_rel_bias_diagonals(const AttentionMask& m) {
  return m.Tq > 0 && m.Tk > 0 ? m.B * m.H * (m.Tq + m.Tk - 1) : 0;
}

cudaError_t attention_rel_bias_grad(const float* g, double* diag, float* grad,
                                    const AttentionMask& m, cudaStream_t stream) {
  const int64_t BH = m.B * m.H, ndiag = m.Tq + m.Tk - 1;
  if (BH <= 0 || m.Tq <= 0 || m.Tk <= 0) return cudaSuccess;  // no score: nothing to add
  constexpr int kDiagThreads = 128;
  const dim3 diag_grid(static_cast<unsigned>((ndiag + kDiagThreads - 1) / kDiagThreads),
                       static_cast<unsigned>(BH < 65535 ? BH : 65535));
  rel_diag_kernel<<<diag_grid, kDiagThreads, 0, stream>>>(g, diag, BH, m.Tq, m.Tk);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // p_j - p_i of diagonal d: d - (Tq - 1) + bias_k_offset - bias_q_offset - (Tk - Tq).
  const int64_t off = m.bias_k_offset - m.bias_q_offset - m.Tk + 1;
  const int64_t entries = (2 * m.rel_max + 1) * m.H;
  rel_table_kernel<<<grid_for(entries * 32), kThreads, 0, stream>>>(diag, grad, m.B, m.H, ndiag,
                                                                    off, m.rel_max);
  return cudaGetLastError();
}

namespace {

__global__ void tupe_cls_fwd_kernel(float* c, const float* theta, int64_t H, int64_t T) {
  const int64_t h = blockIdx.x;
  float* ch = c + h * T * T;
  for (int64_t j = threadIdx.x; j < T; j += blockDim.x) ch[j] = theta[h];
  for (int64_t i = 1 + threadIdx.x; i < T; i += blockDim.x) ch[i * T] = theta[H + h];
}

// One thread sums the column in double, i increasing (the CPU's order and
// bits); the zeroing is spread over the block after it has read.
__global__ void tupe_cls_bwd_kernel(float* g, float* dtheta, int64_t H, int64_t T) {
  const int64_t h = blockIdx.x;
  float* gh = g + h * T * T;
  if (threadIdx.x == 0) {
    double col = 0.0;
    for (int64_t i = 1; i < T; ++i) col += gh[i * T];
    dtheta[H + h] += static_cast<float>(col);
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < T; j += blockDim.x) gh[j] = 0.0f;
  for (int64_t i = 1 + threadIdx.x; i < T; i += blockDim.x) gh[i * T] = 0.0f;
}

}  // namespace

cudaError_t tupe_untie_cls(float* c, const float* theta, int64_t H, int64_t T,
                           cudaStream_t stream) {
  if (H <= 0 || T <= 0 || H > 65535) return cudaErrorInvalidValue;
  tupe_cls_fwd_kernel<<<static_cast<unsigned>(H), 256, 0, stream>>>(c, theta, H, T);
  return cudaGetLastError();
}

cudaError_t tupe_untie_cls_backward(float* g, float* dtheta, int64_t H, int64_t T,
                                    cudaStream_t stream) {
  if (H <= 0 || T <= 0 || H > 65535) return cudaErrorInvalidValue;
  tupe_cls_bwd_kernel<<<static_cast<unsigned>(H), 256, 0, stream>>>(g, dtheta, H, T);
  return cudaGetLastError();
}

}  // namespace rotor::kernels
