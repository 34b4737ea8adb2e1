// The config half of the task registry (specs.cpp): config.task's spellings.
#pragma once

#include "config/tasks.h"

namespace rotor::tasks {

// The rows of the registered tasks (src/tasks/tasks.def), each defined in its
// task's folder.
#define ROTOR_TASK(Name, Trainer) extern const TaskSpec k##Name##Spec;
#include "tasks/tasks.def"
#undef ROTOR_TASK

// Adds `spec` (which outlives the process's configs) to config.task's
// spellings; a rotor::Error when its name is taken. tasks/task.h
// register_task calls it with the task's training half.
Task add_task_kind(const TaskSpec& spec);

}  // namespace rotor::tasks
