// Plain reference attention: materializes the [Tq, Tk] probabilities. It is
// the ground truth for the fused kernels and the CPU path of the model.
#pragma once

#include <cstdint>

#include "core/rope.h"
#include "core/tensor.h"

namespace rotor::ops {

// Which of rotor's CUDA flash kernels runs a flash_attention_* call on a GPU
// (on the CPU the twin in flash_attention.cpp runs whatever this says). The
// caller chooses -- nn/attention_plan.h for the layers, a benchmark or a test
// for itself -- and the op runs exactly that kernel or fails saying why it
// cannot (ops/attention_device.h, flash_kernel_unsupported).
enum class FlashKernel {
  Portable,    // kernels/flash_attention.cu: fp32 tiles, every architecture and dtype
  TensorCore,  // kernels/flash_attention_tc.cu: mma.sync, sm_80+, f16/bf16
  Volta,       // kernels/flash_attention_sm70.cu: WMMA, sm_70, f16, CUDA 12 builds
};
const char* flash_kernel_name(FlashKernel kernel);

struct AttentionOptions {
  float scale = 1.0f;   // multiplies q.k (1 when Q is already scaled)
  bool causal = false;  // query i sees keys j <= i + (Tk - Tq)
  Tensor key_lengths;   // optional i32 [B]: keys j >= key_lengths[b] are padding
  // Self-attention over packed documents (nn::DocLayout, Tq == Tk, with
  // key_lengths): queries i >= key_lengths[b] are padding too. The
  // materialized core then computes only the live [len, len] block of each
  // row: padding queries' outputs are zero and their dout is ignored (so
  // the gradients equal the full computation's where that dout is zero, as
  // DocLayout's is); the other cores ignore the flag. Cross-attention over
  // packed pairs (variable-length translation, Tq != Tk) gives its queries'
  // lengths in query_lengths (i32 [B]): the live block is then
  // [query_lengths[b], key_lengths[b]].
  bool packed_rows = false;
  Tensor query_lengths;
  // The variable-length layout (FlashAttention's cu_seqlens), honored by the
  // flash core alone (flash_attention_forward/backward, the CPU twin and every
  // CUDA kernel; the other cores refuse it): N documents laid end to end, q,
  // out and dout [1, H, total_q, D], lse [1, H, total_q], k and v [1, H,
  // total_k, D]. Document n's queries are tokens cu_seqlens_q[n] ..
  // cu_seqlens_q[n + 1] - 1, its keys those of cu_seqlens_k (i32 [N + 1] on
  // q's device, nondecreasing from 0 to total_q, total_k); max_seqlen_q and
  // max_seqlen_k bound the documents' lengths. Each document's rows get
  // exactly what the call on the regrouped layout [N, H, max_seqlen_q, D] with
  // key_lengths = its key counts gives them: the same masks (causal offset
  // max_seqlen_k - max_seqlen_q), dropout index, ALiBi, T5 and RoPE positions,
  // counted from 0 in each document. No key_lengths with it.
  Tensor cu_seqlens_q, cu_seqlens_k;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  float dropout = 0.0f;  // on the probabilities, Philox element index = flat [B,H,Tq,Tk] index
  uint64_t seed = 0;
  uint64_t stream = 0;
  // RoPE inside the attention kernel (src/core/rope.h, the settings
  // rope_params): q row i is rotated at position rope_q_offset + i and k row
  // j at rope_k_offset + j before the product (dynamic_ntk resolved at length
  // max(rope_q_offset + Tq, rope_k_offset + Tk), one base for q and k), and
  // the backward rotates dq and dk back (rope::rotate_back) before writing
  // them, so the caller passes unrotated q and k. Honored by the flash core
  // only: on the CPU (any settings) and by rotor's tensor-core kernel
  // (flash_kernel TensorCore; interleaved pairs over the whole head); every
  // other path (attention_forward/backward, cuDNN, the portable and Volta
  // CUDA kernels) fails with an error when it is set.
  bool rope = false;
  rope::Params rope_params{};
  int64_t rope_q_offset = 0, rope_k_offset = 0;
  // ALiBi (core/alibi.h) computed inside the core, never materialized: head h
  // of H adds -alibi::slope(h, H) * |p_i - p_j| to the scaled score of query i
  // and key j, with p_i = bias_q_offset + i + (Tk - Tq) (the last query
  // aligned with the last key, as the causal mask aligns them) and
  // p_j = bias_k_offset + j. Causal: -slope * (i - j) on the visible keys;
  // otherwise symmetric. No parameters: the backward only changes through the
  // softmax. Honored by every rotor core: on the CPU (attention_forward/
  // backward and the flash twin) and in every CUDA kernel (the reference row
  // kernel and the portable, tc and volta flash kernels compute the bias
  // themselves, kernels/attention_masks.cuh); cuDNN's attention refuses it.
  bool alibi = false;
  // The positions of ALiBi's and T5's biases: p_i and p_j as above.
  int64_t bias_q_offset = 0, bias_k_offset = 0;
  // T5's learned relative bias (model.position t5, core/t5_bias.h), added
  // like ALiBi's to the scaled score and never materialized: rel_bias is f32
  // [2 rel_max + 1, H] on q's device, and head h adds
  // rel_bias[t5::relative_row(p_j - p_i, rel_max), h] (the model gathers it
  // from its [buckets, H] table, nn/relative_bias.h). The backward adds the
  // bias's gradient, the sum of dS over the scores of each row, into
  // rel_bias_grad (same shape), when that is defined. Honored on the CPU
  // (attention_forward/backward, the flash twin, decode_attention) and by the
  // CUDA reference core; the CUDA flash kernels and cuDNN refuse it
  // (nn/attention_plan.cpp chooses the reference core on a GPU).
  Tensor rel_bias, rel_bias_grad;
  int64_t rel_max = 0;
  // A dense additive bias of the scaled scores, f32 [B, H, Tq, Tk] on q's
  // device, that the caller computed (model.position transformer_xl's
  // relative terms, nn/attention.cpp). The backward writes its gradient,
  // dS / scale (0 where masked), into score_bias_grad (same shape) when that
  // is defined. Honored by the materialized core (attention_forward/backward,
  // on the CPU and on CUDA); every other core refuses it.
  Tensor score_bias, score_bias_grad;
  // The CUDA kernel of flash_attention_forward/backward (ignored elsewhere).
  FlashKernel flash_kernel = FlashKernel::Portable;
};

// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, D] -> out [B, H, Tq, D].
// probs [B, H, Tq, Tk] receives the softmax before dropout (for the backward).
// A query with no visible key gets a zero output.
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, Tensor& out, Tensor& probs);
// Writes dq, dk, dv (same shapes as q, k, v).
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const AttentionOptions& options, Tensor& dq, Tensor& dk,
                        Tensor& dv);

}  // namespace rotor::ops
