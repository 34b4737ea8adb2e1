#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

namespace rotor::optim {

double learning_rate(const ScheduleOptions& o, int64_t step) {
  step = std::max<int64_t>(step, 1);
  if (o.warmup_updates > 0 && step <= o.warmup_updates) {
    double f = static_cast<double>(step) / static_cast<double>(o.warmup_updates);
    return o.warmup_init_lr + (o.lr - o.warmup_init_lr) * f;
  }
  switch (o.kind) {
    case ScheduleKind::InverseSqrt:
      return o.lr * std::sqrt(static_cast<double>(std::max<int64_t>(o.warmup_updates, 1)) /
                              static_cast<double>(step));
    case ScheduleKind::Linear: {
      int64_t span = std::max<int64_t>(o.max_updates - o.warmup_updates, 1);
      double f = std::clamp(
          static_cast<double>(step - o.warmup_updates) / static_cast<double>(span), 0.0, 1.0);
      return o.lr + (o.end_lr - o.lr) * f;
    }
    case ScheduleKind::Constant:
      return o.lr;
  }
  return o.lr;
}

}  // namespace rotor::optim
