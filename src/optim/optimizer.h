// Adam/AdamW over the flat parameter buffers: one multi-tensor step per run
// of parameters that share a weight-decay setting (biases and norms are
// excluded from decay), with gradient clipping by the global norm.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/parameters.h"
#include "ops/adamw.h"

namespace rotor::optim {

struct OptimizerOptions {
  // AdamW (decoupled weight decay) or Adam (weight decay as L2 on the
  // gradient, torch.optim.Adam); with weight_decay 0 they coincide.
  bool decoupled = true;
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-9, weight_decay = 0.0;
  double clip_norm = 0.0;  // 0: no clipping
};

struct StepInfo {
  double grad_norm = 0;  // of the scaled-back gradients, before clipping
  bool skipped = false;  // non-finite gradients: no update was made
};

// The step both optimizers (this one and parallel::ShardedAdamW) share: given the
// norm of the scaled gradients, the AdamW options of update `step` with the
// clipping coefficient folded into grad_multiplier (weight_decay left at 0 for
// the caller to set per run of parameters).
ops::AdamWOptions adamw_options(const OptimizerOptions& options, double lr, int64_t step,
                                double grad_multiplier, double grad_norm);
// Runs of consecutive parameters (flat elements [begin, begin + count)) that
// share a weight-decay setting (biases and norms have none): one optimizer
// call each.
struct DecayRun {
  int64_t begin = 0, count = 0;
  bool no_decay = false;
};
std::vector<DecayRun> decay_runs(const nn::ParameterStore& store);

// The weight decay of a run of parameters into `o`: decoupled (AdamW) or L2
// (Adam); none for biases and norms (`no_decay`).
void set_weight_decay(ops::AdamWOptions& o, const OptimizerOptions& options, bool no_decay);

class Optimizer {
 public:
  Optimizer(nn::ParameterStore& store, const OptimizerOptions& options);
  // One update with learning rate lr. Gradients are multiplied by
  // grad_multiplier (the trainer's 1/(tokens*loss_scale)) before
  // anything else. Increments step().
  StepInfo step(double lr, double grad_multiplier = 1.0);
  int64_t steps() const { return step_; }
  void set_steps(int64_t s) { step_ = s; }
  Tensor& exp_avg() { return m_; }     // f32 [numel]
  Tensor& exp_avg_sq() { return v_; }  // f32 [numel]

 private:
  nn::ParameterStore* store_;
  OptimizerOptions options_;
  Tensor m_, v_;
  int64_t step_ = 0;
};

}  // namespace rotor::optim
