// Attention kinds as a registry (docs/design.md, "Adding an attention kind").
// A kind is what an attention computes from q, k and v (softmax attention;
// linear attention, RoFormer section 3.3 / 4.4). Each is one file in nn/attention_kinds/ defining
// its AttentionKindScheme -- its plan rule and its core -- and one entry in the list of
// nn/attention_kinds/registry.cpp. nn::plan_attention asks the case's kind for the plan;
// nn::MultiHeadAttention runs the planned core through the kind and never names one.
#pragma once

#include <string_view>
#include <vector>

#include "nn/attention_plan.h"
#include "nn/context.h"
#include "ops/attention.h"

namespace rotor::nn {

// What a kind's core gets of its layer besides the tensors.
struct AttentionCall {
  uint32_t layer = 0;  // the layer's id (ParameterStore::next_layer_id)
  // The index of the layer's random features (FAVOR+): feature_draw() of
  // its training forwards; in evaluation, that of its last training forward.
  uint64_t draw = 0;
};

// The draw index of random features in a training forward during update
// `update` (0-based, nn::Context::update): floor(update / redraw), 0 when
// redraw is 0. The same on every rank and after a resume, with no state.
uint64_t feature_draw(int64_t redraw, uint64_t update);

struct AttentionKindScheme {
  std::string_view name;
  // The plan rule: the core (and kernel) that runs the case on the device,
  // RoPE's placement and the why (nn/attention_plan.h). An explicit
  // attention.impl the device cannot serve is a rotor::Error naming it.
  AttentionPlan (*plan)(const AttentionCase& c, const ops::AttentionDevice& device) = nullptr;
  // The planned core. q [B, H, Tq, D] (scaled by 1/sqrt(D) where the plan's
  // split_scales_q says, rotated where its rope says), k, v [B, H, Tk, D] ->
  // o [B, H, Tq, D]; `saved` receives what its backward needs besides q, k
  // and v, which the layer keeps.
  void (*forward)(const AttentionPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                  const ops::AttentionOptions& options, Tensor& o, std::vector<Tensor>& saved,
                  const Context& ctx, const AttentionCall& call) = nullptr;
  // dO -> dq, dk, dv (written, not accumulated).
  void (*backward)(const AttentionPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                   const std::vector<Tensor>& saved, const Tensor& d_o,
                   const ops::AttentionOptions& options, Tensor& dq, Tensor& dk,
                   Tensor& dv) = nullptr;
  // Adding one constant to all of a query's scores changes nothing (softmax
  // normalizes it away): without rotation the key projection's bias then has
  // exactly zero gradient, which the layer writes instead of round-off.
  bool shift_invariant = false;
  // The incremental decoder's step (a cache of rotated keys and values,
  // ops::decode_attention) computes this kind.
  bool cached_decode = false;
};

}  // namespace rotor::nn
