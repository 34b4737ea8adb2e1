#include "train/precision.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/logging.h"
#include "ops/elementwise.h"

namespace rotor::train {

DType precision_dtype(Precision precision) {
  switch (precision) {
    case Precision::FP16:
      return DType::F16;
    case Precision::BF16:
      return DType::BF16;
    case Precision::FP32:
      break;
  }
  return DType::F32;
}

PrecisionPolicy::PrecisionPolicy(const Config& c, Device device, nn::ParameterStore& store)
    : precision_(c.precision), dtype_(precision_dtype(c.precision)), store_(&store) {
  store.set_compute_dtype(dtype_);
  if (precision_ == Precision::FP16) {
    optim::LossScalerOptions o;
    o.init_scale = c.train.loss_scale;
    o.window = window_ = c.train.scale_window;
    scaler_ = std::make_unique<optim::DynamicLossScaler>(o);
  }
  if (const char* v = std::getenv(kNanGradEnv); v && *v) {
    nan_at_ = std::atoll(v);
    log().warn("{}={}: a NaN will be injected into a gradient at update {} (testing knob)",
               kNanGradEnv, v, nan_at_);
  }
  if (precision_ == Precision::FP32) return;
  const std::string scaling = scaler_ ? fmt::format("dynamic loss scaling from {} (window {})",
                                                    c.train.loss_scale, c.train.scale_window)
                                      : std::string("no loss scaling");
  log().info(
      "precision {}: {} activations and weight copies, f32 master weights, gradients and "
      "optimizer; {}; validation in fp32",
      to_string(precision_), dtype_name(dtype_), scaling);
  if (device.is_cpu())
    log().info(
        "precision {} on the CPU is emulated (16-bit storage, f32 arithmetic): slower than "
        "fp32, meant for development and tests",
        to_string(precision_));
}

void PrecisionPolicy::restore(const checkpoint::TrainerState& state) {
  if (scaler_) scaler_->restore(state.loss_scale, state.loss_scale_good_steps);
}

void PrecisionPolicy::before_step(int64_t update) {
  if (update != nan_at_) return;
  Tensor first = store_->grads().narrow(0, 1);
  ops::fill(first, std::numeric_limits<float>::quiet_NaN());
  log().warn("update {}: injected a NaN into the gradient of {} ({})", update,
             store_->parameters().front()->name, kNanGradEnv);
}

void PrecisionPolicy::after_step(const optim::StepInfo& info, int64_t update,
                                 checkpoint::TrainerState& state) {
  if (info.skipped) ++state.skipped_steps;
  if (scaler_) {
    const auto change = scaler_->update(info.skipped);
    if (change == optim::DynamicLossScaler::Change::Shrank)
      log().warn("update {}: gradient overflow, skipped; loss scale -> {}", update,
                 scaler_->scale());
    else if (change == optim::DynamicLossScaler::Change::Grew)
      log().info("update {}: {} good updates in a row; loss scale -> {}", update, window_,
                 scaler_->scale());
    state.loss_scale = scaler_->scale();
    state.loss_scale_good_steps = scaler_->good_steps();
  } else {
    if (info.skipped) log().warn("update {}: non-finite gradient norm, update skipped", update);
    state.loss_scale = 1.0;
    state.loss_scale_good_steps = 0;
  }
  if (!info.skipped) store_->refresh_compute_copy();  // the masters changed
}

std::string PrecisionPolicy::progress() const {
  return scaler_ ? fmt::format(" | scale {}", scaler_->scale()) : std::string();
}

void PrecisionPolicy::add_metrics(MetricsRecord& record) const {
  if (scaler_) record.add("loss_scale", scaler_->scale());
}

}  // namespace rotor::train
