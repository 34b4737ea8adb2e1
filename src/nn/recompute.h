// Activation checkpointing of one layer, by recomputation (config key
// train.checkpoint_activations): a training forward keeps only the layer's
// inputs and its Context and drops everything else it saved for the
// backward; the backward first runs the same forward again from them, then
// the backward proper. The recompute is the same ops on the same inputs with
// the same Context -- so the same dropout masks (keyed by ctx.micro_step and the
// layer ids) and the same random features (keyed by ctx.update) -- and saves
// bit for bit what the plain forward saved: the gradients do not change, only
// the memory held between the passes (the layers' inputs instead of all their
// activations) and the time (one more forward per layer).
#pragma once

#include <utility>
#include <vector>

#include "nn/context.h"

namespace rotor::nn {

class LayerRecompute {
 public:
  explicit LayerRecompute(bool enabled) : enabled_(enabled) {}

  // Whether a forward under `ctx` is checkpointed: enabled, and training
  // (an evaluation forward keeps nothing for a backward anyway).
  bool applies(const Context& ctx) const { return enabled_ && ctx.training; }

  // After a checkpointed forward: keeps its inputs and Context (without the
  // hooks, which belong to the model's backward).
  void keep(std::vector<Tensor> inputs, const Context& ctx) {
    inputs_ = std::move(inputs);
    ctx_ = ctx;
    ctx_.grad_ready = nullptr;
    ctx_.phase_hook = nullptr;
    pending_ = true;
  }
  // After a plain forward: nothing to recompute.
  void drop() {
    inputs_.clear();
    pending_ = false;
  }

  // Whether the backward must recompute the forward first.
  bool pending() const { return pending_; }
  const Tensor& input(size_t i) const { return inputs_[i]; }
  const Context& context() const { return ctx_; }

 private:
  bool enabled_;
  bool pending_ = false;
  std::vector<Tensor> inputs_;
  Context ctx_;
};

}  // namespace rotor::nn
