// The device code of linear attention (kernels/linear_attention.cu), in a
// header so that tests/emulation/linear_attention_emulate.cpp can run it on
// the CPU (cuda_emulation.h) against the CPU op (src/ops/linear_attention*.cpp,
// whose arithmetic it mirrors). All of it computes in f32; q, k, v, out, dout
// and the gradients dq, dk are read and written in their dtype.
//   - features / features_backward: one block per row, the fused feature map
//     (elu1, relu, favor with its stabilizer) and rotation (before phi on x,
//     after phi on the features; core/rope.h) and their backward;
//   - key_stabilizers: per (batch, head) the favor key stabilizer of every key
//     row: the max over the non-padded rows (not causal) or the running max;
//   - chunk_forward / chunk_backward: causal, one block per (batch, head)
//     sweeping the queries in chunks of kChunk rows: keys a chunk sees in
//     full through the running state S, z (rescaled as the prefix stabilizer
//     grows), the rest by a masked product in shared memory; the backward
//     sweeps forward (dq, in-chunk dk, dv) and backward (suffix states U, y);
//   - grad_prep: G = dout / (den + eps), dden = -dout.out / (den + eps).
// Include after the CUDA headers (or after cuda_emulation.h, defining
// ROTOR_LINATTN_SHARED_FLOATS(name) to give the dynamic shared memory).
#pragma once

#include <cstdint>

#include "core/rope.h"
#include "kernels/common.cuh"
#include "kernels/linear_attention.cuh"

#ifndef ROTOR_LINATTN_SHARED_FLOATS
#define ROTOR_LINATTN_SHARED_FLOATS(name) extern __shared__ float name[]
#endif

namespace rotor::kernels::linattn {

__device__ __forceinline__ int64_t row_length(const FeatureArgs& f, int64_t bh) {
  return f.key_len ? static_cast<int64_t>(f.key_len[bh / f.H]) : f.T;
}

// Rotates (back: by the transpose) the row `v` [width] in shared memory in
// place at position pos; the block's threads share the pairs.
__device__ __forceinline__ void rotate_shared(const rope::Params& p, int64_t width, int64_t pos,
                                              float* v, bool back) {
  const int64_t R = rope::rotated_dims(p, width);
  for (int64_t s = threadIdx.x; s < R / 2; s += blockDim.x) {
    int64_t ia = 0, ib = 0;
    rope::slot_dims(p.layout, R, s, ia, ib);
    const rope::Rotation r = rope::rotation(p, pos, s, R);
    float y0 = 0.0f, y1 = 0.0f;
    if (back)
      rope::rotate_back(v[ia], v[ib], r, y0, y1);
    else
      rope::rotate(v[ia], v[ib], r, y0, y1);
    v[ia] = y0;
    v[ib] = y1;
  }
  __syncthreads();
}

// Dynamic shared memory: D + 2 M floats.
__global__ void __launch_bounds__(kRowThreads) features(FeatureArgs f) {
  ROTOR_LINATTN_SHARED_FLOATS(smem_f);
  __shared__ float red[32];
  float* xs = smem_f;       // [D]
  float* l = smem_f + f.D;  // [M] logits, then phi
  float* ar = l + f.M;      // [M] rotated phi
  const int64_t row = blockIdx.x, bh = row / f.T, t = row % f.T, D = f.D, M = f.M;
  if (t >= row_length(f, bh)) {  // padding: zero features
    if (f.only_max) {
      if (threadIdx.x == 0) f.rowmax[row] = -INFINITY;
      return;
    }
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      f.phi[row * M + i] = 0.0f;
      if (f.rotate_after) f.a[row * M + i] = 0.0f;
    }
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) f.xs[row * D + i] = 0.0f;
    return;
  }
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) xs[i] = load_any(f.x, f.dt, row * D + i);
  __syncthreads();
  if (f.rotate_before) rotate_shared(f.rope, D, f.pos0 + t, xs, false);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    xs[i] *= f.scale;
    if (!f.only_max) f.xs[row * D + i] = xs[i];
  }
  __syncthreads();
  if (f.map != kFavor) {
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
      l[i] = f.map == kElu1 ? (xs[i] > 0.0f ? xs[i] + 1.0f : expf(xs[i])) : fmaxf(xs[i], 0.0f);
  } else {
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
      float s = 0.0f;
      for (int64_t c = 0; c < D; ++c) s += f.W[j * D + c] * xs[c];
      l[j] = s;
      mx = fmaxf(mx, s);
    }
    mx = block_max(mx, red);
    if (f.only_max) {
      if (threadIdx.x == 0) f.rowmax[row] = mx;
      return;
    }
    double sq = 0.0;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) sq += static_cast<double>(xs[c]) * xs[c];
    __shared__ double red_d[32];
    sq = block_sum(sq, red_d);
    const float c0 = f.stab ? f.stab[row] : mx;
    const float shift = static_cast<float>(0.5 * sq) + c0;
    const float inv_sqrt_m = static_cast<float>(1.0 / sqrt(static_cast<double>(M)));
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) l[j] = expf(l[j] - shift) * inv_sqrt_m;
  }
  __syncthreads();
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    f.phi[row * M + j] = l[j];
    ar[j] = l[j];
  }
  __syncthreads();
  if (!f.rotate_after) return;
  rotate_shared(f.rope, M, f.pos0 + t, ar, false);
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) f.a[row * M + j] = ar[j];
}

// dx from the gradient of phi (dphi + R^T da + coef vec), the stabilizer held
// constant. Dynamic shared memory: D + M floats.
__global__ void __launch_bounds__(kRowThreads) features_backward(FeatureArgs f) {
  ROTOR_LINATTN_SHARED_FLOATS(smem_b);
  float* g = smem_b;    // [M]
  float* dx = g + f.M;  // [D]
  const int64_t row = blockIdx.x, bh = row / f.T, t = row % f.T, D = f.D, M = f.M;
  if (t >= row_length(f, bh)) {
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) store_any(f.dx, f.dt, row * D + i, 0.0f);
    return;
  }
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) g[j] = f.da ? f.da[row * M + j] : 0.0f;
  __syncthreads();
  if (f.da) rotate_shared(f.rope, M, f.pos0 + t, g, true);
  for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
    float v = g[j];
    if (f.dphi) v += f.dphi[row * M + j];
    if (f.vec) v += (f.coef ? f.coef[row] : 1.0f) * f.vec[bh * M + j];
    g[j] = v;
  }
  __syncthreads();
  const float* xs = f.xs + row * D;
  const float* phi = f.phi + row * M;
  if (f.map != kFavor) {
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
      dx[i] = xs[i] > 0.0f ? g[i] : (f.map == kElu1 ? g[i] * phi[i] : 0.0f);
  } else {
    // d phi_j / dx = phi_j (w_j - x): with t = g o phi, dx = t W - x sum(t).
    double ts = 0.0;
    for (int64_t j = threadIdx.x; j < M; j += blockDim.x) {
      g[j] *= phi[j];
      ts += g[j];
    }
    __shared__ double red_d[32];
    const float tsum = static_cast<float>(block_sum(ts, red_d));  // synchronizes
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      float s = 0.0f;
      for (int64_t j = 0; j < M; ++j) s += g[j] * f.W[j * D + i];
      dx[i] = s - xs[i] * tsum;
    }
  }
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) dx[i] *= f.scale;
  __syncthreads();
  if (f.rotate_before) rotate_shared(f.rope, D, f.pos0 + t, dx, true);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) store_any(f.dx, f.dt, row * D + i, dx[i]);
}

// One block per (batch, head): stab[bh, t] = the max of rowmax over the
// non-padded rows (prefix: over rows 0..t) -- the favor key stabilizers.
__global__ void __launch_bounds__(kRowThreads)
    key_stabilizers(const float* rowmax, const int32_t* key_len, int64_t H, int64_t T, bool prefix,
                    float* stab) {
  __shared__ float seg[kRowThreads];
  __shared__ float red[32];
  const int64_t bh = blockIdx.x, n = key_len ? key_len[bh / H] : T;
  const float* r = rowmax + bh * T;
  float* s = stab + bh * T;
  const int64_t per = (T + blockDim.x - 1) / blockDim.x, from = threadIdx.x * per;
  const int64_t to = from + per < n ? from + per : n;
  float m = -INFINITY;
  for (int64_t t = from; t < to; ++t) m = fmaxf(m, r[t]);
  if (!prefix) {
    m = block_max(m, red);
    for (int64_t t = threadIdx.x; t < T; t += blockDim.x) s[t] = m;
    return;
  }
  seg[threadIdx.x] = m;
  __syncthreads();
  float run = -INFINITY;  // max over the segments before this thread's
  for (unsigned i = 0; i < threadIdx.x; ++i) run = fmaxf(run, seg[i]);
  for (int64_t t = from; t < from + per && t < T; ++t) {
    if (t < n) run = fmaxf(run, r[t]);
    s[t] = run;
  }
}

// Per query row (one block each): G = dout / (den + eps) [BH, Tq, Dv] f32,
// dden = -dout.out / (den + eps).
__global__ void __launch_bounds__(kRowThreads)
    grad_prep(const void* dout, const void* out, DType dt, const float* den, float eps, int64_t Dv,
              float* G, float* dden) {
  __shared__ double red[32];
  const int64_t row = blockIdx.x;
  const double s = static_cast<double>(den[row]) + eps;
  double go = 0.0;
  for (int64_t c = threadIdx.x; c < Dv; c += blockDim.x) {
    const float d = load_any(dout, dt, row * Dv + c);
    G[row * Dv + c] = static_cast<float>(d / s);
    go += static_cast<double>(d) * load_any(out, dt, row * Dv + c);
  }
  go = block_sum(go, red);
  if (threadIdx.x == 0) dden[row] = static_cast<float>(-go / s);
}

// Not causal: out = num / (den + eps) in out's dtype (num f32 [rows, Dv]).
__global__ void normalize(const float* num, const float* den, float eps, int64_t rows, int64_t Dv,
                          void* out, DType dt) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * Dv;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store_any(out, dt, i, num[i] / (den[i / Dv] + eps));
}

// One (batch, head)'s view: pointers moved to it.
struct ChunkHead {
  int64_t Tq, Tk, M, Dv, key_len;
  const float *phq, *aq, *phk, *bk, *v, *ck;
  float *S, *z;
  __device__ __forceinline__ int64_t visible(int64_t i) const {
    const int64_t n = i + Tk - Tq + 1;
    return n < 0 ? 0 : n < key_len ? n : key_len;
  }
  __device__ __forceinline__ float row_c(int64_t i) const {
    const int64_t n = visible(i);
    return ck && n > 0 ? ck[n - 1] : 0.0f;
  }
};

__device__ __forceinline__ ChunkHead chunk_head(const ChunkArgs& a, int64_t bh) {
  ChunkHead h;
  h.Tq = a.Tq;
  h.Tk = a.Tk;
  h.M = a.M;
  h.Dv = a.Dv;
  h.key_len = a.key_len ? a.key_len[bh / a.H] : a.Tk;
  h.phq = a.phq + bh * a.Tq * a.M;
  h.aq = a.aq + bh * a.Tq * a.M;
  h.phk = a.phk + bh * a.Tk * a.M;
  h.bk = a.bk + bh * a.Tk * a.M;
  h.v = a.v + bh * a.Tk * a.Dv;
  h.ck = a.ck ? a.ck + bh * a.Tk : nullptr;
  h.S = a.S + bh * a.M * a.Dv;
  h.z = a.z + bh * a.M;
  return h;
}

// S += sum e_n b_n v_n^T, z += sum e_n phi_n over keys [from, to), e_n =
// exp(c_n - c_{to-1}) with S, z first rescaled from cS (prefix stabilizers).
// Ends with a barrier.
__device__ __forceinline__ void add_keys(const ChunkHead& h, int64_t from, int64_t to, float& cS) {
  if (to > from) {
    const float cn = h.ck ? h.ck[to - 1] : 0.0f;
    const float r = h.ck && from > 0 ? expf(cS - cn) : 1.0f;
    for (int64_t idx = threadIdx.x; idx < h.M * h.Dv; idx += blockDim.x) {
      const int64_t i = idx / h.Dv, c = idx % h.Dv;
      float acc = h.S[idx] * r;
      for (int64_t n = from; n < to; ++n) {
        const float e = h.ck ? expf(h.ck[n] - cn) : 1.0f;
        acc += h.bk[n * h.M + i] * e * h.v[n * h.Dv + c];
      }
      h.S[idx] = acc;
    }
    for (int64_t i = threadIdx.x; i < h.M; i += blockDim.x) {
      float acc = h.z[i] * r;
      for (int64_t n = from; n < to; ++n)
        acc += h.phk[n * h.M + i] * (h.ck ? expf(h.ck[n] - cn) : 1.0f);
      h.z[i] = acc;
    }
    cS = cn;
  }
  __syncthreads();
}

// exp(c_{lo + j} - c_row) for a key row i sees, else 0.
__device__ __forceinline__ float chunk_weight(const ChunkHead& h, int64_t i, int64_t lo,
                                              int64_t j) {
  if (lo + j >= h.visible(i)) return 0.0f;
  return h.ck ? expf(h.ck[lo + j] - h.row_c(i)) : 1.0f;
}

__device__ __forceinline__ float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// One block per (batch, head).
__global__ void __launch_bounds__(kChunkThreads) chunk_forward(ChunkArgs a) {
  __shared__ float P[kChunk * kChunk], Pd[kChunk * kChunk], e_s[kChunk], den_s[kChunk];
  const int64_t bh = blockIdx.x;
  const ChunkHead h = chunk_head(a, bh);
  const int64_t M = h.M, Dv = h.Dv, C = kChunk;
  const bool after = h.aq != h.phq;
  for (int64_t i = threadIdx.x; i < M * Dv; i += blockDim.x) h.S[i] = 0.0f;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) h.z[i] = 0.0f;
  __syncthreads();
  int64_t done = 0;
  float cS = 0.0f;
  for (int64_t i0 = 0; i0 < h.Tq; i0 += C) {
    const int64_t nq = h.Tq - i0 < C ? h.Tq - i0 : C, lo = h.visible(i0);
    const int64_t nk = h.visible(i0 + nq - 1) - lo;
    add_keys(h, done, lo, cS);
    done = lo;
    for (int64_t idx = threadIdx.x; idx < C * C; idx += blockDim.x) {
      const int64_t r = idx / C, j = idx % C;
      float p = 0.0f, pd = 0.0f;
      const float w = r < nq && j < nk ? chunk_weight(h, i0 + r, lo, j) : 0.0f;
      if (w != 0.0f) {
        p = w * dot(h.aq + (i0 + r) * M, h.bk + (lo + j) * M, M);
        pd = after ? w * dot(h.phq + (i0 + r) * M, h.phk + (lo + j) * M, M) : p;
      }
      P[idx] = p;
      Pd[idx] = pd;
    }
    for (int64_t r = threadIdx.x; r < nq; r += blockDim.x)
      e_s[r] = h.ck && lo > 0 ? expf(cS - h.row_c(i0 + r)) : 1.0f;
    __syncthreads();
    for (int64_t r = threadIdx.x; r < nq; r += blockDim.x) {
      float s = e_s[r] * dot(h.phq + (i0 + r) * M, h.z, M);
      for (int64_t j = 0; j < nk; ++j) s += Pd[r * C + j];
      den_s[r] = s;
      a.den[bh * h.Tq + i0 + r] = s;
    }
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < nq * Dv; idx += blockDim.x) {
      const int64_t r = idx / Dv, c = idx % Dv;
      float s = 0.0f;
      for (int64_t i = 0; i < M; ++i) s += h.aq[(i0 + r) * M + i] * h.S[i * Dv + c];
      float num = e_s[r] * s;
      for (int64_t j = 0; j < nk; ++j) num += P[r * C + j] * h.v[(lo + j) * Dv + c];
      store_any(a.out, a.dt, (bh * h.Tq + i0 + r) * Dv + c, num / (den_s[r] + a.eps));
    }
    __syncthreads();
  }
}

// p1[i] += x, p2[i] += y, or p1[i] += x + y when they are one buffer.
__device__ __forceinline__ void add2(float* p1, float* p2, int64_t i, float x, float y) {
  if (p1 == p2) {
    p1[i] += x + y;
  } else {
    p1[i] += x;
    p2[i] += y;
  }
}

// Keys [from, to), seen in full by the rows summed in U, y (at cU).
__device__ __forceinline__ void key_grads_from_state(const ChunkHead& h, const float* U,
                                                     const float* y, float cU, int64_t from,
                                                     int64_t to, float* db, float* dphk,
                                                     float* dv) {
  const int64_t M = h.M, Dv = h.Dv;
  for (int64_t idx = threadIdx.x; idx < (to - from) * M; idx += blockDim.x) {
    const int64_t n = from + idx / M, i = idx % M;
    const float e = h.ck ? expf(h.ck[n] - cU) : 1.0f;
    add2(db, dphk, n * M + i, e * dot(h.v + n * Dv, U + i * Dv, Dv), e * y[i]);
  }
  for (int64_t idx = threadIdx.x; idx < (to - from) * Dv; idx += blockDim.x) {
    const int64_t n = from + idx / Dv, c = idx % Dv;
    const float e = h.ck ? expf(h.ck[n] - cU) : 1.0f;
    float s = 0.0f;
    for (int64_t i = 0; i < M; ++i) s += h.bk[n * M + i] * U[i * Dv + c];
    dv[n * Dv + c] += e * s;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kChunkThreads) chunk_backward(ChunkArgs a) {
  __shared__ float P[kChunk * kChunk], dP[kChunk * kChunk], Md[kChunk * kChunk], e_s[kChunk];
  const int64_t bh = blockIdx.x;
  const ChunkHead h = chunk_head(a, bh);
  const int64_t M = h.M, Dv = h.Dv, C = kChunk, Tq = h.Tq, Tk = h.Tk;
  const float* G = a.G + bh * Tq * Dv;
  const float* dden = a.dden + bh * Tq;
  float *U = a.U + bh * M * Dv, *y = a.y + bh * M;
  float *da = a.da + bh * Tq * M, *dphq = a.dphq + bh * Tq * M;
  float *db = a.db + bh * Tk * M, *dphk = a.dphk + bh * Tk * M, *dv = a.dv + bh * Tk * Dv;
  for (int64_t i = threadIdx.x; i < M * Dv; i += blockDim.x) h.S[i] = U[i] = 0.0f;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) h.z[i] = y[i] = 0.0f;
  for (int64_t i = threadIdx.x; i < Tk * M; i += blockDim.x) db[i] = dphk[i] = 0.0f;
  for (int64_t i = threadIdx.x; i < Tk * Dv; i += blockDim.x) dv[i] = 0.0f;
  __syncthreads();
  // Forward over the chunks: dq's parts, and the in-chunk parts of dk and dv.
  int64_t done = 0;
  float cS = 0.0f;
  for (int64_t i0 = 0; i0 < Tq; i0 += C) {
    const int64_t nq = Tq - i0 < C ? Tq - i0 : C, lo = h.visible(i0);
    const int64_t nk = h.visible(i0 + nq - 1) - lo;
    add_keys(h, done, lo, cS);
    done = lo;
    for (int64_t idx = threadIdx.x; idx < C * C; idx += blockDim.x) {
      const int64_t r = idx / C, j = idx % C;
      const float w = r < nq && j < nk ? chunk_weight(h, i0 + r, lo, j) : 0.0f;
      P[idx] = w != 0.0f ? w * dot(h.aq + (i0 + r) * M, h.bk + (lo + j) * M, M) : 0.0f;
      dP[idx] = w != 0.0f ? w * dot(G + (i0 + r) * Dv, h.v + (lo + j) * Dv, Dv) : 0.0f;
      Md[idx] = r < nq ? w * dden[i0 + r] : 0.0f;
    }
    for (int64_t r = threadIdx.x; r < nq; r += blockDim.x)
      e_s[r] = h.ck && lo > 0 ? expf(cS - h.row_c(i0 + r)) : 1.0f;
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < nq * M; idx += blockDim.x) {
      const int64_t r = idx / M, i = idx % M, row = i0 + r;
      float sa = 0.0f, sp = 0.0f;
      for (int64_t c = 0; c < Dv; ++c) sa += G[row * Dv + c] * h.S[i * Dv + c];
      sa *= e_s[r];
      sp = e_s[r] * dden[row] * h.z[i];
      for (int64_t j = 0; j < nk; ++j) {
        sa += dP[r * C + j] * h.bk[(lo + j) * M + i];
        sp += Md[r * C + j] * h.phk[(lo + j) * M + i];
      }
      if (da == dphq) {
        da[row * M + i] = sa + sp;
      } else {
        da[row * M + i] = sa;
        dphq[row * M + i] = sp;
      }
    }
    for (int64_t idx = threadIdx.x; idx < nk * M; idx += blockDim.x) {
      const int64_t j = idx / M, i = idx % M;
      float sb = 0.0f, sp = 0.0f;
      for (int64_t r = 0; r < nq; ++r) {
        sb += dP[r * C + j] * h.aq[(i0 + r) * M + i];
        sp += Md[r * C + j] * h.phq[(i0 + r) * M + i];
      }
      add2(db, dphk, (lo + j) * M + i, sb, sp);
    }
    for (int64_t idx = threadIdx.x; idx < nk * Dv; idx += blockDim.x) {
      const int64_t j = idx / Dv, c = idx % Dv;
      float s = 0.0f;
      for (int64_t r = 0; r < nq; ++r) s += P[r * C + j] * G[(i0 + r) * Dv + c];
      dv[(lo + j) * Dv + c] += s;
    }
    __syncthreads();
  }
  // Backward over the chunks: keys [n(i0), next) are seen in full exactly by
  // the chunks after this one, whose sums U and y hold (at cU, the c of
  // their first row that sees a key).
  int64_t next = Tq > 0 ? h.visible(Tq - 1) : 0;
  float cU = 0.0f;
  bool u_any = false;
  for (int64_t i0 = Tq > 0 ? (Tq - 1) / C * C : -1; i0 >= 0; i0 -= C) {
    const int64_t nq = Tq - i0 < C ? Tq - i0 : C, lo = h.visible(i0);
    if (!h.ck || u_any) key_grads_from_state(h, U, y, cU, lo, next, db, dphk, dv);
    next = lo;
    int64_t first = i0;
    while (first < i0 + nq && h.visible(first) == 0) ++first;
    if (h.ck && first == i0 + nq) continue;
    const float c_new = h.ck ? h.row_c(first) : 0.0f;
    const float rs = h.ck && u_any ? expf(c_new - cU) : 1.0f;
    for (int64_t r = threadIdx.x; r < nq; r += blockDim.x)
      e_s[r] = !h.ck ? 1.0f : i0 + r < first ? 0.0f : expf(c_new - h.row_c(i0 + r));
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < M * Dv; idx += blockDim.x) {
      const int64_t i = idx / Dv, c = idx % Dv;
      float s = U[idx] * rs;
      for (int64_t r = 0; r < nq; ++r) s += e_s[r] * h.aq[(i0 + r) * M + i] * G[(i0 + r) * Dv + c];
      U[idx] = s;
    }
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      float s = y[i] * rs;
      for (int64_t r = 0; r < nq; ++r) s += e_s[r] * dden[i0 + r] * h.phq[(i0 + r) * M + i];
      y[i] = s;
    }
    cU = c_new;
    u_any = true;
    __syncthreads();
  }
  if (!h.ck || u_any) key_grads_from_state(h, U, y, cU, 0, next, db, dphk, dv);
}

}  // namespace rotor::kernels::linattn
