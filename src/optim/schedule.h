// Learning-rate schedules, as functions of the update number (1-based).
#pragma once

#include <cstdint>
#include <string>

namespace rotor::optim {

enum class ScheduleKind { InverseSqrt, Linear, Constant };

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::InverseSqrt;
  double lr = 5e-4;  // peak
  int64_t warmup_updates = 4000;
  double warmup_init_lr = 1e-7;  // start of the linear warmup
  double end_lr = 0.0;           // Linear: value reached at max_updates
  int64_t max_updates = 100000;
};

// inverse_sqrt (fairseq): linear warmup from warmup_init_lr to lr, then
//   lr * sqrt(warmup_updates / step).
// linear: the same warmup, then linear decay to end_lr at max_updates.
// constant: the same warmup, then lr.
double learning_rate(const ScheduleOptions& o, int64_t step);

}  // namespace rotor::optim
