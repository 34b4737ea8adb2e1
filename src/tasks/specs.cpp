// The config half of the task registry: config.task's spellings
// (config/task_kind.h), read from src/tasks/tasks.def, plus the tasks
// registered at run time. The training half is registry.cpp.
#include "tasks/specs.h"

#include <string>
#include <vector>

#include "config/tasks.h"
#include "core/error.h"

namespace rotor {

namespace tasks {
namespace {

std::vector<Task>& kinds() {
  static std::vector<Task> list = {
#define ROTOR_TASK(Name, Trainer) Task(&k##Name##Spec),
#include "tasks/tasks.def"
#undef ROTOR_TASK
  };
  return list;
}

}  // namespace

Task add_task_kind(const TaskSpec& spec) {
  if (task_kind(spec.name))
    ROTOR_FAIL("task {} is registered already; a task registers once", spec.name);
  kinds().push_back(Task(&spec));
  return kinds().back();
}

}  // namespace tasks

std::span<const Task> task_kinds() {
  return tasks::kinds();
}

std::optional<Task> task_kind(std::string_view name) {
  for (const Task& t : tasks::kinds())
    if (t->name == name) return t;
  return std::nullopt;
}

const TaskSpec& Task::spec() const {
  return spec_ ? *spec_ : tasks::kinds().front().spec();
}

std::string_view Task::name() const {
  return spec().name;
}

}  // namespace rotor
