// cuDNN's fused scaled-dot-product attention (SDPA, built through the cuDNN
// frontend's graph API) as an attention core with the contract of
// ops/flash_attention.h: the forward writes out and the log-sum-exp of every
// query row, the backward takes them back. RoPE is not its business: q and k
// arrive rotated and q scaled by the head split (docs/design.md, The
// attention block).
//
// Differences from rotor's own core, all stated by cudnn_attention_unsupported:
//  - CUDA only, sm_80 and newer, f16 and bf16, head dims multiple of 8 up to
//    128 (64 and 128 are the tested ones), rotor built with the frontend's
//    headers (scripts/deps.sh fetches them).
//  - Attention dropout draws its mask from cuDNN's own Philox generator,
//    keyed by (options.seed, options.stream): the forward and the backward of
//    one call pair see the same mask, but it is not the mask of rotor's
//    kernels or of the CPU.
//  - A causal mask with Tq != Tk (query i sees keys j <= i + Tk - Tq) only
//    without key lengths and without dropout (cuDNN's bottom-right diagonal).
//  - A batch row whose key length is 0 (no visible key) is outside cuDNN's
//    contract; rotor's cores give it a zero output.
//  - The backward accumulates dQ with atomics: not bitwise deterministic.
// Graphs are built once per shape and cached (ops/cudnn_graph_cache.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/tensor.h"
#include "ops/attention.h"

namespace rotor::ops {

// What decides whether cuDNN serves a case, known before running it.
struct CudnnAttentionCase {
  DType dtype = DType::F32;
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  bool causal = false;
  bool key_lengths = false;
  float dropout = 0.0f;
};

// The machine's side of the question.
struct CudnnCapability {
  bool built = false;         // rotor was compiled with the cuDNN frontend
  int sm = 0;                 // 10 * major + minor compute capability; 0: no such GPU
  int64_t cudnn_version = 0;  // cudnnGetVersion() of the loaded library, e.g. 91400
};

// The capability of `device` (queried once per device and remembered). A CPU
// device, or a build without CUDA or without the frontend, reports what it has.
CudnnCapability cudnn_capability(const Device& device);

// Empty when cuDNN's SDPA serves `c` on `cap`, otherwise one line saying why not
// (e.g. "cuDNN SDPA needs sm_80 or newer, this GPU is sm_75").
std::string cudnn_attention_unsupported(const CudnnAttentionCase& c, const CudnnCapability& cap);

// The case of q [B, H, Tq, D] and k [B, H, Tk, D] under `options`.
CudnnAttentionCase cudnn_attention_case(const Tensor& q, const Tensor& k,
                                        const AttentionOptions& options);

// Whether cudnn_attention_forward/backward run for these tensors on their
// device; when not and `why` is given, *why receives the reason.
bool cudnn_attention_supported(const Tensor& q, const Tensor& k, const AttentionOptions& options,
                               std::string* why = nullptr);

// q [B, H, Tq, D], k and v [B, H, Tk, D] (f16 or bf16, on a CUDA device) ->
// out [B, H, Tq, D] (q's dtype) and lse f32 [B, H, Tq] = log sum_j exp(scale
// q_i.k_j) over the visible keys (before dropout), as flash_attention_forward.
// An unsupported case is a rotor::Error carrying the reason above.
void cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse);

// The backward of the forward above, from its out and lse and the same
// options (the same dropout mask): writes dq, dk, dv (shapes of q, k, v).
void cudnn_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace rotor::ops
