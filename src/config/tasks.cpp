#include "config/tasks.h"

#include <algorithm>

#include "core/error.h"

namespace rotor {
namespace {

const TaskMetric* find_metric(const TaskSpec& spec, ValidMetric metric) {
  for (const auto& m : spec.metrics)
    if (m.metric == metric) return &m;
  return nullptr;
}

}  // namespace

const char* hf_init_target(ModelFamily family) {
  switch (family) {
    case ModelFamily::BertEncoder:
      return "a BERT/RoFormer encoder";
    case ModelFamily::Decoder:
      return "a GPT-NeoX/GPT-2 causal LM";
    case ModelFamily::EncoderDecoder:
      break;
  }
  return nullptr;
}

void apply_task_defaults(Config& config) {
  const TaskSpec& spec = task_spec(config.task);
  if (spec.defaults) spec.defaults(config, config.origins);
}

std::string metric_unavailable(const Config& c, ValidMetric metric) {
  if (const TaskMetric* m = find_metric(task_spec(c.task), metric))
    return m->unavailable ? m->unavailable(c) : "";
  std::string tasks;
  for (const Task& t : task_kinds())
    if (find_metric(t.spec(), metric))
      tasks += (tasks.empty() ? "" : " or ") + std::string(t.name());
  return fmt::format("{} is a score of task {}; task {} has none", to_string(metric), tasks,
                     to_string(c.task));
}

bool metric_always_reported(const Config& c, ValidMetric metric) {
  const TaskMetric* m = find_metric(task_spec(c.task), metric);
  return m && m->always && (!m->unavailable || m->unavailable(c).empty());
}

bool task_serves(Task task, std::string_view cmd) {
  const auto& c = task->commands;
  return std::find(c.begin(), c.end(), cmd) != c.end();
}

std::string tasks_serving(std::string_view cmd) {
  std::vector<std::string> names;
  for (const Task& t : task_kinds())
    if (task_serves(t, cmd)) names.push_back(fmt::format("task-{}", t.name()));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace rotor
