// Tensor-core flash attention for Volta (kernels/flash_attention_sm70.cuh).
// The decomposition is the portable kernels' (kernels/flash_attention.cu);
// the matrix products run on WMMA m16n16k16 fragments (fp16 in, fp32
// accumulate), whose register layout is opaque: every element-wise step goes
// through shared memory, where each thread knows the row and column it reads.
//   forward  -- a block of 4 warps owns 64 queries of one (b, h), a warp 16
//               rows. Per key tile: S = Q K^T (WMMA) to the warp's fp32
//               scores in shared memory; a lane pair per row does the online
//               softmax (running max m and sum l in registers, fp32), rescales
//               the row of the fp32 output accumulator (shared memory, the
//               warp's 16 x D) and writes P o dropout as fp16 over its scores;
//               then O += P V (WMMA, accumulator fragments loaded from and
//               stored back to shared memory). ALiBi's bias
//               (attention_masks.cuh) is added to each visible score here and
//               where the backward recomputes it.
//   backward -- a block of 8 warps owns 64 keys and walks 32-query tiles (the
//               causal mask skips the earlier ones). Warp w computes the 16 x 16
//               blocks S^T and dP^T of keys 16 (w / 2), queries 16 (w % 2),
//               turns them into P o M and dS (fp16, shared) and then
//               accumulates dV += (P o M)^T dO and dK += dS^T Q for its keys and
//               half of the D columns in register fragments. dQ = dS K goes to
//               the fp32 buffer with atomicAdd and is cast at the end;
//               delta = rowsum(dO o O) is a preprocessing pass.
// Shared-memory rows are padded by 8 halves (4 floats), which keeps WMMA's
// 32-byte alignment and spreads rows over banks.
// Variable-length batches (FlashCore's cu_seqlens): blockIdx.y is still
// b H + h, b now a document, and flash_seq gives where its query and key rows
// start and how many there are. Those bound every load and store (a row past
// a document is the next one's: never read, never written); the masks, the
// dropout index and ALiBi's and T5's distances keep the call's Tq and Tk (the
// longest documents'), as for the same rows regrouped dense. Query tiles
// past a document's queries (forward) and key tiles past its keys (backward)
// return before their first barrier.
//
// scripts/build_sm70.sh also runs the device code on the CPU
// (tests/emulation/flash_sm70_emulate.cpp): it takes the text from the first
// `namespace {` to `#endif  // ROTOR_FLASH_SM70_DEVICE` and replaces the
// `extern __shared__` lines, so keep those three markers as they are.
#include <cuda_fp16.h>
#include <mma.h>

#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/flash_attention_sm70.cuh"
#include "kernels/flash_common.cuh"

// Device code only for sm_7x (the kernels run on Volta, 7.0/7.2): sm_80 and
// later have their own tensor-core path, and builds for them compile empty
// kernels here.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && __CUDA_ARCH__ < 800
#define ROTOR_FLASH_SM70_DEVICE 1
#else
#define ROTOR_FLASH_SM70_DEVICE 0
#endif

namespace rotor::kernels {
namespace {

template <int D>
struct Sm70Fwd {
  static constexpr int kWarps = 4, BQ = 16 * kWarps, BK = D >= 128 ? 32 : 64;
  static constexpr int LDH = D + 8;   // halves: rows of Q, K, V
  static constexpr int LDS = BK + 4;  // floats: a warp's 16 score rows
  static constexpr int LDP = BK + 8;  // halves: its probabilities, over its scores
  static constexpr int LDO = D + 4;   // floats: its 16 output accumulator rows
  static_assert(16 * LDP * 2 <= 16 * LDS * 4, "P must fit over the scores");
  static constexpr size_t kQ = sizeof(__half) * BQ * LDH, kKV = sizeof(__half) * BK * LDH;
  static constexpr size_t kS = sizeof(float) * kWarps * 16 * LDS;
  static constexpr size_t kO = sizeof(float) * kWarps * 16 * LDO;
  static constexpr size_t smem = kQ + 2 * kKV + kS + kO;  // 62464 (D 64), 77824 (D 128)
};

template <int D>
struct Sm70Bwd {
  static constexpr int kWarps = 8, BK = 64, BQ = 32;
  static constexpr int LDH = D + 8;   // halves: rows of K, V, Q, dO
  static constexpr int LDQ = BQ + 8;  // halves: P o M and dS, key rows
  static constexpr int LDT = 16 + 4;  // floats: a warp's 16 x 16 scratch blocks
  static constexpr size_t kKV = sizeof(__half) * BK * LDH, kQ = sizeof(__half) * BQ * LDH;
  static constexpr size_t kP = sizeof(__half) * BK * LDQ;
  static constexpr size_t kT = sizeof(float) * kWarps * 2 * 16 * LDT;
  static constexpr size_t smem = 2 * kKV + 2 * kQ + 2 * kP + kT + sizeof(float) * 2 * BQ;
};

#if ROTOR_FLASH_SM70_DEVICE
namespace wmma = nvcuda::wmma;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>;
using FragAt = wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Rows [r0, r0 + R) of a [rows, D] fp16 matrix into shared memory with row
// stride LD, 16 bytes at a time (rows past the end are zero: finite values
// for the products, which the masks then ignore).
template <int D, int R, int LD>
__device__ __forceinline__ void load_rows(__half* dst, const __half* src, int64_t r0,
                                          int64_t rows) {
  constexpr int V = D / 8;
  for (int e = threadIdx.x; e < R * V; e += blockDim.x) {
    const int r = e / V, c = (e % V) * 8;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r0 + r < rows) val = *reinterpret_cast<const uint4*>(src + (r0 + r) * D + c);
    *reinterpret_cast<uint4*>(dst + r * LD + c) = val;
  }
}

template <int D>
__device__ __forceinline__ void fwd_block(const FlashParams& p, __half* __restrict__ out,
                                          float* __restrict__ lse) {
  using C = Sm70Fwd<D>;
  constexpr int BQ = C::BQ, BK = C::BK, LDH = C::LDH, LDS = C::LDS, LDP = C::LDP, LDO = C::LDO;
  constexpr int KPL = BK / 2, CPL = D / 2;  // keys and output columns per lane
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __half* sQ = reinterpret_cast<__half*>(smem_raw);                       // [BQ, LDH]
  __half* sK = sQ + BQ * LDH;                                             // [BK, LDH]
  __half* sV = sK + BK * LDH;                                             // [BK, LDH]
  float* sS = reinterpret_cast<float*>(sV + BK * LDH) + warp * 16 * LDS;  // [16, LDS]
  __half* sP = reinterpret_cast<__half*>(sS);                             // [16, LDP]
  float* sO = reinterpret_cast<float*>(sV + BK * LDH) + C::kWarps * 16 * LDS +
              warp * 16 * LDO;                                 // [16, LDO]
  float* sRel = reinterpret_cast<float*>(smem_raw + C::smem);  // [2 rel_max + 1] T5 (p.rel)

  const int64_t bh = blockIdx.y;
  const FlashSeq s = flash_seq(p, bh);  // rows and bounds; masks and dropout read p's Tq, Tk
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * BQ;
  if (i0 >= s.Tq) return;  // past the document's queries (block-uniform, before any barrier)
  const int64_t w0 = i0 + warp * 16;      // the warp's first query
  const int r = lane >> 1, h = lane & 1;  // a lane pair per query row
  const int64_t i = w0 + r;
  const __half* qb = static_cast<const __half*>(p.q) + s.q0 * D;
  const __half* kb = static_cast<const __half*>(p.k) + s.k0 * D;
  const __half* vb = static_cast<const __half*>(p.v) + s.k0 * D;
  const float keep_scale = p.dropout > 0.0f ? 1.0f / (1.0f - p.dropout) : 1.0f;

  load_rows<D, BQ, LDH>(sQ, qb, i0, s.Tq);
  for (int e = lane; e < 16 * LDO; e += 32) sO[e] = 0.0f;
  const int64_t key_len = s.key_len;
  const int64_t last = (i0 + BQ < s.Tq ? i0 + BQ : s.Tq) - 1;
  const int64_t n_block = visible_keys(p, key_len, last);  // the most any row of the block sees
  const int64_t n_row = i < s.Tq ? visible_keys(p, key_len, i) : 0;
  const uint64_t row_flat = static_cast<uint64_t>((bh * p.Tq + i) * p.Tk);
  const float neg_slope = alibi_neg_slope(p, bh % p.H), origin = alibi_origin(p, i);
  const int64_t rel_origin = t5_origin(p, i);
  if (p.rel) t5_stage(p, p.H, bh % p.H, sRel, 1);  // read after the loop's first barrier
  float m = -INFINITY, l = 0.0f;

  for (int64_t j0 = 0; j0 < n_block; j0 += BK) {
    __syncthreads();  // the previous tile is consumed (and sQ is loaded)
    load_rows<D, BK, LDH>(sK, kb, j0, s.Tk);
    load_rows<D, BK, LDH>(sV, vb, j0, s.Tk);
    __syncthreads();

    // S = Q K^T for the warp's 16 queries (K^T: K's rows read column-major).
#pragma unroll
    for (int n = 0; n < BK / 16; ++n) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int k = 0; k < D / 16; ++k) {
        FragA a;
        FragBt bt;
        wmma::load_matrix_sync(a, sQ + warp * 16 * LDH + k * 16, LDH);
        wmma::load_matrix_sync(bt, sK + n * 16 * LDH + k * 16, LDH);
        wmma::mma_sync(acc, a, bt, acc);
      }
      wmma::store_matrix_sync(sS + n * 16, acc, LDS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax; lane h of the pair owns the columns 2t + h.
    float x[KPL];
    float tile_max = -INFINITY;
#pragma unroll
    for (int t = 0; t < KPL; ++t) {
      const int col = 2 * t + h;
      x[t] = -INFINITY;
      if (j0 + col < n_row) {
        x[t] = sS[r * LDS + col] * p.scale;
        if (p.alibi) x[t] = alibi_add(x[t], neg_slope, origin, static_cast<float>(j0 + col));
        if (p.rel) x[t] += sRel[t5_row(p, j0 + col - rel_origin)];
      }
      tile_max = fmaxf(tile_max, x[t]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    // m = -inf: nothing seen yet, the row is zero, any finite factor works.
    const float alpha = m_new == -INFINITY ? 1.0f : expf(m - m_new);
    __syncwarp();  // every score is in registers before P overwrites them
    float sum = 0.0f;
#pragma unroll
    for (int t = 0; t < KPL; ++t) {
      const int col = 2 * t + h;
      const float pr = x[t] == -INFINITY ? 0.0f : expf(x[t] - m_new);
      sum += pr;
      const float w =
          pr == 0.0f ? 0.0f
                     : pr * keep_factor(p, keep_scale, row_flat + static_cast<uint64_t>(j0 + col));
      sP[r * LDP + col] = __float2half_rn(w);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    m = m_new;
    if (alpha != 1.0f) {
#pragma unroll 8
      for (int t = 0; t < CPL; ++t) sO[r * LDO + 2 * t + h] *= alpha;
    }
    __syncwarp();  // P and the rescaled rows are complete

    // O += P V.
    FragA pa[BK / 16];
#pragma unroll
    for (int k = 0; k < BK / 16; ++k) wmma::load_matrix_sync(pa[k], sP + k * 16, LDP);
#pragma unroll
    for (int d = 0; d < D / 16; ++d) {
      FragC acc;
      wmma::load_matrix_sync(acc, sO + d * 16, LDO, wmma::mem_row_major);
#pragma unroll
      for (int k = 0; k < BK / 16; ++k) {
        FragB vf;
        wmma::load_matrix_sync(vf, sV + k * 16 * LDH + d * 16, LDH);
        wmma::mma_sync(acc, pa[k], vf, acc);
      }
      wmma::store_matrix_sync(sO + d * 16, acc, LDO, wmma::mem_row_major);
    }
  }
  __syncwarp();  // the accumulator rows are stored

  // out = O / l row by row (coalesced: consecutive lanes, consecutive columns).
  for (int e = lane; e < 16 * D; e += 32) {
    const int rr = e / D, c = e % D;
    const float lr = __shfl_sync(0xffffffffu, l, 2 * rr);
    if (w0 + rr < s.Tq)
      out[(s.q0 + w0 + rr) * D + c] = __float2half_rn(lr > 0.0f ? sO[rr * LDO + c] / lr : 0.0f);
  }
  if (h == 0 && i < s.Tq) lse[s.q0 + i] = l > 0.0f ? m + logf(l) : -INFINITY;
}

template <int D>
__device__ __forceinline__ void bwd_block(const FlashParams& p, const float* __restrict__ lse,
                                          const __half* __restrict__ dout,
                                          const float* __restrict__ delta, __half* __restrict__ dk,
                                          __half* __restrict__ dv, float* __restrict__ dq_accum) {
  using C = Sm70Bwd<D>;
  constexpr int BK = C::BK, BQ = C::BQ, LDH = C::LDH, LDQ = C::LDQ, LDT = C::LDT;
  constexpr int NC = D / 32;  // 16-column blocks of dK and dV per warp (half of D)
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int kw = warp >> 1, qh = warp & 1;
  __half* sK = reinterpret_cast<__half*>(smem_raw);  // [BK, LDH]
  __half* sV = sK + BK * LDH;                        // [BK, LDH]
  __half* sQ = sV + BK * LDH;                        // [BQ, LDH]
  __half* sdO = sQ + BQ * LDH;                       // [BQ, LDH]
  __half* sP = sdO + BQ * LDH;                       // [BK, LDQ] P o M, key rows
  __half* sdS = sP + BK * LDQ;                       // [BK, LDQ] scale * dS, key rows
  float* sT = reinterpret_cast<float*>(sdS + BK * LDQ) + warp * 2 * 16 * LDT;
  float* sT1 = sT + 16 * LDT;  // the warp's two [16, LDT] blocks
  float* sL = reinterpret_cast<float*>(sdS + BK * LDQ) + C::kWarps * 2 * 16 * LDT;  // [BQ]
  float* sDel = sL + BQ;                                                            // [BQ]
  // T5 (p.rel): [2 rel_max + 1, 2], each row of this head's column of the
  // table and its gradient summed over the block's scores.
  float* sRel = reinterpret_cast<float*>(smem_raw + C::smem);

  const int64_t bh = blockIdx.y;
  const FlashSeq s = flash_seq(p, bh);  // rows and bounds; masks and dropout read p's Tq, Tk
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * BK;
  if (j0 >= s.Tk) return;  // past the document's keys (block-uniform, before any barrier)
  const __half* qb = static_cast<const __half*>(p.q) + s.q0 * D;
  const __half* kb = static_cast<const __half*>(p.k) + s.k0 * D;
  const __half* vb = static_cast<const __half*>(p.v) + s.k0 * D;
  const __half* dob = dout + s.q0 * D;
  const float keep_scale = p.dropout > 0.0f ? 1.0f / (1.0f - p.dropout) : 1.0f;
  const int64_t key_len = s.key_len;
  const float neg_slope = alibi_neg_slope(p, bh % p.H);
  // Read after the query loop's first barrier (or the flush's).
  if (p.rel) t5_stage(p, p.H, bh % p.H, sRel, 2);

  FragC gk[NC], gv[NC];  // dK, dV: keys 16 kw.., columns qh D/2 + 16 c..
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    wmma::fill_fragment(gk[c], 0.0f);
    wmma::fill_fragment(gv[c], 0.0f);
  }

  if (j0 < key_len) {  // block-uniform: padded key tiles only write zeros
    load_rows<D, BK, LDH>(sK, kb, j0, s.Tk);
    load_rows<D, BK, LDH>(sV, vb, j0, s.Tk);
    const int64_t i_first = first_query_seeing(p, j0);
    for (int64_t i0 = (i_first / BQ) * BQ; i0 < s.Tq; i0 += BQ) {
      __syncthreads();  // the previous query tile is consumed
      load_rows<D, BQ, LDH>(sQ, qb, i0, s.Tq);
      load_rows<D, BQ, LDH>(sdO, dob, i0, s.Tq);
      for (int e = threadIdx.x; e < BQ; e += blockDim.x) {
        const int64_t i = i0 + e;
        sL[e] = i < s.Tq ? lse[s.q0 + i] : -INFINITY;
        sDel[e] = i < s.Tq ? delta[s.q0 + i] : 0.0f;
      }
      __syncthreads();

      // S^T = K Q^T and dP^T = V dO^T: keys 16 kw.., queries 16 qh..
      {
        FragC fs, fdp;
        wmma::fill_fragment(fs, 0.0f);
        wmma::fill_fragment(fdp, 0.0f);
#pragma unroll 2
        for (int k = 0; k < D / 16; ++k) {
          FragA a;
          FragBt bt;
          wmma::load_matrix_sync(a, sK + kw * 16 * LDH + k * 16, LDH);
          wmma::load_matrix_sync(bt, sQ + qh * 16 * LDH + k * 16, LDH);
          wmma::mma_sync(fs, a, bt, fs);
          wmma::load_matrix_sync(a, sV + kw * 16 * LDH + k * 16, LDH);
          wmma::load_matrix_sync(bt, sdO + qh * 16 * LDH + k * 16, LDH);
          wmma::mma_sync(fdp, a, bt, fdp);
        }
        wmma::store_matrix_sync(sT, fs, LDT, wmma::mem_row_major);
        wmma::store_matrix_sync(sT1, fdp, LDT, wmma::mem_row_major);
      }
      __syncwarp();
#pragma unroll 1
      for (int t = 0; t < 8; ++t) {
        const int e = lane + 32 * t, rr = e >> 4, cc = e & 15;
        const int kr = kw * 16 + rr, qc = qh * 16 + cc;
        const int64_t j = j0 + kr, i = i0 + qc;
        float pm = 0.0f, ds = 0.0f;
        if (i < s.Tq && j < visible_keys(p, key_len, i)) {
          float x = sT[rr * LDT + cc] * p.scale;
          if (p.alibi) x = alibi_add(x, neg_slope, alibi_origin(p, i), static_cast<float>(j));
          const int row = p.rel ? t5_row(p, j - t5_origin(p, i)) : 0;
          if (p.rel) x += sRel[2 * row];
          const float pr = expf(x - sL[qc]);
          const float mk =
              keep_factor(p, keep_scale, static_cast<uint64_t>((bh * p.Tq + i) * p.Tk + j));
          pm = pr * mk;
          const float g = pr * (sT1[rr * LDT + cc] * mk - sDel[qc]);  // dS before the scale
          ds = g * p.scale;
          if (p.rel_grad) atomicAdd(sRel + 2 * row + 1, g);
        }
        sP[kr * LDQ + qc] = __float2half_rn(pm);
        sdS[kr * LDQ + qc] = __float2half_rn(ds);
      }
      __syncthreads();  // all of sP and sdS are written

      // dV += (P o M)^T dO and dK += dS^T Q for the warp's keys and columns.
#pragma unroll 1
      for (int k = 0; k < BQ / 16; ++k) {
        FragA ap, as;
        wmma::load_matrix_sync(ap, sP + kw * 16 * LDQ + k * 16, LDQ);
        wmma::load_matrix_sync(as, sdS + kw * 16 * LDQ + k * 16, LDQ);
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          const int col = qh * (D / 2) + c * 16;
          FragB bf;
          wmma::load_matrix_sync(bf, sdO + k * 16 * LDH + col, LDH);
          wmma::mma_sync(gv[c], ap, bf, gv[c]);
          wmma::load_matrix_sync(bf, sQ + k * 16 * LDH + col, LDH);
          wmma::mma_sync(gk[c], as, bf, gk[c]);
        }
      }

      // dQ[i0.., :] += dS K, as 2 x D/16 blocks of 16 x 16 over the warps
      // (dS = the key-row sdS read column-major).
      for (int blk = warp; blk < 2 * (D / 16); blk += C::kWarps) {
        const int qr = blk / (D / 16), cb = blk % (D / 16);
        FragC fq;
        wmma::fill_fragment(fq, 0.0f);
#pragma unroll
        for (int k = 0; k < BK / 16; ++k) {
          FragAt at;
          FragB bf;
          wmma::load_matrix_sync(at, sdS + k * 16 * LDQ + qr * 16, LDQ);
          wmma::load_matrix_sync(bf, sK + k * 16 * LDH + cb * 16, LDH);
          wmma::mma_sync(fq, at, bf, fq);
        }
        wmma::store_matrix_sync(sT, fq, LDT, wmma::mem_row_major);
        __syncwarp();
#pragma unroll
        for (int t = 0; t < 8; ++t) {
          const int e = lane + 32 * t, rr = e >> 4, cc = e & 15;
          const int64_t i = i0 + qr * 16 + rr;
          const float a = sT[rr * LDT + cc];
          if (i < s.Tq && a != 0.0f) atomicAdd(dq_accum + (s.q0 + i) * D + cb * 16 + cc, a);
        }
        __syncwarp();  // sT is read before the next block overwrites it
      }
    }
  }

  if (p.rel_grad) {   // block-uniform
    __syncthreads();  // every score's sum is in sRel
    t5_flush(p, p.H, bh % p.H, sRel);
  }

  // dK and dV through the warp's scratch, 16 x 16 at a time.
#pragma unroll
  for (int c = 0; c < NC; ++c) {
    wmma::store_matrix_sync(sT, gk[c], LDT, wmma::mem_row_major);
    wmma::store_matrix_sync(sT1, gv[c], LDT, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const int e = lane + 32 * t, rr = e >> 4, cc = e & 15;
      const int64_t j = j0 + kw * 16 + rr;
      const int64_t o = (s.k0 + j) * D + qh * (D / 2) + c * 16 + cc;
      if (j < s.Tk) {
        dk[o] = __float2half_rn(sT[rr * LDT + cc]);
        dv[o] = __float2half_rn(sT1[rr * LDT + cc]);
      }
    }
    __syncwarp();
  }
}
#endif  // ROTOR_FLASH_SM70_DEVICE

template <int D>
__global__ void __launch_bounds__(Sm70Fwd<D>::kWarps * 32)
    flash_sm70_fwd_kernel(FlashParams p, __half* __restrict__ out, float* __restrict__ lse) {
#if ROTOR_FLASH_SM70_DEVICE
  fwd_block<D>(p, out, lse);
#endif
}

template <int D>
__global__ void __launch_bounds__(Sm70Bwd<D>::kWarps * 32)
    flash_sm70_bwd_kernel(FlashParams p, const float* __restrict__ lse,
                          const __half* __restrict__ dout, const float* __restrict__ delta,
                          __half* __restrict__ dk, __half* __restrict__ dv,
                          float* __restrict__ dq_accum) {
#if ROTOR_FLASH_SM70_DEVICE
  bwd_block<D>(p, lse, dout, delta, dk, dv, dq_accum);
#endif
}

__global__ void flash_sm70_cast_kernel(const float* __restrict__ src, __half* __restrict__ dst,
                                       int64_t n) {
#if ROTOR_FLASH_SM70_DEVICE
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[e] = __float2half_rn(src[e]);
#endif
}

template <int D>
cudaError_t launch_forward(const FlashParams& p, __half* out, float* lse, cudaStream_t stream) {
  using C = Sm70Fwd<D>;
  const size_t smem = C::smem + flash_t5_smem(p, false);
  cudaError_t err =
      cudaFuncSetAttribute(flash_sm70_fwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.Tq + C::BQ - 1) / C::BQ),
                  static_cast<unsigned>(p.B * p.H));
  flash_sm70_fwd_kernel<D><<<grid, C::kWarps * 32, smem, stream>>>(p, out, lse);
  return cudaGetLastError();
}

template <int D>
cudaError_t launch_backward(const FlashParams& p, const float* lse, const __half* dout,
                            const float* delta, __half* dk, __half* dv, float* dq_accum,
                            cudaStream_t stream) {
  using C = Sm70Bwd<D>;
  const size_t smem = C::smem + flash_t5_smem(p, true);
  cudaError_t err =
      cudaFuncSetAttribute(flash_sm70_bwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.Tk + C::BK - 1) / C::BK),
                  static_cast<unsigned>(p.B * p.H));
  flash_sm70_bwd_kernel<D>
      <<<grid, C::kWarps * 32, smem, stream>>>(p, lse, dout, delta, dk, dv, dq_accum);
  return cudaGetLastError();
}

}  // namespace

bool flash_attention_sm70_supports(int head_dim) {
  return head_dim == 64 || head_dim == 128;
}

namespace {
bool sm70_device_ok(int dev) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  // Volta (7.0, 7.2): the tiles need up to 81 KiB of shared memory, more than
  // Turing's (7.5) 64 KiB.
  if (major != 7 || minor >= 5) return false;
  // A binary built for sm_80+ only has no Volta code for the kernels.
  cudaFuncAttributes a{};
  if (cudaFuncGetAttributes(&a, flash_sm70_fwd_kernel<64>) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.binaryVersion >= 70 && a.binaryVersion < 80;
}
}  // namespace

// Asked on every attention call that reaches it: the answer is kept per
// device (a benign race: every asker computes the same value).
bool flash_attention_sm70_available() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  static int known[64] = {};  // 0 not asked yet, 1 yes, 2 no
  if (dev < 0 || dev >= 64) return sm70_device_ok(dev);
  if (known[dev] == 0) known[dev] = sm70_device_ok(dev) ? 1 : 2;
  return known[dev] == 1;
}

cudaError_t flash_attention_sm70_forward(const FlashParams& p, void* out, float* lse,
                                         cudaStream_t stream) {
  if (!flash_attention_sm70_available()) return cudaErrorNotSupported;
  if (!flash_attention_sm70_supports(p.D) || !flash_params_valid(p)) return cudaErrorInvalidValue;
  if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v)) return cudaErrorNotSupported;
  if (p.Tq == 0) return cudaSuccess;
  __half* o = static_cast<__half*>(out);
  return p.D == 64 ? launch_forward<64>(p, o, lse, stream) : launch_forward<128>(p, o, lse, stream);
}

cudaError_t flash_attention_sm70_backward(const FlashParams& p, const void* out, const float* lse,
                                          const void* dout, void* dq, void* dk, void* dv,
                                          float* dq_accum, float* delta, cudaStream_t stream) {
  if (!flash_attention_sm70_available()) return cudaErrorNotSupported;
  if (!flash_attention_sm70_supports(p.D) || !flash_params_valid(p)) return cudaErrorInvalidValue;
  if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(dout))
    return cudaErrorNotSupported;
  bool done = false;
  cudaError_t err =
      flash_backward_begin(p, out, dout, dq, dq_accum, delta, DType::F16, stream, &done);
  if (err != cudaSuccess || done) return err;
  const int64_t q_elems = flash_q_rows(p) * p.D;
  const auto* dop = static_cast<const __half*>(dout);
  auto* dkp = static_cast<__half*>(dk);
  auto* dvp = static_cast<__half*>(dv);
  err = p.D == 64 ? launch_backward<64>(p, lse, dop, delta, dkp, dvp, dq_accum, stream)
                  : launch_backward<128>(p, lse, dop, delta, dkp, dvp, dq_accum, stream);
  if (err != cudaSuccess) return err;
  if (q_elems > 0) {
    flash_sm70_cast_kernel<<<grid_for(q_elems), kThreads, 0, stream>>>(
        dq_accum, static_cast<__half*>(dq), q_elems);
    err = cudaGetLastError();
  }
  return err;
}

}  // namespace rotor::kernels
