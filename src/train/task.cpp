#include "train/task.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rotor::train {

double ValidationResult::value(ValidMetric metric) const {
  const double n = static_cast<double>(std::max<int64_t>(sums.tokens, 1));
  if (metric == ValidMetric::Loss) return sums.loss / n;
  if (metric == ValidMetric::Accuracy && sums.has_correct)
    return static_cast<double>(sums.correct) / n;
  // Scores a task computes itself (BLEU, chrF, GLUE's).
  for (const auto& [m, v] : scores)
    if (m == metric) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

std::unique_ptr<TrainingTask> make_task(const Config& c, Device device, int rank, int world_size) {
  switch (c.task) {
    case Task::Translation:
      return make_translation_task(c, device, rank, world_size);
    case Task::Mlm:
      return make_mlm_task(c, device, rank, world_size);
    case Task::Classification:
      return make_classification_task(c, device, rank, world_size);
  }
  ROTOR_FAIL("task: {} has no trainer", to_string(c.task));
}

}  // namespace rotor::train
