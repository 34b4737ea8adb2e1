#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace rotor::optim {

DynamicLossScaler::DynamicLossScaler(const LossScalerOptions& options)
    : options_(options), scale_(options.init_scale) {
  ROTOR_CHECK(options.init_scale > 0 && std::isfinite(options.init_scale),
              "loss scale must be positive, got {}", options.init_scale);
  ROTOR_CHECK(options.window > 0, "loss scale window must be positive, got {}", options.window);
  ROTOR_CHECK(options.factor > 1, "loss scale factor must exceed 1, got {}", options.factor);
}

DynamicLossScaler::Change DynamicLossScaler::update(bool overflow) {
  if (overflow) {
    good_steps_ = 0;
    const double next = scale_ / options_.factor;
    if (next < options_.min_scale)
      ROTOR_FAIL(
          "fp16 loss scale fell below {}: the gradients are not finite at any scale (the "
          "loss diverged); lower optim.lr, set train.clip_norm, or train in bf16 or fp32",
          options_.min_scale);
    scale_ = next;
    return Change::Shrank;
  }
  if (++good_steps_ < options_.window) return Change::None;
  good_steps_ = 0;
  if (scale_ * options_.factor > options_.max_scale) return Change::None;
  scale_ *= options_.factor;
  return Change::Grew;
}

void DynamicLossScaler::restore(double scale, int64_t good_steps) {
  ROTOR_CHECK(scale > 0 && std::isfinite(scale), "bad saved loss scale {}", scale);
  scale_ = scale;
  good_steps_ = std::max<int64_t>(good_steps, 0);
}

}  // namespace rotor::optim
