// Flash-style attention kernels; the decomposition is documented beside the
// CPU twin (src/ops/flash_attention.cpp).
//
// Portable path (every architecture, sm_70 included -- sm_70 builds only with
// CUDA 12, CUDA 13 dropped Volta): shared-memory tiles held in fp32 whatever
// the storage type, FMA arithmetic, four threads per row ("quad"):
//   forward  -- a block owns BQ queries of one (b, h); each quad owns a query
//               row: its four threads share the BK scores of a key tile
//               (interleaved keys), reduce max and sum with shuffles, write the
//               probabilities to shared memory and each accumulate D/4 output
//               columns. Running max m and sum l in fp32; lse = m + log l.
//               ALiBi's bias and T5's (attention_masks.cuh; T5's head
//               column staged in shared memory) are added to each visible
//               score, and again where the backward recomputes it.
//   backward -- a block owns BK keys of one (b, h) and walks the query tiles
//               that can see them (the causal mask skips the earlier ones);
//               each quad owns a key row and accumulates its dK and dV in
//               registers; dQ goes to an fp32 buffer with atomicAdd and is cast
//               at the end. D_i = rowsum(dO o O) is a preprocessing pass.
//               T5's table gradient: each score's unscaled dS into the
//               block's shared column, flushed at the end (t5_flush).
// Row strides are padded by one float so that the four threads of a quad,
// reading four different rows at the same column, hit four different banks.
//
// Variable-length layout (FlashCore's cu_seqlens): a block takes its (b, h)'s
// rows from flash_seq -- where the document's queries and keys start, how
// many there are (the bound of every load, store and atomic) and its key_len
// -- while the masks, dropout's flat index and ALiBi's and T5's distances
// read p.Tq and p.Tk, the longest documents', as the dense call on the
// documents regrouped [B, H, Tq, D] does. The grids stay (ceil(Tq / BQ) or
// ceil(Tk / BK), B H): a query tile past its document's queries (forward) or a
// key tile past its keys (backward) returns before its first barrier. delta,
// the dQ accumulator and its cast cover flash_q_rows, every head's rows.
//
// The sm_80+ tensor-core path (mma.sync m16n8k16, ldmatrix, cp.async) is
// kernels/flash_attention_tc.cu, chosen by src/ops/flash_attention_cuda.cpp for
// f16/bf16; the WMMA path for Volta is kernels/flash_attention_sm70.cu. The
// portable path below is the correctness baseline those must match.
#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/flash_attention.cuh"
#include "kernels/flash_common.cuh"

namespace rotor::kernels {
namespace {

// Tile shapes per head dim: shared memory stays under the 64 KiB that sm_75
// can opt into (tiles are fp32).
template <int D>
struct FwdTile {
  static constexpr int BQ = D >= 128 ? 32 : 64;
  static constexpr int BK = 32;
};
template <int D>
struct BwdTile {
  static constexpr int BK = 32;
  static constexpr int BQ = D >= 128 ? 16 : 32;
};

// rows [r0, r0 + R) of a [T, D] matrix into fp32 shared memory with stride D + 1
// (rows past T are zero).
template <class T, int D, int R>
__device__ __forceinline__ void load_tile(float* dst, const T* src, int64_t r0, int64_t T_rows) {
  constexpr int LD = D + 1;
  for (int e = threadIdx.x; e < R * D; e += blockDim.x) {
    const int r = e / D, c = e % D;
    const int64_t row = r0 + r;
    dst[r * LD + c] = row < T_rows ? to_f32(src[row * D + c]) : 0.0f;
  }
}

template <int D>
constexpr size_t fwd_smem_bytes() {
  constexpr int BQ = FwdTile<D>::BQ, BK = FwdTile<D>::BK;
  return sizeof(float) * (static_cast<size_t>(BQ + 2 * BK) * (D + 1) + BQ * (BK + 1));
}

template <class T, int D>
__global__ void __launch_bounds__(FwdTile<D>::BQ * 4)
    flash_fwd_kernel(FlashParams p, T* __restrict__ out, float* __restrict__ lse) {
  constexpr int BQ = FwdTile<D>::BQ, BK = FwdTile<D>::BK, LD = D + 1, LP = BK + 1;
  constexpr int KPT = BK / 4, CPT = D / 4;  // keys and output columns per thread
  extern __shared__ float smem[];
  float* sQ = smem;            // [BQ, LD]
  float* sK = sQ + BQ * LD;    // [BK, LD]
  float* sV = sK + BK * LD;    // [BK, LD]
  float* sP = sV + BK * LD;    // [BQ, LP] probabilities o dropout of the current tile
  float* sRel = sP + BQ * LP;  // [2 rel_max + 1] T5's bias of this head (with p.rel)

  const int64_t bh = blockIdx.y;
  const FlashSeq s = flash_seq(p, bh);  // rows, bases and key_len; masks read p's Tq, Tk
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * BQ;
  if (i0 >= s.Tq) return;  // block-uniform: past a document's queries (variable-length)
  const int r = threadIdx.x >> 2, q4 = threadIdx.x & 3;
  const int64_t i = i0 + r;
  const T* qb = static_cast<const T*>(p.q) + s.q0 * D;
  const T* kb = static_cast<const T*>(p.k) + s.k0 * D;
  const T* vb = static_cast<const T*>(p.v) + s.k0 * D;
  const float keep_scale = p.dropout > 0.0f ? 1.0f / (1.0f - p.dropout) : 1.0f;

  load_tile<T, D, BQ>(sQ, qb, i0, s.Tq);
  const int64_t key_len = s.key_len;
  const int64_t last = (i0 + BQ < s.Tq ? i0 + BQ : s.Tq) - 1;
  const int64_t n_block = visible_keys(p, key_len, last);  // the most any row of the tile sees
  const int64_t n_row = i < s.Tq ? visible_keys(p, key_len, i) : 0;
  const uint64_t row_flat = static_cast<uint64_t>((bh * p.Tq + i) * p.Tk);
  const float neg_slope = alibi_neg_slope(p, bh % p.H), origin = alibi_origin(p, i);
  const int64_t rel_origin = t5_origin(p, i);
  if (p.rel) t5_stage(p, p.H, bh % p.H, sRel, 1);  // read after the loop's first barrier

  float m = -INFINITY, l = 0.0f;
  float acc[CPT];
#pragma unroll
  for (int u = 0; u < CPT; ++u) acc[u] = 0.0f;

  for (int64_t j0 = 0; j0 < n_block; j0 += BK) {
    __syncthreads();  // the previous tile is consumed (and sQ is loaded)
    load_tile<T, D, BK>(sK, kb, j0, s.Tk);
    load_tile<T, D, BK>(sV, vb, j0, s.Tk);
    __syncthreads();

    float sc[KPT];
    float tile_max = -INFINITY;
#pragma unroll
    for (int t = 0; t < KPT; ++t) {
      const int jj = q4 + 4 * t;
      sc[t] = -INFINITY;
      if (j0 + jj < n_row) {
        const float* qr = sQ + r * LD;
        const float* kr = sK + jj * LD;
        float dot = 0.0f;
#pragma unroll 8
        for (int c = 0; c < D; ++c) dot = fmaf(qr[c], kr[c], dot);
        sc[t] = dot * p.scale;
        if (p.alibi) sc[t] = alibi_add(sc[t], neg_slope, origin, static_cast<float>(j0 + jj));
        if (p.rel) sc[t] += sRel[t5_row(p, j0 + jj - rel_origin)];
      }
      tile_max = fmaxf(tile_max, sc[t]);
    }
    tile_max = quad_max(tile_max);
    const float m_new = fmaxf(m, tile_max);
    // m = -inf: nothing seen yet, acc and l are zero, any finite factor works.
    const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < KPT; ++t) {
      const int jj = q4 + 4 * t;
      const float pr = sc[t] == -INFINITY ? 0.0f : expf(sc[t] - m_new);
      sum += pr;
      sP[r * LP + jj] =
          pr == 0.0f ? 0.0f
                     : pr * keep_factor(p, keep_scale, row_flat + static_cast<uint64_t>(j0 + jj));
    }
    sum = quad_sum(sum);
    l = l * alpha + sum;
    m = m_new;
    __syncwarp();  // the quad's probability row is complete
#pragma unroll
    for (int u = 0; u < CPT; ++u) acc[u] *= alpha;
    for (int jj = 0; jj < BK; ++jj) {
      const float pj = sP[r * LP + jj];
      const float* vr = sV + jj * LD + q4;
#pragma unroll
      for (int u = 0; u < CPT; ++u) acc[u] = fmaf(pj, vr[4 * u], acc[u]);
    }
  }

  if (i < s.Tq) {
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    T* orow = out + (s.q0 + i) * D;
#pragma unroll
    for (int u = 0; u < CPT; ++u) orow[q4 + 4 * u] = from_f32<T>(acc[u] * inv);
    if (q4 == 0) lse[s.q0 + i] = l > 0.0f ? m + logf(l) : -INFINITY;
  }
}

// delta[row] = sum_c dout[row, c] * out[row, c] (one warp per row).
template <class T>
__global__ void flash_delta_kernel(const T* __restrict__ out, const T* __restrict__ dout,
                                   float* __restrict__ delta, int64_t rows, int D) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < rows;
       row += warps) {
    float s = 0.0f;
    for (int c = lane; c < D; c += 32) s += to_f32(out[row * D + c]) * to_f32(dout[row * D + c]);
    s = warp_sum(s);
    if (lane == 0) delta[row] = s;
  }
}

template <int D>
constexpr size_t bwd_smem_bytes() {
  constexpr int BQ = BwdTile<D>::BQ, BK = BwdTile<D>::BK;
  return sizeof(float) *
         (static_cast<size_t>(2 * BK + 2 * BQ) * (D + 1) + 2 * BK * (BQ + 1) + 2 * BQ);
}

template <class T, int D>
__global__ void __launch_bounds__(BwdTile<D>::BK * 4)
    flash_bwd_kernel(FlashParams p, const float* __restrict__ lse, const T* __restrict__ dout,
                     const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
                     float* __restrict__ dq_accum) {
  constexpr int BQ = BwdTile<D>::BQ, BK = BwdTile<D>::BK, LD = D + 1, LP = BQ + 1;
  constexpr int QPT = BQ / 4, CPT = D / 4;  // queries and columns per thread
  extern __shared__ float smem[];
  float* sK = smem;           // [BK, LD]
  float* sV = sK + BK * LD;   // [BK, LD]
  float* sQ = sV + BK * LD;   // [BQ, LD]
  float* sdO = sQ + BQ * LD;  // [BQ, LD]
  float* sP = sdO + BQ * LD;  // [BK, LP] P o dropout (transposed: key rows)
  float* sdS = sP + BK * LP;  // [BK, LP] scale * dS
  float* sL = sdS + BK * LP;  // [BQ] lse
  float* sDel = sL + BQ;      // [BQ] delta
  // T5 (p.rel): [2 rel_max + 1, 2], each row of this head's column of the
  // table and its gradient summed over the block's scores.
  float* sRel = sDel + BQ;

  const int64_t bh = blockIdx.y;
  const FlashSeq s = flash_seq(p, bh);  // rows, bases and key_len; masks read p's Tq, Tk
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * BK;
  if (j0 >= s.Tk) return;  // block-uniform: past a document's keys (variable-length)
  const int r = threadIdx.x >> 2, q4 = threadIdx.x & 3;
  const int64_t j = j0 + r;
  const T* qb = static_cast<const T*>(p.q) + s.q0 * D;
  const T* kb = static_cast<const T*>(p.k) + s.k0 * D;
  const T* vb = static_cast<const T*>(p.v) + s.k0 * D;
  const T* dob = dout + s.q0 * D;
  const float keep_scale = p.dropout > 0.0f ? 1.0f / (1.0f - p.dropout) : 1.0f;
  const int64_t key_len = s.key_len;
  const float neg_slope = alibi_neg_slope(p, bh % p.H);
  // Read after the query loop's first barrier (or the flush's).
  if (p.rel) t5_stage(p, p.H, bh % p.H, sRel, 2);

  float gk[CPT], gv[CPT];
#pragma unroll
  for (int u = 0; u < CPT; ++u) gk[u] = gv[u] = 0.0f;

  if (j0 < key_len) {  // block-uniform: padded key tiles only write zeros
    load_tile<T, D, BK>(sK, kb, j0, s.Tk);
    load_tile<T, D, BK>(sV, vb, j0, s.Tk);
    const int64_t i_first = first_query_seeing(p, j0);
    for (int64_t i0 = (i_first / BQ) * BQ; i0 < s.Tq; i0 += BQ) {
      __syncthreads();  // the previous query tile is consumed
      load_tile<T, D, BQ>(sQ, qb, i0, s.Tq);
      load_tile<T, D, BQ>(sdO, dob, i0, s.Tq);
      for (int e = threadIdx.x; e < BQ; e += blockDim.x) {
        const int64_t i = i0 + e;
        sL[e] = i < s.Tq ? lse[s.q0 + i] : -INFINITY;
        sDel[e] = i < s.Tq ? delta[s.q0 + i] : 0.0f;
      }
      __syncthreads();

      // ALiBi: query i0 + q4 + 4t is at distance |ob + 4t| from key j.
      const float ob = alibi_origin(p, i0 + q4 - j);
#pragma unroll
      for (int t = 0; t < QPT; ++t) {
        const int ii = q4 + 4 * t;
        const int64_t i = i0 + ii;
        float pm = 0.0f, ds = 0.0f;
        if (i < s.Tq && j < visible_keys(p, key_len, i)) {
          const float* qr = sQ + ii * LD;
          const float* dor = sdO + ii * LD;
          const float* kr = sK + r * LD;
          const float* vr = sV + r * LD;
          float sc = 0.0f, dp = 0.0f;
#pragma unroll 8
          for (int c = 0; c < D; ++c) {
            sc = fmaf(qr[c], kr[c], sc);
            dp = fmaf(dor[c], vr[c], dp);
          }
          sc *= p.scale;
          if (p.alibi) sc = alibi_add(sc, neg_slope, ob, static_cast<float>(-4 * t));
          const int row = p.rel ? t5_row(p, j - t5_origin(p, i)) : 0;
          if (p.rel) sc += sRel[2 * row];
          const float pr = expf(sc - sL[ii]);
          const float mk =
              keep_factor(p, keep_scale, static_cast<uint64_t>((bh * p.Tq + i) * p.Tk + j));
          pm = pr * mk;
          const float g = pr * (dp * mk - sDel[ii]);  // dS before the scale: T5's gradient
          ds = g * p.scale;
          if (p.rel_grad) atomicAdd(sRel + 2 * row + 1, g);
        }
        sP[r * LP + ii] = pm;
        sdS[r * LP + ii] = ds;
      }
      __syncwarp();  // the quad's rows of sP and sdS are complete
      for (int ii = 0; ii < BQ; ++ii) {
        const float pm = sP[r * LP + ii], ds = sdS[r * LP + ii];
        const float* dor = sdO + ii * LD + q4;
        const float* qr = sQ + ii * LD + q4;
#pragma unroll
        for (int u = 0; u < CPT; ++u) {
          gv[u] = fmaf(pm, dor[4 * u], gv[u]);
          gk[u] = fmaf(ds, qr[4 * u], gk[u]);
        }
      }
      __syncthreads();  // all of sdS is written
      // dQ[i0 + ii, c] += sum_r dS[r, ii] K[r, c]
      for (int e = threadIdx.x; e < BQ * D; e += blockDim.x) {
        const int ii = e / D, c = e % D;
        const int64_t i = i0 + ii;
        if (i >= s.Tq) continue;
        float a = 0.0f;
#pragma unroll 8
        for (int kr = 0; kr < BK; ++kr) a = fmaf(sdS[kr * LP + ii], sK[kr * LD + c], a);
        if (a != 0.0f) atomicAdd(dq_accum + (s.q0 + i) * D + c, a);
      }
    }
  }
  if (p.rel_grad) {   // block-uniform
    __syncthreads();  // every score's sum is in sRel
    t5_flush(p, p.H, bh % p.H, sRel);
  }
  if (j < s.Tk) {
    T* dkr = dk + (s.k0 + j) * D;
    T* dvr = dv + (s.k0 + j) * D;
#pragma unroll
    for (int u = 0; u < CPT; ++u) {
      dkr[q4 + 4 * u] = from_f32<T>(gk[u]);
      dvr[q4 + 4 * u] = from_f32<T>(gv[u]);
    }
  }
}

template <class T>
__global__ void flash_cast_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t n) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[e] = from_f32<T>(src[e]);
}

// ---- launchers (tests/emulation/check_flash.sh --kernel portable runs the
// device code above on the CPU: keep this marker and the first `namespace {`)
template <class T, int D>
cudaError_t launch_forward(const FlashParams& p, T* out, float* lse, cudaStream_t stream) {
  constexpr int BQ = FwdTile<D>::BQ;
  const size_t smem = fwd_smem_bytes<D>() + flash_t5_smem(p, false);
  cudaError_t err = cudaFuncSetAttribute(
      flash_fwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.Tq + BQ - 1) / BQ), static_cast<unsigned>(p.B * p.H));
  flash_fwd_kernel<T, D><<<grid, BQ * 4, smem, stream>>>(p, out, lse);
  return cudaGetLastError();
}

template <class T, int D>
cudaError_t launch_backward(const FlashParams& p, const float* lse, const T* dout,
                            const float* delta, T* dk, T* dv, float* dq_accum,
                            cudaStream_t stream) {
  constexpr int BK = BwdTile<D>::BK;
  const size_t smem = bwd_smem_bytes<D>() + flash_t5_smem(p, true);
  cudaError_t err = cudaFuncSetAttribute(
      flash_bwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.Tk + BK - 1) / BK), static_cast<unsigned>(p.B * p.H));
  flash_bwd_kernel<T, D><<<grid, BK * 4, smem, stream>>>(p, lse, dout, delta, dk, dv, dq_accum);
  return cudaGetLastError();
}

}  // namespace

cudaError_t flash_backward_begin(const FlashParams& p, const void* out, const void* dout, void* dq,
                                 float* dq_accum, float* delta, DType dt, cudaStream_t stream,
                                 bool* done) {
  const int64_t rows = flash_q_rows(p);  // of dq, delta: both layouts
  const auto q_elems = static_cast<size_t>(rows * p.D);
  *done = false;
  cudaError_t err = cudaSuccess;
  if (q_elems > 0) {
    err = cudaMemsetAsync(dq_accum, 0, q_elems * sizeof(float), stream);
    if (err != cudaSuccess) return err;
  }
  // No keys (variable-length: the longest document has none): every gradient
  // is zero, dk and dv are empty.
  if (p.Tk == 0) {
    *done = true;
    return cudaMemsetAsync(dq, 0, q_elems * dtype_size(dt), stream);
  }
  if (rows == 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      flash_delta_kernel<T><<<grid_for(rows * 32), kThreads, 0, stream>>>(
          static_cast<const T*>(out), static_cast<const T*>(dout), delta, rows, p.D));
  return cudaGetLastError();
}

bool flash_attention_supports(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128;
}

cudaError_t flash_attention_forward(const FlashParams& p, void* out, float* lse, DType dt,
                                    cudaStream_t stream) {
  if (!flash_attention_supports(p.D) || !flash_params_valid(p)) return cudaErrorInvalidValue;
  if (p.Tq == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      ROTOR_FLASH_HEAD_DIM_SWITCH(
          p.D, HD, err = launch_forward<T, HD>(p, static_cast<T*>(out), lse, stream)));
  return err;
}

cudaError_t flash_attention_backward(const FlashParams& p, const void* out, const float* lse,
                                     const void* dout, void* dq, void* dk, void* dv,
                                     float* dq_accum, float* delta, DType dt, cudaStream_t stream) {
  if (!flash_attention_supports(p.D) || !flash_params_valid(p)) return cudaErrorInvalidValue;
  bool done = false;
  cudaError_t err = flash_backward_begin(p, out, dout, dq, dq_accum, delta, dt, stream, &done);
  if (err != cudaSuccess || done) return err;
  const int64_t q_elems = flash_q_rows(p) * p.D;
  ROTOR_FLOAT_SWITCH(dt, T, {
    ROTOR_FLASH_HEAD_DIM_SWITCH(
        p.D, HD,
        err = launch_backward<T, HD>(p, lse, static_cast<const T*>(dout), delta,
                                     static_cast<T*>(dk), static_cast<T*>(dv), dq_accum, stream));
    if (err != cudaSuccess) return err;
    if (q_elems > 0) {
      flash_cast_kernel<T>
          <<<grid_for(q_elems), kThreads, 0, stream>>>(dq_accum, static_cast<T*>(dq), q_elems);
      err = cudaGetLastError();
    }
  });
  return err;
}

}  // namespace rotor::kernels
