// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018, "Mixed
// Precision Training"; docs/design.md, "Precision"). The loss gradient is multiplied
// by a scale S before the backward, so that small gradients survive fp16's
// narrow range, and the optimizer multiplies the f32 gradients by 1/S again.
// A step whose gradients hold inf or NaN (an fp16 overflow somewhere in the
// backward, or a real NaN) is skipped by the optimizer — weights and moments
// untouched — and S halves; after `window` consecutive good steps S doubles.
// bf16 has fp32's range and needs none of this (its runs use no scaler).
#pragma once

#include <cstdint>

namespace rotor::optim {

struct LossScalerOptions {
  double init_scale = 128.0;  // train.loss_scale (config.h says why 128)
  int64_t window = 2000;      // train.scale_window: good steps before S doubles
  double factor = 2.0;        // powers of two: scaling is exact in fp16 and f32
  // An overflow at this scale means the gradients are non-finite whatever the
  // scale (the loss diverged): a rotor::Error rather than skipping forever.
  double min_scale = 1.0 / 16384.0;
  double max_scale = 16777216.0;  // 2^24: growth stops there
};

class DynamicLossScaler {
 public:
  enum class Change { None, Grew, Shrank };

  explicit DynamicLossScaler(const LossScalerOptions& options = {});

  double scale() const { return scale_; }
  // Consecutive good steps since the scale last changed (saved in checkpoints
  // with the scale, so that a resumed run grows at the same update).
  int64_t good_steps() const { return good_steps_; }

  // After an optimizer step; overflow = the step was skipped for non-finite
  // gradients. Halves the scale on overflow (a rotor::Error below
  // min_scale), doubles it after `window` good steps in a row.
  Change update(bool overflow);

  // The state of a checkpoint (scale > 0, good_steps >= 0).
  void restore(double scale, int64_t good_steps);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
};

}  // namespace rotor::optim
