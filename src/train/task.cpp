#include "train/task.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rotor::train {

double ValidationResult::value(ValidMetric metric) const {
  const double n = static_cast<double>(sums.tokens);
  const bool per_token = metric == ValidMetric::Loss || metric == ValidMetric::Accuracy;
  // Nothing scored (a set without a masked token) is no score, never a perfect one.
  if (per_token && sums.tokens <= 0) return std::numeric_limits<double>::quiet_NaN();
  if (metric == ValidMetric::Loss) return sums.loss / n;
  if (metric == ValidMetric::Accuracy && sums.has_correct)
    return static_cast<double>(sums.correct) / n;
  // Scores a task computes itself (BLEU, chrF, GLUE's).
  for (const auto& [m, v] : scores)
    if (m == metric) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

namespace {

// One row per task: its config row is in config/tasks.cpp (docs/design.md,
// "Adding a task").
struct TaskFactory {
  Task task;
  std::unique_ptr<TrainingTask> (*make)(const Config&, Device, int rank, int world_size);
};
constexpr TaskFactory kFactories[] = {
    {Task::Translation, make_translation_task},       {Task::Mlm, make_mlm_task},
    {Task::Classification, make_classification_task}, {Task::Lm, make_lm_task},
    {Task::Multilabel, make_multilabel_task},
};

}  // namespace

std::unique_ptr<TrainingTask> make_task(const Config& c, Device device, int rank, int world_size) {
  for (const TaskFactory& f : kFactories)
    if (f.task == c.task) return f.make(c, device, rank, world_size);
  ROTOR_FAIL("task: {} has no trainer", to_string(c.task));
}

}  // namespace rotor::train
