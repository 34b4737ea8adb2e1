// attention kind linear: linear attention with rotary positions (RoFormer
// section 3.3 / 4.4, eq. 19), run by ops::linear_attention_forward/backward
// (ops/linear_attention.h; docs/design.md "Linear attention (ops level)").
// Its plan rule has one core, the op, on the CPU or (device.cuda) through
// its CUDA path (src/ops/linear_attention_cuda.cpp: compiled and emulated on
// the CPU, not yet run on a GPU; docs/status.md). Under RoPE the op rotates q and
// k itself (the plan's placement Core) where attention.linear_rope says --
// after the feature map (eq. 19) or before it -- and never the head split;
// the split leaves q unscaled, since the op scales q and k by D^(-1/4) each.
// FAVOR+'s projection is asked for per forward by (seed, draw, layer)
// (core/favor.h; ops::favor_projection keeps the draws it made), the draw
// index the layer's (nn/attention.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "nn/attention_kind.h"
#include "ops/linear_attention.h"

namespace rotor::nn {

uint64_t feature_draw(int64_t redraw, uint64_t update) {
  return redraw > 0 ? update / static_cast<uint64_t>(redraw) : 0;
}

int64_t linear_feature_count(const LinearKindOptions& l, int64_t D, ops::LinearRope rope) {
  if (l.feature_map != ops::LinearFeatureMap::Favor) return D;
  if (l.features > 0) return l.features;
  int64_t m = std::max<int64_t>(1, static_cast<int64_t>(std::floor(D * std::log(double(D)))));
  if (rope == ops::LinearRope::AfterFeatureMap) m = std::max<int64_t>(2, m - m % 2);
  return m;
}

namespace {

using ops::LinearFeatureMap;
using ops::LinearRope;

AttentionPlan plan(const AttentionCase& c, const ops::AttentionDevice& device) {
  if (c.impl == AttentionImpl::Rotor || c.impl == AttentionImpl::Cudnn)
    ROTOR_FAIL(
        "attention.impl: {} is a core of softmax attention; attention.kind linear runs its own "
        "(use auto or reference)",
        c.impl == AttentionImpl::Rotor ? "rotor" : "cudnn");
  if (c.alibi)
    ROTOR_FAIL(
        "attention.kind: linear attention has no scores to add ALiBi's bias to (model.position "
        "alibi); use attention.kind: softmax");
  if (c.score_bias)
    ROTOR_FAIL(
        "attention.kind: linear attention has no scores to add Transformer-XL's relative terms "
        "to (model.position transformer_xl); use attention.kind: softmax");
  if (c.rel_bias)
    ROTOR_FAIL(
        "attention.kind: linear attention has no scores to add T5's relative bias to "
        "(model.position t5); use attention.kind: softmax");
  if (c.dropout)
    ROTOR_FAIL(
        "model.attention_dropout: linear attention has no attention probabilities to drop; set "
        "it to 0 with attention.kind linear");
  AttentionPlan p;
  p.core = AttentionCore::Linear;
  p.on_gpu = device.cuda;
  p.split_scales_q = false;
  p.linear = c.linear;
  p.linear.rope = c.rope ? c.linear.rope : LinearRope::None;
  p.linear.features = linear_feature_count(c.linear, c.D, p.linear.rope);
  if (p.linear.rope == LinearRope::AfterFeatureMap && p.linear.features % 2 != 0)
    ROTOR_FAIL(
        "attention.features: RoPE after the feature map rotates pairs of features: {} must be "
        "even",
        p.linear.features);
  p.why = fmt::format("attention.kind linear: {} features (M = {}) {}",
                      ops::linear_feature_map_name(p.linear.feature_map), p.linear.features,
                      device.cuda ? "on the GPU (fused feature kernels; cuBLASLt GEMMs, or the "
                                    "chunked causal kernels)"
                                  : "on the CPU");
  if (c.rope) {
    p.rope = RopePlacement::Core;
    p.why += fmt::format("; RoPE inside the core, {}", ops::linear_rope_name(p.linear.rope));
  }
  return p;
}

ops::LinearAttentionOptions op_options(const AttentionPlan& plan,
                                       const ops::AttentionOptions& options) {
  ops::LinearAttentionOptions l;
  l.feature_map = plan.linear.feature_map;
  l.qk_scale = 0.0f;  // D^(-1/4) on q and k: the split left q unscaled
  l.causal = options.causal;
  l.key_lengths = options.key_lengths;
  l.eps = plan.linear.eps;
  l.rope = plan.linear.rope;
  l.rope_params = options.rope_params;
  l.rope_q_offset = options.rope_q_offset;
  l.rope_k_offset = options.rope_k_offset;
  return l;
}

// Saves the projection (undefined but for favor), out and den f32 [B, H, Tq].
void forward(const AttentionPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
             const ops::AttentionOptions& options, Tensor& o, std::vector<Tensor>& saved,
             const Context& ctx, const AttentionCall& call) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  Tensor projection;  // f32 [M, D]
  if (plan.linear.feature_map == LinearFeatureMap::Favor)
    projection = ops::favor_projection(plan.linear.seed, call.draw, call.layer,
                                       plan.linear.features, D, q.device());
  Tensor den = Tensor::empty({B, H, Tq}, DType::F32, ctx.device);  // f32 [B, H, Tq]
  ops::linear_attention_forward(q, k, v, projection, op_options(plan, options), o, den);
  saved = {projection, o, den};
}

void backward(const AttentionPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
              const std::vector<Tensor>& saved, const Tensor& d_o,
              const ops::AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  ops::linear_attention_backward(q, k, v, saved[0], saved[1], saved[2], d_o,
                                 op_options(plan, options), dq, dk, dv);
}

}  // namespace

extern const AttentionKindScheme kLinearAttention;
constinit const AttentionKindScheme kLinearAttention{
    .name = "linear",
    .plan = plan,
    .forward = forward,
    .backward = backward,
    .shift_invariant = false,
    .cached_decode = false,
};

}  // namespace rotor::nn
