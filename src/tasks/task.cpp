#include "tasks/task.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tasks/specs.h"

namespace rotor::tasks {

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

}  // namespace rotor::tasks

namespace rotor::tasks {

namespace {

// The training halves by task, in registration order.
std::vector<std::pair<const TaskSpec*, const TaskSlice*>>& slices() {
  static std::vector<std::pair<const TaskSpec*, const TaskSlice*>> list = {
#define ROTOR_TASK(Name, Trainer) {&k##Name##Spec, &k##Trainer##Slice},
#include "tasks/tasks.def"
#undef ROTOR_TASK
  };
  return list;
}

}  // namespace

const TaskSlice& task_slice(Task task) {
  for (const auto& [spec, slice] : slices())
    if (spec == &task.spec()) return *slice;
  ROTOR_FAIL("task {} has no training half (tasks/task.h register_task)", task.name());
}

Task register_task(const TaskSpec& spec, const TaskSlice& slice) {
  const Task task = add_task_kind(spec);
  slices().emplace_back(&spec, &slice);
  return task;
}

std::unique_ptr<TrainingTask> make_task(const Config& c, Device device, int rank, int world_size) {
  const TaskSlice& slice = task_slice(c.task);
  if (!slice.make) ROTOR_FAIL("task: {} has no trainer", to_string(c.task));
  return slice.make(c, device, rank, world_size);
}

}  // namespace rotor::tasks
