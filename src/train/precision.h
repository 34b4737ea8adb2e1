// The trainer's side of `precision: fp32 | fp16 | bf16` (docs/design.md,
// "Precision" and its notes). fp32 computes in f32. fp16 and bf16 run forward
// and backward on 16-bit activations and a 16-bit copy of the weights
// (nn::ParameterStore::set_compute_dtype), while the master weights, their
// gradients, the optimizer moments and the loss stay f32. fp16 adds dynamic
// loss scaling (optim/loss_scaler.h); bf16 has fp32's exponent range and runs
// unscaled. On the CPU the 16-bit arithmetic is emulated (ops/cpu_f32.h):
// slower than fp32, for development and tests. Validation and decoding read
// the f32 masters (fp32 compute) whatever the training precision.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "core/tensor.h"
#include "nn/parameters.h"
#include "optim/loss_scaler.h"
#include "optim/optimizer.h"
#include "train/metrics.h"

namespace rotor::train {

// The activations' dtype of a precision: F32, F16 or BF16.
DType precision_dtype(Precision precision);

// Testing knob: the environment variable ROTOR_TEST_NAN_GRAD_AT=N makes
// update N (1-based) find a NaN in one gradient element just before its
// optimizer step, on every rank (tests/cpu/test_mixed_precision.cpp).
constexpr const char* kNanGradEnv = "ROTOR_TEST_NAN_GRAD_AT";

class PrecisionPolicy {
 public:
  // Gives `store` its 16-bit copy for fp16/bf16 and logs how the run computes.
  PrecisionPolicy(const Config& config, Device device, nn::ParameterStore& store);

  DType compute_dtype() const { return dtype_; }
  // The factor of the loss gradient (nn::Context::loss_scale): the fp16
  // loss scale, else 1. The optimizer's grad_multiplier is divided by it.
  float loss_scale() const { return scaler_ ? static_cast<float>(scaler_->scale()) : 1.0f; }

  // The loss scale of a resumed checkpoint (fp16; ignored otherwise).
  void restore(const checkpoint::TrainerState& state);
  // Before the optimizer step of update `update` (1-based): the NaN test hook.
  void before_step(int64_t update);
  // After it: a skipped step is counted in state.skipped_steps and logged,
  // the fp16 scale adapts (state.loss_scale*), and the 16-bit weights are
  // re-rounded from the updated masters.
  void after_step(const optim::StepInfo& info, int64_t update, checkpoint::TrainerState& state);

  // " | scale 32768" for the progress line ("" unless fp16), and the
  // metrics.jsonl field loss_scale (fp16 only).
  std::string progress() const;
  void add_metrics(MetricsRecord& record) const;

 private:
  Precision precision_;
  DType dtype_;
  nn::ParameterStore* store_;
  std::unique_ptr<optim::DynamicLossScaler> scaler_;  // fp16 only
  int64_t window_ = 0;                                // train.scale_window
  int64_t nan_at_ = 0;                                // ROTOR_TEST_NAN_GRAD_AT, 0: off
};

}  // namespace rotor::train
