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

// Grid limits every kernel shares: (b, h) is gridDim.y.
inline bool flash_params_valid(const FlashParams& p) {
  return p.B * p.H > 0 && p.B * p.H <= 65535 && p.Tq >= 0 && p.Tk >= 0 &&
         (!p.rel || (p.rel_max >= 0 && p.rel_max <= t5::kFlashMaxDistance)) &&
         (p.rel || !p.rel_grad);
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
