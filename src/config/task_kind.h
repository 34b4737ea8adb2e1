// config.task: a handle on a registered task (src/tasks/tasks.def), as
// model.position is a handle on a registered position encoding. The task's
// row (config/tasks.h TaskSpec: its model, metrics, rules and traits) is what
// code outside the task's own folder asks; no file outside src/tasks/ names
// a task.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace rotor {

struct TaskSpec;

class Task {
 public:
  // The default task, the first registered: translation.
  Task() = default;
  explicit Task(const TaskSpec* spec) : spec_(spec) {}

  const TaskSpec& spec() const;
  const TaskSpec* operator->() const { return &spec(); }
  std::string_view name() const;
  friend bool operator==(const Task& a, const Task& b) { return &a.spec() == &b.spec(); }

 private:
  const TaskSpec* spec_ = nullptr;
};

// Every registered task, in registration order (src/tasks/specs.cpp): the
// built-in ones of src/tasks/tasks.def, then any registered at run time
// (tasks/task.h register_task).
std::span<const Task> task_kinds();
// The task named `name` ("lm"); nullopt when none is.
std::optional<Task> task_kind(std::string_view name);

}  // namespace rotor
