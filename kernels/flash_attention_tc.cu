// Flash attention on tensor cores (kernels/flash_attention_tc.cuh): the
// FlashAttention-2 decomposition (Dao 2023) written from the PTX ISA with
// inline mma.sync / ldmatrix / cp.async, for sm_80 and newer (Hopper runs it
// too; it uses no wgmma/TMA). The portable kernels (kernels/flash_attention.cu)
// are the correctness baseline for the same contract; the CPU twin is
// src/ops/flash_attention.cpp.
//
// Fragments of mma.sync.aligned.m16n8k16 with 16-bit A/B and fp32 C/D (PTX ISA,
// "Matrix Fragments for mma.m16n8k16"), with g = lane / 4 ("groupID") and
// t = lane % 4 ("threadID_in_group"); every .b32 register holds two 16-bit
// elements, the lower column (A, C) or row (B) in the low half:
//   A (16 x 16, row-major): a0 = A[g][2t..2t+1]      a1 = A[g+8][2t..2t+1]
//                           a2 = A[g][2t+8..2t+9]    a3 = A[g+8][2t+8..2t+9]
//   B (16 x 8, "col"):      b0 = B[2t..2t+1][g]      b1 = B[2t+8..2t+9][g]
//   C, D (16 x 8, fp32):    c0, c1 = C[g][2t..2t+1]  c2, c3 = C[g+8][2t..2t+1]
// ldmatrix.m8n8.x4: lanes 8m..8m+7 give the row addresses of 8x8 matrix m;
// register m of a lane receives row g, elements 2t..2t+1 of matrix m (with
// .trans: elements [2t][g] and [2t+1][g], i.e. the transpose). So
//   - an A tile stored row-major: lane address row (lane & 15), column
//     8 (lane >> 4) gives a0..a3 in order;
//   - a B operand stored as [n][k] (K for S = Q K^T, Q for S^T = K Q^T): lane
//     address row n0 + (lane & 7) + 8 (lane >> 4), column k0 + 8 ((lane >> 3) & 1)
//     gives b0, b1 of n-tile n0 and b0, b1 of n-tile n0 + 8;
//   - a B operand stored as [k][n] (V for P V, dO for dV = P^T dO, Q for
//     dK = dS^T Q, K for dQ = dS K) with .trans: row k0 + (lane & 7) +
//     8 ((lane >> 3) & 1), column n0 + 8 (lane >> 4), same registers;
//   - an A operand stored transposed ([k][m], dS^T for dQ = dS K) with .trans:
//     row k0 + (lane & 7) + 8 (lane >> 4), column m0 + 8 ((lane >> 3) & 1).
// The C fragments of S (two n-tiles of 8 keys) are the A fragment of the next
// product (P V) without a trip through shared memory, as in FlashAttention-2.
//
// Shared-memory rows are padded by 8 elements (16 bytes): the 8 row addresses
// of an ldmatrix then fall on 8 different 16-byte bank groups (stride 9, 17 or
// 5 mod 8 groups), and cp.async destinations stay 16-byte aligned.
//
// Forward: a block of 4 warps owns 64 queries of one (b, h), 16 per warp; Q
// fragments stay in registers; K/V tiles of 64 keys are double-buffered with
// cp.async (tile t + 1 loads while tile t computes). Key tiles past the last
// key any row of the block sees (padding, causal) are never loaded; the
// per-element mask runs only on tiles that some row does not see entirely.
// Online softmax in registers in the log2 domain (exp2f; lse converted back).
// ALiBi's bias (kernels/attention_masks.cuh) is one FMA per score on the
// fragments, in the log2 domain, forward and backward (where S is recomputed).
// T5's is a shared-memory read and an FMA per score (the head's column of the
// table staged once per block); the backward adds each score's unscaled dS
// to the block's shared column of the table gradient (a shared atomic per
// score) and flushes it with global atomics at the end.
//
// Backward: a block of 4 warps owns 64 keys, 16 per warp, and walks the query
// tiles that can see them (32 queries for D = 128, 64 otherwise), Q/dO tiles
// double-buffered; S^T = K Q^T and dP^T = V dO^T per warp, P recomputed from
// lse, dV += (P o M)^T dO and dK += dS^T Q accumulate in registers. dS^T goes
// to shared memory and dQ += dS K (each warp a quarter of the columns) is added
// to an fp32 scratch with atomics: the sum over key blocks is therefore not
// bitwise deterministic from run to run (the portable kernel's choice too). A
// last pass casts dq (and rotates it back under RoPE). delta = rowsum(dO o O)
// is a preprocessing pass.
//
// Variable-length layout (FlashCore's cu_seqlens): each block takes its
// (b, h)'s rows from flash_seq (flash_common.cuh) -- where its document's
// queries and keys start in [H, total, D], how many there are, its key
// length -- for pointer bases, row bounds and key_len, while the masks, the
// dropout index, ALiBi's and T5's distances and RoPE's positions keep the
// call's Tq and Tk (those of the documents regrouped as [B, H, Tq, D]). The
// grids stay (ceil(Tq / BQ), B H) and (ceil(Tk / BK), B H), Tq and Tk the
// longest documents': a forward block whose query tile starts past its
// document's queries, or a backward block whose key tile starts past its
// keys, returns at once. The backward, at the register limit, reads them
// from shared memory in its query loop (as ALiBi's slope); the dq cast finds
// each row's position with flash_q_position.
//
// RoPE in the kernel: a small kernel writes the cos/sin table of
// src/core/rope.h (double angles, no fast math) for the positions used; the
// kernels rotate each Q and K tile in shared memory after it lands (rounding
// to the storage type, as a separate rotation pass would) and rotate dK in
// registers and dQ in the cast pass back before writing.
//
// Device code is compiled only for __CUDA_ARCH__ >= 800; for older targets
// the kernels are empty stubs, and the host entry points refuse devices below
// compute capability 8.0 (flash_tc_device_ok).
//
// tests/emulation/check_flash.sh runs the device code on the CPU
// (tests/emulation/flash_tc_emulate.cpp): it takes the text from the first
// `namespace {` to `// ---- launchers`, replaces the `extern __shared__` lines
// and the section from `// ---- PTX wrappers` to the next `// ---- ` line
// (by emulations), so keep those markers as they are.
#include <type_traits>

#include "core/philox.h"
#include "core/rope.h"
#include "kernels/common.cuh"
#include "kernels/flash_attention_tc.cuh"
#include "kernels/flash_common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define ROTOR_TC_BODY 0
#else
#define ROTOR_TC_BODY 1
#endif

namespace rotor::kernels {
namespace {

constexpr int kTcThreads = 128;  // 4 warps

template <int D>
struct TcFwd {
  static constexpr int BQ = 64, BK = 64, LDS = D + 8;
  // T5's bias at head dims 32 and 64, as the backward (TcBwd::kT5).
  static constexpr bool kT5 = D < 128;
};
template <int D>
struct TcBwd {
  static constexpr int BK = 64, BQ = D >= 128 ? 32 : 64, LDS = D + 8, LDP = BQ + 8;
  // T5's bias (FlashT5::rel) at head dims 32 and 64: at 128 the
  // backward is at 255 registers without it, and sm_80 spills with it.
  static constexpr bool kT5 = D < 128;
};

template <class T, int D>
constexpr size_t tc_fwd_smem() {
  using S = TcFwd<D>;
  return sizeof(T) * static_cast<size_t>(S::BQ + 4 * S::BK) * S::LDS;
}
template <class T, int D>
constexpr size_t tc_bwd_smem() {
  using S = TcBwd<D>;
  return sizeof(T) * (static_cast<size_t>(2 * S::BK + 4 * S::BQ) * S::LDS +
                      static_cast<size_t>(S::BK) * S::LDP) +
         sizeof(float) * (4 * S::BQ + 4) + sizeof(FlashSeq);
}
// With T5's bias: the forward adds the tile's bias by diagonal (BQ + BK
// floats), the backward the head's column and its sums (flash_t5_smem).
template <class T, int D>
size_t tc_fwd_smem_of(const FlashParams& p) {
  using S = TcFwd<D>;
  return tc_fwd_smem<T, D>() + (p.rel ? sizeof(float) * (S::BQ + S::BK) : 0);
}
template <class T, int D>
size_t tc_bwd_smem_of(const FlashParams& p) {
  return tc_bwd_smem<T, D>() + flash_t5_smem(p, true);
}

#if ROTOR_TC_BODY
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- PTX wrappers ---------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; src_bytes 0 zero-fills the destination.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
// Two matrices: lanes 0..15 give the addresses (the others' are ignored).
__device__ __forceinline__ void ldsm_x2_t(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_u32(p)));
}

// c += A B (m16n8k16, fp32 accumulators).
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// ---- register packing ---------------------------------------------------------
// Two floats rounded to T, x in the low half (the lower column).
template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// ---- masks, dropout, tiles ----------------------------------------------------------
// The kernels' FlashCore: the kernel parameter copied field by field. Since
// the variable-length fields it is over 128 bytes, and a by-value parameter
// that large is read through a pointer register at every use rather than as
// constant-bank operands: that cost the D 32 forward about 30 registers (a
// block per SM) and gave the D 128 backward a stack frame on sm_90. A new
// field must be copied here too.
static_assert(sizeof(FlashCore) == 160, "FlashCore changed: copy its new fields in tc_core");
__device__ __forceinline__ FlashCore tc_core(const FlashCore& c) {
  FlashCore p;
  p.q = c.q;
  p.k = c.k;
  p.v = c.v;
  p.B = c.B;
  p.H = c.H;
  p.Tq = c.Tq;
  p.Tk = c.Tk;
  p.D = c.D;
  p.scale = c.scale;
  p.causal = c.causal;
  p.key_lengths = c.key_lengths;
  p.dropout = c.dropout;
  p.seed = c.seed;
  p.stream_id = c.stream_id;
  p.alibi = c.alibi;
  p.bias_q_offset = c.bias_q_offset;
  p.bias_k_offset = c.bias_k_offset;
  p.cu_seqlens_q = c.cu_seqlens_q;
  p.cu_seqlens_k = c.cu_seqlens_k;
  p.total_q = c.total_q;
  p.total_k = c.total_k;
  return p;
}

// The dropout factor of element (i, j) when dropout > 0 (every caller tests
// it): rotor's Philox on the flat [B, H, Tq, Tk] index, as every attention
// kernel draws it.
__device__ __forceinline__ float tc_keep(const FlashCore& p, float keep_scale, int64_t bh,
                                         int64_t i, int64_t j) {
  return dropout_draw(p, keep_scale, static_cast<uint64_t>((bh * p.Tq + i) * p.Tk + j));
}

// Rows [r0, r0 + R) of a [*, D] matrix into a shared tile of row stride D + 8;
// rows >= limit are zero-filled (never read: padding may hold anything).
template <class T, int D, int R>
__device__ __forceinline__ void load_tile_async(T* dst, const T* src, int64_t r0, int64_t limit) {
  constexpr int CPR = D / 8;  // 16-byte chunks per row
  for (int e = threadIdx.x; e < R * CPR; e += kTcThreads) {
    const int r = e / CPR, c = (e % CPR) * 8;
    const int64_t row = r0 + r;
    const bool ok = row < limit;
    cp_async16(smem_u32(dst + r * (D + 8) + c), src + (ok ? row : 0) * D + c, ok);
  }
}

// Rotates rows [0, rows) of a shared tile, row r at position pos0 + r, by the
// table of rope_table_kernel (rope::rotate, fp32, rounded to T).
template <class T, int D, int R>
__device__ __forceinline__ void rope_tile(T* tile, const float2* table, int64_t pos0,
                                          int64_t rows) {
  constexpr int HALF = D / 2;
  for (int e = threadIdx.x; e < R * HALF; e += kTcThreads) {
    const int r = e / HALF, i = e % HALF;
    if (r >= rows) continue;
    T* x = tile + r * (D + 8) + 2 * i;
    const float2 cs = table[(pos0 + r) * HALF + i];
    float y0, y1;
    rope::rotate(to_f32(x[0]), to_f32(x[1]), rope::Rotation{cs.x, cs.y}, y0, y1);
    x[0] = from_f32<T>(y0);
    x[1] = from_f32<T>(y1);
  }
}

#endif  // ROTOR_TC_BODY

// table[t * D/2 + i] = (cos, sin) of pair i at position t (core/rope.h, double
// angles; `rope` resolved at the call's length, every dimension rotated).
__global__ void tc_rope_table_kernel(float2* table, int64_t positions, int64_t D,
                                     rope::Params rope) {
  const int64_t half = D / 2, total = positions * half;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / half, i = e - t * half;
    const rope::Rotation r = rope::rotation(rope, t, i, D);
    table[e] = make_float2(r.cos, r.sin);
  }
}

// ---- forward ------------------------------------------------------------------------
template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    flash_tc_fwd_kernel(FlashCore core, FlashRope rope, const float2* __restrict__ table,
                        T* __restrict__ out, float* __restrict__ lse, FlashT5 rb) {
#if ROTOR_TC_BODY
  const FlashCore p = tc_core(core);
  constexpr int BQ = TcFwd<D>::BQ, BK = TcFwd<D>::BK, LDS = TcFwd<D>::LDS;
  constexpr int KS = D / 16;  // k-steps of Q K^T
  constexpr int NT = BK / 8;  // n-tiles of S (8 keys each)
  constexpr int ND = D / 8;   // n-tiles of O
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);  // [BQ, LDS]
  T* sK = sQ + BQ * LDS;                   // [2, BK, LDS]
  T* sV = sK + 2 * BK * LDS;               // [2, BK, LDS]
  // T5 (rb.rel): the tile's bias by diagonal, [BQ + BK - 1]: query i0 + ii
  // and key j0 + jj read sDiag[jj - ii + BQ - 1] (one address register per
  // lane, constant offsets per element: a clamped table row per score costs
  // the D 32 kernel a block per SM in registers).
  float* sDiag = reinterpret_cast<float*>(smem_raw + tc_fwd_smem<T, D>());
  constexpr bool kT5 = TcFwd<D>::kT5;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int64_t bh = blockIdx.y;
  const FlashSeq s = flash_seq(p, bh);
  // The last query tiles see the most keys under the causal mask: start them first.
  const int64_t i0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * BQ;
  if (i0 >= s.Tq) return;  // past the document's queries (block-uniform)
  const T* qb = static_cast<const T*>(p.q) + s.q0 * D;
  const T* kb = static_cast<const T*>(p.k) + s.k0 * D;
  const T* vb = static_cast<const T*>(p.v) + s.k0 * D;
  const float keep_scale = p.dropout > 0.0f ? 1.0f / (1.0f - p.dropout) : 1.0f;
  const float sl2 = p.scale * kLog2e;
  const float nsl2 = alibi_neg_slope(p, bh % p.H) * kLog2e;  // ALiBi in the log2 domain

  const int64_t key_len = s.key_len;
  const int64_t last = (i0 + BQ < s.Tq ? i0 + BQ : s.Tq) - 1;
  const int64_t n_block = visible_keys(p, key_len, last);  // the most any row sees
  const int64_t n_first = visible_keys(p, key_len, i0);    // the fewest
  const int64_t row_a = i0 + warp * 16 + g, row_b = row_a + 8;
  const int64_t n_a = visible_keys(p, key_len, row_a), n_b = visible_keys(p, key_len, row_b);
  const int n_tiles = static_cast<int>((n_block + BK - 1) / BK);

  float o[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;  // l: this thread's part
  uint32_t qf[KS][4];

  if (n_tiles > 0) {
    load_tile_async<T, D, BQ>(sQ, qb, i0, s.Tq);
    load_tile_async<T, D, BK>(sK, kb, 0, n_block);
    load_tile_async<T, D, BK>(sV, vb, 0, n_block);
    cp_async_commit();
  }
  for (int t = 0; t < n_tiles; ++t) {
    const int64_t j0 = static_cast<int64_t>(t) * BK;
    if (t + 1 < n_tiles) {  // the other buffer was released by the last __syncthreads
      load_tile_async<T, D, BK>(sK + ((t + 1) & 1) * BK * LDS, kb, j0 + BK, n_block);
      load_tile_async<T, D, BK>(sV + ((t + 1) & 1) * BK * LDS, vb, j0 + BK, n_block);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    if (kT5 && rb.rel) {  // the last tile's reads of sDiag ended at its closing barrier
      const int64_t base = j0 - t5_origin(p, i0) - (BQ - 1), h = bh % p.H;
      for (int d = threadIdx.x; d < BQ + BK - 1; d += kTcThreads)
        sDiag[d] = rb.rel[t5_row(rb, base + d) * p.H + h];
    }
    __syncthreads();
    T* cK = sK + (t & 1) * BK * LDS;
    const T* cV = sV + (t & 1) * BK * LDS;
    if (rope.enabled) {
      if (t == 0) rope_tile<T, D, BQ>(sQ, table, rope.q_offset + i0, s.Tq - i0);
      rope_tile<T, D, BK>(cK, table, rope.k_offset + j0, n_block - j0);
      __syncthreads();
    }
    if (t == 0) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
        ldsm_x4(qf[ks], sQ + (warp * 16 + (lane & 15)) * LDS + ks * 16 + (lane >> 4) * 8);
    }

    // S = Q K^T for the warp's 16 rows x BK keys.
    float s[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        uint32_t kf[4];
        ldsm_x4(kf, cK + (nt * 8 + (lane & 7) + (lane >> 4) * 8) * LDS + ks * 16 +
                        ((lane >> 3) & 1) * 8);
        mma16816<T>(s[nt], qf[ks], kf[0], kf[1]);
        mma16816<T>(s[nt + 1], qf[ks], kf[2], kf[3]);
      }
    }

    // Scale into the log2 domain, add ALiBi's bias, mask, online softmax (rows
    // a = g, b = g + 8). ALiBi: element (nt, e) is key j0 + 8 nt + 2 tq + (e & 1)
    // of row a (e < 2) or a + 8, at distance |oa - (8 nt + (e & 1) - 8 (e >> 1))|;
    // T5: sDiag[8 nt + (e & 1) - 8 (e >> 1)] past this lane's diagonal.
    const bool full = j0 + BK <= n_first;
    const float oa = alibi_origin(p, row_a - j0 - tq * 2);
    const float* diag = sDiag + (BQ - 1) + tq * 2 - warp * 16 - g;
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[nt][e] * sl2;
        if (p.alibi)
          x = alibi_add(x, nsl2, oa, static_cast<float>(nt * 8 + (e & 1) - (e < 2 ? 0 : 8)));
        if (kT5 && rb.rel) x = fmaf(diag[nt * 8 + (e & 1) - (e < 2 ? 0 : 8)], kLog2e, x);
        if (!full) {
          const int64_t j = j0 + nt * 8 + tq * 2 + (e & 1);
          if (j >= (e < 2 ? n_a : n_b)) x = -INFINITY;
        }
        s[nt][e] = x;
      }
      mx_a = fmaxf(mx_a, fmaxf(s[nt][0], s[nt][1]));
      mx_b = fmaxf(mx_b, fmaxf(s[nt][2], s[nt][3]));
    }
    mx_a = quad_max(mx_a);
    mx_b = quad_max(mx_b);
    const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
    // Nothing seen yet (mn = -inf): subtract 0 so that exp2 gives 0, not NaN.
    const float mu_a = mn_a == -INFINITY ? 0.0f : mn_a, mu_b = mn_b == -INFINITY ? 0.0f : mn_b;
    const float alpha_a = exp2f(m_a - mu_a), alpha_b = exp2f(m_b - mu_b);
    m_a = mn_a;
    m_b = mn_b;
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pr = exp2f(s[nt][e] - (e < 2 ? mu_a : mu_b));
        if (e < 2)
          sum_a += pr;
        else
          sum_b += pr;
        float w = pr;
        if (p.dropout > 0.0f && pr != 0.0f)
          w *= tc_keep(p, keep_scale, bh, e < 2 ? row_a : row_b, j0 + nt * 8 + tq * 2 + (e & 1));
        s[nt][e] = w;  // P o dropout, the A operand of P V
      }
    }
    l_a = l_a * alpha_a + sum_a;
    l_b = l_b * alpha_b + sum_b;
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) {
      o[nd][0] *= alpha_a;
      o[nd][1] *= alpha_a;
      o[nd][2] *= alpha_b;
      o[nd][3] *= alpha_b;
    }

    // O += P V: the C fragments of n-tiles 2kk, 2kk + 1 are the A fragment of k-step kk.
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                              pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int nd = 0; nd < ND; nd += 2) {
        uint32_t vf[4];
        ldsm_x4_t(vf, cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + nd * 8 +
                          (lane >> 4) * 8);
        mma16816<T>(o[nd], pa, vf[0], vf[1]);
        mma16816<T>(o[nd + 1], pa, vf[2], vf[3]);
      }
    }
    __syncthreads();  // this buffer is consumed: the next iteration may refill it
  }

  l_a = quad_sum(l_a);
  l_b = quad_sum(l_b);
  const float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f, inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = h == 0 ? row_a : row_b;
    if (row >= s.Tq) continue;
    const float inv = h == 0 ? inv_a : inv_b;
    uint32_t* orow = reinterpret_cast<uint32_t*>(out + (s.q0 + row) * D);
#pragma unroll
    for (int nd = 0; nd < ND; ++nd)
      orow[nd * 4 + tq] = pack2<T>(o[nd][2 * h] * inv, o[nd][2 * h + 1] * inv);
    if (tq == 0) {
      const float l = h == 0 ? l_a : l_b, m = h == 0 ? m_a : m_b;
      lse[s.q0 + row] = l > 0.0f ? m * kLn2 + logf(l) : -INFINITY;
    }
  }
#endif  // ROTOR_TC_BODY
}

// ---- backward -----------------------------------------------------------------------
template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    flash_tc_bwd_kernel(FlashCore core, FlashRope rope, const float2* __restrict__ table,
                        const float* __restrict__ lse, const T* __restrict__ dout,
                        const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
                        float* __restrict__ dq_accum, FlashT5 rb) {
#if ROTOR_TC_BODY
  const FlashCore p = tc_core(core);
  constexpr int BK = TcBwd<D>::BK, BQ = TcBwd<D>::BQ, LDS = TcBwd<D>::LDS, LDP = TcBwd<D>::LDP;
  constexpr int KS = D / 16;              // k-steps over the head dim
  constexpr int NQ = BQ / 8;              // n-tiles of S^T (8 queries each)
  constexpr int ND = D / 8;               // n-tiles of dK, dV
  constexpr int MQ = BQ / 16;             // m-tiles of dQ
  constexpr int NDW = D / 8 / 4;          // n-tiles of dQ per warp (a quarter of the columns)
  constexpr int NDC = NDW > 2 ? 2 : NDW;  // of which in registers at once
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);                // [BK, LDS]
  T* sV = sK + BK * LDS;                                 // [BK, LDS]
  T* sQ = sV + BK * LDS;                                 // [2, BQ, LDS]
  T* sdO = sQ + 2 * BQ * LDS;                            // [2, BQ, LDS]
  T* sdS = sdO + 2 * BQ * LDS;                           // [BK, LDP] scale * dS^T
  float* sL = reinterpret_cast<float*>(sdS + BK * LDP);  // [2, BQ] lse * log2(e)
  float* sDel = sL + 2 * BQ;                             // [2, BQ] delta
  // ALiBi: the head's -slope * log2(e), read per tile rather than held in a
  // register across the loop (D 128 is at the register limit on sm_90).
  float* sSlope = sDel + 2 * BQ;  // [1] (4 floats reserved)
  // The (b, h)'s rows (flash_seq), read where needed for the same reason.
  FlashSeq* sSeq = reinterpret_cast<FlashSeq*>(sSlope + 4);
  // T5 (rb.rel): [2 rel_max + 1, 2], each row of this head's column of the
  // table and its gradient summed over the block's scores. Not at D 128,
  // whose backward has no register to spare (sm_80 spills): the launcher
  // refuses it there.
  constexpr bool kT5 = TcBwd<D>::kT5;
  float* sRel = reinterpret_cast<float*>(smem_raw + tc_bwd_smem<T, D>());

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tq = lane & 3;
  const int64_t bh = blockIdx.y;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * BK;
  const FlashSeq s = flash_seq(p, bh);
  if (j0 >= s.Tk) return;  // past the document's keys (block-uniform)
  const float keep_scale = p.dropout > 0.0f ? 1.0f / (1.0f - p.dropout) : 1.0f;
  const float sl2 = p.scale * kLog2e;
  if (threadIdx.x == 0) {
    *sSeq = s;
    if (p.alibi) *sSlope = alibi_neg_slope(p, bh % p.H) * kLog2e;
  }
  if (kT5 && rb.rel) t5_stage(rb, p.H, bh % p.H, sRel, 2);
  const int64_t key_a = j0 + warp * 16 + g, key_b = key_a + 8;  // this thread's key rows

  float gk[ND][4], gv[ND][4];
#pragma unroll
  for (int nd = 0; nd < ND; ++nd)
#pragma unroll
    for (int e = 0; e < 4; ++e) gk[nd][e] = gv[nd][e] = 0.0f;

  const int64_t i_begin = (first_query_seeing(p, j0) / BQ) * BQ;
  const int n_qt =
      j0 < s.key_len && i_begin < s.Tq ? static_cast<int>((s.Tq - i_begin + BQ - 1) / BQ) : 0;

  // Query tile t's Q, dO, lse and delta (q0, Tq: the rows' s.q0 and s.Tq).
  auto load_q_tile = [&](int t, int64_t q0, int64_t Tq) {
    const int64_t i0 = i_begin + static_cast<int64_t>(t) * BQ;
    const int buf = t & 1;
    load_tile_async<T, D, BQ>(sQ + buf * BQ * LDS, static_cast<const T*>(p.q) + q0 * D, i0, Tq);
    load_tile_async<T, D, BQ>(sdO + buf * BQ * LDS, dout + q0 * D, i0, Tq);
    for (int e = threadIdx.x; e < BQ; e += kTcThreads) {
      const int64_t i = i0 + e;
      sL[buf * BQ + e] = i < Tq ? lse[q0 + i] * kLog2e : -INFINITY;
      sDel[buf * BQ + e] = i < Tq ? delta[q0 + i] : 0.0f;
    }
  };

  if (n_qt > 0) {
    load_tile_async<T, D, BK>(sK, static_cast<const T*>(p.k) + s.k0 * D, j0, s.key_len);
    load_tile_async<T, D, BK>(sV, static_cast<const T*>(p.v) + s.k0 * D, j0, s.key_len);
    load_q_tile(0, s.q0, s.Tq);
    cp_async_commit();
  }
  // sSeq, sSlope and sRel are written; past this barrier the loop reads the
  // rows from sSeq, not s (whose registers would be held across it).
  __syncthreads();
  for (int t = 0; t < n_qt; ++t) {
    const int64_t i0 = i_begin + static_cast<int64_t>(t) * BQ;
    if (t + 1 < n_qt) {  // buffer (t + 1) & 1 was released by tile t - 1
      load_q_tile(t + 1, sSeq->q0, sSeq->Tq);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    T* cQ = sQ + (t & 1) * BQ * LDS;
    const T* cdO = sdO + (t & 1) * BQ * LDS;
    const float* cL = sL + (t & 1) * BQ;
    const float* cDel = sDel + (t & 1) * BQ;
    if (rope.enabled) {
      if (t == 0) rope_tile<T, D, BK>(sK, table, rope.k_offset + j0, sSeq->key_len - j0);
      rope_tile<T, D, BQ>(cQ, table, rope.q_offset + i0, sSeq->Tq - i0);
      __syncthreads();
    }

    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys x BQ queries.
    float st[NQ][4], dpt[NQ][4];
#pragma unroll
    for (int nq = 0; nq < NQ; ++nq)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nq][e] = dpt[nq][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      uint32_t ka[4], va[4];
      ldsm_x4(ka, sK + (warp * 16 + (lane & 15)) * LDS + ks * 16 + (lane >> 4) * 8);
      ldsm_x4(va, sV + (warp * 16 + (lane & 15)) * LDS + ks * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int nq = 0; nq < NQ; nq += 2) {
        const int off =
            (nq * 8 + (lane & 7) + (lane >> 4) * 8) * LDS + ks * 16 + ((lane >> 3) & 1) * 8;
        uint32_t qf[4], of[4];
        ldsm_x4(qf, cQ + off);
        ldsm_x4(of, cdO + off);
        mma16816<T>(st[nq], ka, qf[0], qf[1]);
        mma16816<T>(st[nq + 1], ka, qf[2], qf[3]);
        mma16816<T>(dpt[nq], va, of[0], of[1]);
        mma16816<T>(dpt[nq + 1], va, of[2], of[3]);
      }
    }

    // P = exp(scale s + bias - lse), dS = P o (dP o M - delta) scale; P o M goes
    // to st, dS to dpt. ALiBi: element (nq, e) is query i0 + 8 nq + 2 tq + (e & 1)
    // and key key_a (e < 2) or key_a + 8, at distance |ob - (8 (e >> 1) - 8 nq - (e & 1))|;
    // T5: at relative position key - t5_origin(i), and the unscaled dS goes to
    // that row's sum (computed per score: a base held across the loop spills
    // at D 128).
    const int64_t Tq = sSeq->Tq, key_len = sSeq->key_len;
    const bool full = i0 + BQ <= Tq && j0 + BK <= visible_keys(p, key_len, i0);
    const float ob = alibi_origin(p, i0 + tq * 2 - key_a);
    const float nsl2 = p.alibi ? *sSlope : 0.0f;  // written before the first barrier
#pragma unroll
    for (int nq = 0; nq < NQ; ++nq) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = nq * 8 + tq * 2 + (e & 1);
        const int64_t i = i0 + c, key = e < 2 ? key_a : key_b;
        const bool vis = full || (i < Tq && key < visible_keys(p, key_len, i));
        float pr = 0.0f, ds = 0.0f;
        if (vis) {
          float x = st[nq][e] * sl2;
          if (p.alibi)
            x = alibi_add(x, nsl2, ob, static_cast<float>((e < 2 ? 0 : 8) - nq * 8 - (e & 1)));
          const int row = kT5 && rb.rel ? t5_row(rb, key - t5_origin(p, i)) : 0;
          if (kT5 && rb.rel) x = fmaf(sRel[2 * row], kLog2e, x);
          pr = exp2f(x - cL[c]);
          const float mk = p.dropout > 0.0f ? tc_keep(p, keep_scale, bh, i, key) : 1.0f;
          const float gs = pr * (dpt[nq][e] * mk - cDel[c]);  // dS before the scale
          ds = gs * p.scale;
          if (kT5 && rb.rel_grad) atomicAdd(sRel + 2 * row + 1, gs);
          pr *= mk;
        }
        st[nq][e] = pr;
        dpt[nq][e] = ds;
      }
      // dS^T rows of this thread's keys, queries c, c + 1.
      *reinterpret_cast<uint32_t*>(sdS + (warp * 16 + g) * LDP + nq * 8 + tq * 2) =
          pack2<T>(dpt[nq][0], dpt[nq][1]);
      *reinterpret_cast<uint32_t*>(sdS + (warp * 16 + g + 8) * LDP + nq * 8 + tq * 2) =
          pack2<T>(dpt[nq][2], dpt[nq][3]);
    }

    // dV += (P o M)^T dO and dK += dS^T Q: A from the C fragments, B = dO, Q with .trans.
#pragma unroll
    for (int kk = 0; kk < BQ / 16; ++kk) {
      const uint32_t pa[4] = {pack2<T>(st[2 * kk][0], st[2 * kk][1]),
                              pack2<T>(st[2 * kk][2], st[2 * kk][3]),
                              pack2<T>(st[2 * kk + 1][0], st[2 * kk + 1][1]),
                              pack2<T>(st[2 * kk + 1][2], st[2 * kk + 1][3])};
      const uint32_t da[4] = {pack2<T>(dpt[2 * kk][0], dpt[2 * kk][1]),
                              pack2<T>(dpt[2 * kk][2], dpt[2 * kk][3]),
                              pack2<T>(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]),
                              pack2<T>(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
#pragma unroll
      for (int nd = 0; nd < ND; nd += 2) {
        const int off =
            (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + nd * 8 + (lane >> 4) * 8;
        uint32_t of[4], qf[4];
        ldsm_x4_t(of, cdO + off);
        ldsm_x4_t(qf, cQ + off);
        mma16816<T>(gv[nd], pa, of[0], of[1]);
        mma16816<T>(gv[nd + 1], pa, of[2], of[3]);
        mma16816<T>(gk[nd], da, qf[0], qf[1]);
        mma16816<T>(gk[nd + 1], da, qf[2], qf[3]);
      }
    }
    __syncthreads();  // all of dS^T is written (and tile t's Q/dO are consumed)

    // dQ[i0 .. i0 + BQ, warp's columns] += dS K (A = dS from dS^T with .trans, B = K
    // .trans), NDC n-tiles at a time so that dK, dV, and this stay in registers.
#pragma unroll
    for (int n0 = 0; n0 < NDW; n0 += NDC) {
      float gq[MQ][NDC][4];
#pragma unroll
      for (int mq = 0; mq < MQ; ++mq)
#pragma unroll
        for (int nd = 0; nd < NDC; ++nd)
#pragma unroll
          for (int e = 0; e < 4; ++e) gq[mq][nd][e] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        uint32_t kf[NDC][2];
#pragma unroll
        for (int nd = 0; nd < NDC; ++nd) {
          const int col = warp * (D / 4) + (n0 + nd) * 8;
          ldsm_x2_t(kf[nd], sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + col);
        }
#pragma unroll
        for (int mq = 0; mq < MQ; ++mq) {
          uint32_t af[4];
          ldsm_x4_t(af, sdS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * LDP + mq * 16 +
                            ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int nd = 0; nd < NDC; ++nd) mma16816<T>(gq[mq][nd], af, kf[nd][0], kf[nd][1]);
        }
      }
      const int64_t q0 = sSeq->q0, Tq = sSeq->Tq;
#pragma unroll
      for (int mq = 0; mq < MQ; ++mq)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t i = i0 + mq * 16 + g + (e < 2 ? 0 : 8);
          if (i >= Tq) continue;
          float* dst = dq_accum + (q0 + i) * D + warp * (D / 4) + n0 * 8 + tq * 2 + (e & 1);
#pragma unroll
          for (int nd = 0; nd < NDC; ++nd)
            if (gq[mq][nd][e] != 0.0f) atomicAdd(dst + nd * 8, gq[mq][nd][e]);
        }
    }
    // The next iteration's __syncthreads (after its wait) orders these reads of
    // sdS before the next writes.
  }
  if (kT5 && rb.rel_grad) {  // block-uniform
    __syncthreads();         // every score's sum is in sRel
    t5_flush(rb, p.H, bh % p.H, sRel);
  }

  // dK, dV of the key rows (rows >= key_len hold zeros); dK rotated back under RoPE.
  const int64_t k0 = sSeq->k0, Tk = sSeq->Tk;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t key = h == 0 ? key_a : key_b;
    if (key >= Tk) continue;
    uint32_t* dkr = reinterpret_cast<uint32_t*>(dk + (k0 + key) * D);
    uint32_t* dvr = reinterpret_cast<uint32_t*>(dv + (k0 + key) * D);
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) {
      float x0 = gk[nd][2 * h], x1 = gk[nd][2 * h + 1];
      if (rope.enabled) {
        const float2 cs = table[(rope.k_offset + key) * (D / 2) + nd * 4 + tq];
        float y0, y1;
        rope::rotate_back(x0, x1, rope::Rotation{cs.x, cs.y}, y0, y1);
        x0 = y0;
        x1 = y1;
      }
      dkr[nd * 4 + tq] = pack2<T>(x0, x1);
      dvr[nd * 4 + tq] = pack2<T>(gv[nd][2 * h], gv[nd][2 * h + 1]);
    }
  }
#endif  // ROTOR_TC_BODY
}

// dq = dq_accum cast to T, pair by pair rotated back under RoPE (a row at
// position q_offset + flash_q_position).
template <class T>
__global__ void flash_tc_dq_kernel(const float* __restrict__ src, T* __restrict__ dst,
                                   int64_t pairs, FlashCore p, FlashRope rope,
                                   const float2* __restrict__ table) {
  const int64_t half = p.D / 2;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < pairs;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float x0 = src[2 * e], x1 = src[2 * e + 1];
    if (rope.enabled) {
      const int64_t row = e / half, i = e - row * half, t = flash_q_position(p, row);
      const float2 cs = table[(rope.q_offset + t) * half + i];
      float y0, y1;
      rope::rotate_back(x0, x1, rope::Rotation{cs.x, cs.y}, y0, y1);
      x0 = y0;
      x1 = y1;
    }
    dst[2 * e] = from_f32<T>(x0);
    dst[2 * e + 1] = from_f32<T>(x1);
  }
}

// ---- launchers ----------------------------------------------------------------------
int64_t rope_positions(const FlashParams& p, const FlashRope& r) {
  const int64_t a = r.q_offset + p.Tq, b = r.k_offset + p.Tk;
  return a > b ? a : b;
}

cudaError_t fill_rope_table(const FlashParams& p, const FlashRope& r, void* table,
                            cudaStream_t stream) {
  if (!r.enabled) return cudaSuccess;
  if (!table || r.q_offset < 0 || r.k_offset < 0) return cudaErrorInvalidValue;
  if (!rope::interleaved_full(r.params, p.D)) return cudaErrorInvalidValue;
  const int64_t n = rope_positions(p, r) * (p.D / 2);
  if (n == 0) return cudaSuccess;
  const rope::Params at = rope::at_length(r.params, p.D, rope_positions(p, r));
  tc_rope_table_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<float2*>(table),
                                                             rope_positions(p, r), p.D, at);
  return cudaGetLastError();
}

template <class T, int D>
cudaError_t launch_tc_forward(const FlashParams& p, const FlashRope& r, const float2* table, T* out,
                              float* lse, cudaStream_t stream) {
  constexpr int BQ = TcFwd<D>::BQ;
  const size_t smem = tc_fwd_smem_of<T, D>(p);
  cudaError_t err =
      cudaFuncSetAttribute(flash_tc_fwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.Tq + BQ - 1) / BQ), static_cast<unsigned>(p.B * p.H));
  flash_tc_fwd_kernel<T, D><<<grid, kTcThreads, smem, stream>>>(
      static_cast<const FlashCore&>(p), r, table, out, lse, static_cast<const FlashT5&>(p));
  return cudaGetLastError();
}

template <class T, int D>
cudaError_t launch_tc_backward(const FlashParams& p, const FlashRope& r, const float2* table,
                               const float* lse, const T* dout, const float* delta, T* dk, T* dv,
                               float* dq_accum, cudaStream_t stream) {
  constexpr int BK = TcBwd<D>::BK;
  const size_t smem = tc_bwd_smem_of<T, D>(p);
  cudaError_t err =
      cudaFuncSetAttribute(flash_tc_bwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((p.Tk + BK - 1) / BK), static_cast<unsigned>(p.B * p.H));
  flash_tc_bwd_kernel<T, D>
      <<<grid, kTcThreads, smem, stream>>>(static_cast<const FlashCore&>(p), r, table, lse, dout,
                                           delta, dk, dv, dq_accum, static_cast<const FlashT5&>(p));
  return cudaGetLastError();
}

bool tc_valid(const FlashParams& p, DType dt) {
  return flash_tc_supports(p.D, dt) && flash_params_valid(p) && aligned16(p.q) && aligned16(p.k) &&
         aligned16(p.v) && (!p.rel || p.D < 128);
}

}  // namespace

bool flash_tc_supports(int head_dim, DType dt) {
  return (head_dim == 32 || head_dim == 64 || head_dim == 128) &&
         (dt == DType::F16 || dt == DType::BF16);
}

bool flash_tc_device_ok(int dev) {
  // Per device: 0 not asked yet, 1 yes, 2 no (a benign race: every asker agrees).
  static int known[64] = {};
  if (dev >= 0 && dev < 64 && known[dev] != 0) return known[dev] == 1;
  int major = 0;
  bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            major >= 8;
  if (ok) {
    // The build must carry sm_80+ code (or PTX) for the kernel bodies.
    // cudaFuncGetAttributes answers for the current device.
    int prev = 0;
    const bool swap =
        cudaGetDevice(&prev) == cudaSuccess && prev != dev && cudaSetDevice(dev) == cudaSuccess;
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, flash_tc_fwd_kernel<__nv_bfloat16, 64>) != cudaSuccess) {
      (void)cudaGetLastError();
      ok = false;
    } else {
      ok = a.binaryVersion >= 80 && a.ptxVersion >= 80;
    }
    if (swap) (void)cudaSetDevice(prev);
  }
  if (dev >= 0 && dev < 64) known[dev] = ok ? 1 : 2;
  return ok;
}

size_t flash_tc_rope_table_bytes(const FlashParams& p, const FlashRope& rope) {
  if (!rope.enabled) return 0;
  return static_cast<size_t>(rope_positions(p, rope)) * static_cast<size_t>(p.D / 2) *
         sizeof(float2);
}

cudaError_t flash_tc_forward(const FlashParams& p, const FlashRope& rope, void* rope_table,
                             void* out, float* lse, DType dt, cudaStream_t stream) {
  if (!tc_valid(p, dt) || !aligned16(out)) return cudaErrorInvalidValue;
  if (p.Tq == 0) return cudaSuccess;
  cudaError_t err = fill_rope_table(p, rope, rope_table, stream);
  if (err != cudaSuccess) return err;
  const float2* table = static_cast<const float2*>(rope_table);
  ROTOR_HALF_SWITCH(
      dt, T,
      ROTOR_FLASH_HEAD_DIM_SWITCH(
          p.D, HD,
          err = launch_tc_forward<T, HD>(p, rope, table, static_cast<T*>(out), lse, stream)));
  return err;
}

cudaError_t flash_tc_backward(const FlashParams& p, const FlashRope& rope, void* rope_table,
                              const void* out, const float* lse, const void* dout, void* dq,
                              void* dk, void* dv, float* dq_accum, float* delta, DType dt,
                              cudaStream_t stream) {
  if (!tc_valid(p, dt) || !aligned16(dk) || !aligned16(dv) || !aligned16(dout))
    return cudaErrorInvalidValue;
  bool done = false;
  cudaError_t err = flash_backward_begin(p, out, dout, dq, dq_accum, delta, dt, stream, &done);
  if (err != cudaSuccess || done) return err;
  const int64_t q_elems = flash_q_rows(p) * p.D;
  err = fill_rope_table(p, rope, rope_table, stream);
  if (err != cudaSuccess) return err;
  const float2* table = static_cast<const float2*>(rope_table);
  ROTOR_HALF_SWITCH(dt, T, {
    ROTOR_FLASH_HEAD_DIM_SWITCH(p.D, HD,
                                err = launch_tc_backward<T, HD>(
                                    p, rope, table, lse, static_cast<const T*>(dout), delta,
                                    static_cast<T*>(dk), static_cast<T*>(dv), dq_accum, stream));
    if (err != cudaSuccess) return err;
    if (q_elems > 0) {
      flash_tc_dq_kernel<T><<<grid_for(q_elems / 2), kThreads, 0, stream>>>(
          dq_accum, static_cast<T*>(dq), q_elems / 2, static_cast<const FlashCore&>(p), rope,
          table);
      err = cudaGetLastError();
    }
  });
  return err;
}

}  // namespace rotor::kernels
