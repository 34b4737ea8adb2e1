// Flash-style attention core (docs/design.md, The attention block): online softmax over key
// tiles, key-padding and causal masks, Tq != Tk, Philox attention dropout with
// the flat [B, H, Tq, Tk] element index of the reference attention, ALiBi's
// per-head linear bias computed in the kernel, T5's learned relative bias
// read from a table (and its gradient summed in the backward). The
// forward writes the log-sum-exp per query; the backward recomputes the
// probabilities from it. CPU twin: src/ops/flash_attention.cpp.
//
// Storage f32, f16 or bf16; all arithmetic in fp32. Head dims 32, 64, 128.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// The parameters every flash kernel reads (FlashParams less T5's table). The
// tensor-core kernels take this and FlashT5 as separate arguments: their
// backward at head dim 128 sits at the register limit, and a larger
// parameter struct alone gave it a stack frame on sm_90.
struct FlashCore {
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
  // The variable-length layout (FlashAttention's cu_seqlens), with
  // cu_seqlens_q set: B documents laid end to end. q, out, dout, dq are
  // [H, total_q, D] and lse, delta [H, total_q]; k, v, dk, dv [H, total_k, D].
  // Document n's queries are rows cu_seqlens_q[n] .. cu_seqlens_q[n + 1] - 1
  // of each head, its keys those of cu_seqlens_k (both i32 [B + 1] on the
  // device, nondecreasing from 0 to total_q, total_k). Tq and Tk are the
  // longest documents' lengths (no document is longer). Each document's rows
  // get exactly what a dense call gives the same rows regrouped as [B, H, Tq,
  // D] and [B, H, Tk, D] with key_lengths = its keys: the same masks (causal
  // offset Tk - Tq), dropout index ((b H + h) Tq + i) Tk + j, ALiBi and T5
  // distances and RoPE positions, counted from 0 in each document. Rows past a
  // document's length exist nowhere: no kernel reads or writes them, and query
  // tiles past a document's queries (key tiles past its keys in a backward)
  // return at once. key_lengths must be null.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t total_q = 0, total_k = 0;
};

struct FlashT5 {
  // T5's relative bias (ops::AttentionOptions::rel_bias, core/t5_bias.h):
  // f32 [2 rel_max + 1, H] on the device, or null; the score of query i and
  // key j adds row t5::relative_row(p_j - p_i, rel_max) of head h's column
  // (p_i, p_j as for ALiBi), rel_max at most t5::kFlashMaxDistance. The
  // backward adds the table's gradient (the unscaled dS summed per row) into
  // rel_grad (same shape) when that is not null: shared-memory sums per
  // block, then fp32 atomics, so like dq not bitwise reproducible run to run
  // (kernels/attention_masks.cuh, t5_stage / t5_flush).
  const float* rel = nullptr;
  int64_t rel_max = 0;
  float* rel_grad = nullptr;
};

// What the host entry points below take.
struct FlashParams : FlashCore, FlashT5 {};

// True for the head dimensions the kernels are instantiated for.
bool flash_attention_supports(int head_dim);

// out [B, H, Tq, D] (dtype dt), lse f32 [B, H, Tq] (-inf for a query with no
// visible key, whose output is zero); with cu_seqlens, out [H, total_q, D]
// and lse [H, total_q].
cudaError_t flash_attention_forward(const FlashParams& p, void* out, float* lse, DType dt,
                                    cudaStream_t stream);

// dq, dk, dv (dtype dt). Scratch: dq_accum f32 [B, H, Tq, D] and delta f32
// [B, H, Tq] (both overwritten); with cu_seqlens, one row per q row
// (flash_q_rows: [H, total_q, D] and [H, total_q]), dk and dv [H, total_k, D].
cudaError_t flash_attention_backward(const FlashParams& p, const void* out, const float* lse,
                                     const void* dout, void* dq, void* dk, void* dv,
                                     float* dq_accum, float* delta, DType dt, cudaStream_t stream);

}  // namespace rotor::kernels
