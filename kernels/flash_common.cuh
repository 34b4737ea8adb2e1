// What the three flash attention kernels share (kernels/flash_attention.cu,
// the portable path; kernels/flash_attention_tc.cu, sm_80+ mma.sync;
// kernels/flash_attention_sm70.cu, Volta WMMA): the masks and dropout draw
// (kernels/attention_masks.cuh), quad reductions, the head-dim dispatch, the
// parameter checks and the backward's preamble. They must agree element for
// element with the CPU twin (src/ops/flash_attention.cpp), so they are
// written once, here.
//
// Only device code that plain C++ can also compile: the CPU emulation of the
// Volta kernels (tests/emulation/flash_sm70_emulate.cpp) includes this header
// with __device__ defined away.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention_masks.cuh"
#include "kernels/flash_attention.cuh"

namespace rotor::kernels {

// Max and sum over the four lanes of a quad (lanes 4g .. 4g + 3).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// One (b, h) of a flash call, dense or variable-length (FlashCore's
// cu_seqlens): q0 and k0, the rows (of D elements; of one float in lse and
// delta) where its query and key rows start in q/out/dout/dq/lse/delta and
// k/v/dk/dv; Tq and Tk, how many query and key rows it has (a document's
// lengths; the call's Tq, Tk when dense); key_len, the keys that padding
// leaves visible (key_lengths when dense). Masks, dropout and biases still
// read the call's Tq and Tk (the regrouped layout's), never these.
struct FlashSeq {
  int64_t q0, k0, Tq, Tk, key_len;
};
template <class M>
__device__ __forceinline__ FlashSeq flash_seq(const M& p, int64_t bh) {
  const int64_t b = bh / p.H;
  if (!p.cu_seqlens_q) return {bh * p.Tq, bh * p.Tk, p.Tq, p.Tk, key_length_of(p, b)};
  const int64_t h = bh - b * p.H;
  const int64_t qs = p.cu_seqlens_q[b], ks = p.cu_seqlens_k[b];
  const int64_t tq = p.cu_seqlens_q[b + 1] - qs, tk = p.cu_seqlens_k[b + 1] - ks;
  return {h * p.total_q + qs, h * p.total_k + ks, tq, tk, tk};
}

// Rows of q (and out, dout, dq, lse, delta) and of k (v, dk, dv), every head.
template <class M>
inline int64_t flash_q_rows(const M& p) {
  return p.cu_seqlens_q ? p.H * p.total_q : p.B * p.H * p.Tq;
}
template <class M>
inline int64_t flash_k_rows(const M& p) {
  return p.cu_seqlens_q ? p.H * p.total_k : p.B * p.H * p.Tk;
}

// The position in its sequence of query row `row` (a flat row of q, every
// head): row mod Tq when dense; with cu_seqlens, its token less the start of
// its document (a binary search of cu_seqlens_q). RoPE's rotation back of dq.
template <class M>
__device__ __forceinline__ int64_t flash_q_position(const M& p, int64_t row) {
  if (!p.cu_seqlens_q) return row % p.Tq;
  const int64_t t = row % p.total_q;
  int64_t lo = 0, hi = p.B;  // the document n with cu[n] <= t < cu[n + 1]
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (p.cu_seqlens_q[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return t - p.cu_seqlens_q[lo];
}

// Grid limits every kernel shares: (b, h) is gridDim.y.
inline bool flash_params_valid(const FlashParams& p) {
  return p.B * p.H > 0 && p.B * p.H <= 65535 && p.Tq >= 0 && p.Tk >= 0 &&
         (!p.rel || (p.rel_max >= 0 && p.rel_max <= t5::kFlashMaxDistance)) &&
         (p.rel || !p.rel_grad) &&
         (!p.cu_seqlens_q ||
          (p.cu_seqlens_k && !p.key_lengths && p.total_q >= 0 && p.total_k >= 0));
}

// Dynamic shared memory a flash kernel adds to its tiles for T5's bias:
// head h's column of the table, and in the backward each row's gradient sum
// beside it (attention_masks.cuh, t5_stage). 0 without the bias.
inline size_t flash_t5_smem(const FlashParams& p, bool backward) {
  if (!p.rel) return 0;
  return (backward ? 2 : 1) * sizeof(float) * static_cast<size_t>(2 * p.rel_max + 1);
}

// 16-byte vector and cp.async loads need 16-byte aligned rows: D is a
// multiple of 8, so aligned base pointers suffice.
inline bool aligned16(const void* ptr) {
  return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
}

// What every backward does before its kernel: zero the fp32 dQ accumulator,
// answer Tk == 0 (no keys: dq is zero, dk and dv are empty; *done is set),
// and compute delta[row] = sum_c dout[row, c] * out[row, c] (one warp per
// row). Defined in kernels/flash_attention.cu.
cudaError_t flash_backward_begin(const FlashParams& p, const void* out, const void* dout, void* dq,
                                 float* dq_accum, float* delta, DType dt, cudaStream_t stream,
                                 bool* done);

}  // namespace rotor::kernels

// Runs `...` with the compile-time head dim HD bound to d (32, 64 or 128); any
// other makes the enclosing launcher return cudaErrorInvalidValue.
#define ROTOR_FLASH_HEAD_DIM_SWITCH(d, HD, ...) \
  switch (d) {                                  \
    case 32: {                                  \
      constexpr int HD = 32;                    \
      __VA_ARGS__;                              \
    } break;                                    \
    case 64: {                                  \
      constexpr int HD = 64;                    \
      __VA_ARGS__;                              \
    } break;                                    \
    case 128: {                                 \
      constexpr int HD = 128;                   \
      __VA_ARGS__;                              \
    } break;                                    \
    default:                                    \
      return cudaErrorInvalidValue;             \
  }
