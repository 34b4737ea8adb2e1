// attention kind softmax: softmax(q k^T) v with key-padding and causal masks
// and attention dropout, run by the materialized reference core, rotor's
// flash core (its CPU twin or a CUDA kernel) or cuDNN's fused SDPA. Its plan
// rule picks the core as docs/design.md ("The attention plan") describes.
#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "nn/attention_kind.h"
#include "ops/attention.h"
#include "ops/cudnn_attention.h"
#include "ops/flash_attention.h"

namespace rotor::nn {

namespace {

using ops::FlashKernel;

ops::FlashCase flash_case(const AttentionCase& c, bool rope) {
  return {c.dtype, c.B,        c.H,      c.Tq, c.Tk, c.D, rope, c.rope_interleaved_full,
          c.alibi, c.rel_bias, c.rel_max};
}

// The fastest of rotor's CUDA kernels that runs the case, or nullopt with the
// portable kernel's reason (the one with the fewest limits) in *why.
std::optional<FlashKernel> best_flash_kernel(const AttentionCase& c,
                                             const ops::AttentionDevice& dev, std::string* why) {
  for (FlashKernel k : {FlashKernel::TensorCore, FlashKernel::Volta, FlashKernel::Portable}) {
    const std::string reason = ops::flash_kernel_unsupported(k, flash_case(c, false), dev);
    if (reason.empty()) return k;
    if (k == FlashKernel::Portable) *why = reason;
  }
  return std::nullopt;
}

// "" when cuDNN's SDPA serves the case on `dev`, else why not. The layer
// scales q in the head split, so cuDNN's scale is 1.
std::string cudnn_unsupported(const AttentionCase& c, const ops::AttentionDevice& dev) {
  // ALiBi's bias (model.position alibi) is added by rotor's cores alone: the
  // materialized reference and every flash kernel, on the CPU and on CUDA.
  if (c.alibi) return "cuDNN's attention does not add ALiBi's bias (model.position alibi)";
  if (c.rel_bias) return "cuDNN's attention does not add T5's relative bias (model.position t5)";
  ops::CudnnAttentionCase cc;
  cc.dtype = c.dtype;
  cc.B = c.B;
  cc.H = c.H;
  cc.Tq = c.Tq;
  cc.Tk = c.Tk;
  cc.D = c.D;
  cc.causal = c.causal;
  cc.key_lengths = c.key_padding;
  cc.dropout = c.dropout ? 0.1f : 0.0f;  // its value does not matter to what is supported
  std::string why = ops::cudnn_attention_unsupported(cc, dev.cudnn);
  if (why.empty() && dev.cudnn_builds) why = dev.cudnn_builds(cc, 1.0f);
  return why;
}

// The core and kernel, before RoPE's placement.
AttentionPlan choose_core(const AttentionCase& c, const ops::AttentionDevice& dev) {
  AttentionPlan p;
  p.on_gpu = dev.cuda;
  switch (c.impl) {
    case AttentionImpl::Reference:
      p.core = AttentionCore::Reference;
      p.why = "attention.impl reference: the materialized core";
      return p;
    case AttentionImpl::Rotor: {
      p.core = AttentionCore::Rotor;
      if (!dev.cuda) {
        p.why = "attention.impl rotor: the flash core's CPU twin";
        return p;
      }
      std::string why;
      const std::optional<FlashKernel> k = best_flash_kernel(c, dev, &why);
      if (!k) ROTOR_FAIL("attention.impl: rotor: {} (attention.impl: reference runs it)", why);
      p.kernel = *k;
      p.why =
          fmt::format("attention.impl rotor: rotor's {} flash kernel", ops::flash_kernel_name(*k));
      return p;
    }
    case AttentionImpl::Cudnn: {
      if (dev.cuda && c.dtype == DType::F32 && !c.training) {
        // Validation and inference run in f32 under every precision, which
        // cuDNN does not compute: auto's core, said in the why. (On the CPU
        // cudnn stays an error: it never runs there.)
        AttentionCase a = c;
        a.impl = AttentionImpl::Auto;
        AttentionPlan ap = choose_core(a, dev);
        ap.why =
            "attention.impl cudnn outside training: f32 (rotor validates and infers in f32, "
            "cuDNN computes fp16 and bf16), so " +
            ap.why;
        return ap;
      }
      const std::string why = cudnn_unsupported(c, dev);
      if (!why.empty()) ROTOR_FAIL("attention.impl: cudnn: {}", why);
      p.core = AttentionCore::Cudnn;
      p.why = "attention.impl cudnn: cuDNN's fused attention";
      return p;
    }
    case AttentionImpl::Auto:
      break;
  }
  if (!dev.cuda) {
    p.core = AttentionCore::Reference;
    p.why =
        "attention.impl auto: the materialized core on the CPU (its products are the CPU GEMM's, "
        "ops/cpu_gemm.h)";
    return p;
  }
  std::string no_flash;
  const std::optional<FlashKernel> k = best_flash_kernel(c, dev, &no_flash);
  const bool long_enough = c.Tk >= kCudnnMinKeys;
  std::string no_cudnn;
  if (long_enough || !k) {
    no_cudnn = cudnn_unsupported(c, dev);
    if (no_cudnn.empty()) {
      p.core = AttentionCore::Cudnn;
      p.why = long_enough ? fmt::format("attention.impl auto: cuDNN attention for {} keys or more",
                                        kCudnnMinKeys)
                          : fmt::format("attention.impl auto: cuDNN attention, as {}", no_flash);
      return p;
    }
  } else {
    no_cudnn =
        fmt::format("below {} keys (cuDNN from there on, where it serves the case)", kCudnnMinKeys);
  }
  if (k) {
    p.core = AttentionCore::Rotor;
    p.kernel = *k;
    p.why = fmt::format("attention.impl auto: rotor's {} flash kernel, {}",
                        ops::flash_kernel_name(*k), no_cudnn);
    return p;
  }
  p.core = AttentionCore::Reference;
  p.why =
      fmt::format("attention.impl auto: the materialized core ({}; cuDNN: {})", no_flash, no_cudnn);
  return p;
}

// softmax's rule: the core, then who rotates q and k.
AttentionPlan plan(const AttentionCase& c, const ops::AttentionDevice& device) {
  if (c.score_bias) {
    // Transformer-XL's terms, TUPE's correlation and DeBERTa's terms reach
    // the core as a dense bias, which only the materialized core adds (on
    // the CPU and on CUDA, where the layers compute the terms too).
    if (c.impl == AttentionImpl::Rotor || c.impl == AttentionImpl::Cudnn)
      ROTOR_FAIL(
          "attention.impl: {}: Transformer-XL's relative terms, TUPE's correlation and "
          "DeBERTa's terms are a dense bias that only the materialized core adds; use auto or "
          "reference",
          c.impl == AttentionImpl::Rotor ? "rotor" : "cudnn");
    AttentionPlan p;
    p.core = AttentionCore::Reference;
    p.on_gpu = device.cuda;
    p.why =
        "the materialized core, which adds the dense score bias of Transformer-XL's terms, "
        "TUPE's correlation or DeBERTa's terms";
    return p;
  }
  AttentionPlan p = choose_core(c, device);
  if (c.packed && p.core == AttentionCore::Rotor) {
    p.varlen = true;
    p.why += "; packed documents end to end (cu_seqlens)";
  }
  if (c.alibi) {
    p.alibi = true;
    p.why += "; ALiBi's bias computed inside the core";
  }
  if (c.rel_bias) {
    p.rel_bias = true;
    p.why += "; T5's bias added inside the core";
  }
  if (!c.rope) return p;
  p.rope = RopePlacement::HeadSplit;
  if (!c.rope_in_kernel) return p;
  // attention.rope_in_kernel: the flash core rotates where it can -- its CPU
  // twin, and on a GPU the tensor-core kernel alone.
  std::string not_core;
  if (p.core != AttentionCore::Rotor) {
    not_core = fmt::format("the {} core does not rotate (rotor's flash core does)",
                           attention_core_name(p.core));
  } else if (device.cuda) {
    not_core = p.kernel == FlashKernel::TensorCore
                   ? ops::flash_kernel_unsupported(p.kernel, flash_case(c, true), device)
                   : fmt::format("only the tc kernel rotates on a GPU, the plan runs the {} one",
                                 ops::flash_kernel_name(p.kernel));
  }
  if (not_core.empty()) {
    p.rope = RopePlacement::Core;
    p.why += "; attention.rope_in_kernel: RoPE rotated inside the flash attention core";
  } else {
    p.why += "; attention.rope_in_kernel: RoPE stays in the head split: " + not_core;
  }
  return p;
}

// The core: the materialized reference saves the probabilities [B, H, Tq, Tk];
// rotor's flash core and cuDNN save out and the lse f32 [B, H, Tq] (their
// backward needs D = rowsum(dO o O)).
void forward(const AttentionPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
             const ops::AttentionOptions& options, Tensor& o, std::vector<Tensor>& saved,
             const Context& ctx, const AttentionCall&) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2);
  if (plan.core == AttentionCore::Reference) {
    Tensor probs = ctx.empty({B, H, Tq, Tk});  // [B, H, Tq, Tk]
    ops::attention_forward(q, k, v, options, o, probs);
    saved = {probs};
    return;
  }
  Tensor lse = Tensor::empty({B, H, Tq}, DType::F32, ctx.device);  // f32 [B, H, Tq]
  if (plan.core == AttentionCore::Cudnn)
    ops::cudnn_attention_forward(q, k, v, options, o, lse);
  else
    ops::flash_attention_forward(q, k, v, options, o, lse);
  saved = {o, lse};
}

void backward(const AttentionPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
              const std::vector<Tensor>& saved, const Tensor& d_o,
              const ops::AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  if (plan.core == AttentionCore::Cudnn)
    ops::cudnn_attention_backward(q, k, v, saved[0], saved[1], d_o, options, dq, dk, dv);
  else if (plan.core == AttentionCore::Rotor)
    ops::flash_attention_backward(q, k, v, saved[0], saved[1], d_o, options, dq, dk, dv);
  else
    ops::attention_backward(q, k, v, saved[0], d_o, options, dq, dk, dv);
}

}  // namespace

extern const AttentionKindScheme kSoftmaxAttention;
constinit const AttentionKindScheme kSoftmaxAttention{
    .name = "softmax",
    .plan = plan,
    .forward = forward,
    .backward = backward,
    .shift_invariant = true,
    .cached_decode = true,
};

}  // namespace rotor::nn
