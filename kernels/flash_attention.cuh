// Flash-style attention core (docs/design.md, The attention block): online softmax over key
// tiles, key-padding and causal masks, Tq != Tk, Philox attention dropout with
// the flat [B, H, Tq, Tk] element index of the reference attention, ALiBi's
// per-head linear bias computed in the kernel. The
// forward writes the log-sum-exp per query; the backward recomputes the
// probabilities from it. CPU twin: src/ops/flash_attention.cpp.
//
// Storage f32, f16 or bf16; all arithmetic in fp32. Head dims 32, 64, 128.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

struct FlashParams {
  const void* q = nullptr;  // [B, H, Tq, D]
  const void* k = nullptr;  // [B, H, Tk, D]
  const void* v = nullptr;  // [B, H, Tk, D]
  int64_t B = 0, H = 0, Tq = 0, Tk = 0;
  int D = 0;
  float scale = 1.0f;
  bool causal = false;                   // query i sees keys j <= i + (Tk - Tq)
  const int32_t* key_lengths = nullptr;  // optional [B] on the device (clamped to [0, Tk])
  float dropout = 0.0f;
  uint64_t seed = 0, stream_id = 0;
  // ALiBi (kernels/attention_masks.cuh): head h adds -slope_h * |p_i - p_j|
  // to the scaled score, p_i = bias_q_offset + i + (Tk - Tq), p_j =
  // bias_k_offset + j; the slope is computed in the kernel from h and H.
  // The backward recomputes the scores with the same bias.
  bool alibi = false;
  int64_t bias_q_offset = 0, bias_k_offset = 0;
};

// True for the head dimensions the kernels are instantiated for.
bool flash_attention_supports(int head_dim);

// out [B, H, Tq, D] (dtype dt), lse f32 [B, H, Tq] (-inf for a query with no
// visible key, whose output is zero).
cudaError_t flash_attention_forward(const FlashParams& p, void* out, float* lse, DType dt,
                                    cudaStream_t stream);

// dq, dk, dv (dtype dt). Scratch: dq_accum f32 [B, H, Tq, D] and delta f32
// [B, H, Tq] (both overwritten).
cudaError_t flash_attention_backward(const FlashParams& p, const void* out, const float* lse,
                                     const void* dout, void* dq, void* dk, void* dv,
                                     float* dq_accum, float* delta, DType dt, cudaStream_t stream);

}  // namespace rotor::kernels
