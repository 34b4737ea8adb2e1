// The tasks rotor trains, one row each (docs/design.md, "Adding a task"):
// the model it builds, the validation metrics it can report, the data keys
// training requires and its own cross-field rules. The checks of
// config/checks.cpp ask this table; no other file of config/ names a task.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace rotor {

// A rule a config breaks: the key it is about (its origin is what the error
// names), what is wrong, and the other keys involved (named instead when the
// key itself was left at its default).
struct ConfigProblem {
  std::string key, message;
  std::vector<std::string> related = {};
};
using ConfigRule = std::optional<ConfigProblem> (*)(const Config&);

// The model a task builds, which decides what the model.* keys mean for it.
enum class ModelFamily {
  EncoderDecoder,  // models/transformer.h: decoder_layers count; pre- or post-LN
  BertEncoder,     // models/bert.h: post-LN only; model.init_from loads Hugging Face weights
  Decoder,         // models/decoder_lm.h: decoder_layers causal layers; pre- or post-LN
};

// What model.init_from (a Hugging Face directory) initializes in a model of
// `family` ("a BERT/RoFormer encoder"), or nullptr where it has no such
// counterpart.
const char* hf_init_target(ModelFamily family);

struct TaskMetric {
  ValidMetric metric;
  // Reported by every validation, whether train.valid_metrics lists it or not.
  bool always = false;
  // Why this config cannot report it after all ("" when it can); null: it can.
  std::string (*unavailable)(const Config&) = nullptr;
};

// A data key training cannot do without, and what it names.
struct RequiredData {
  const char* key;  // "data.train"
  std::string DataConfig::*value;
  const char* what;
};

struct TaskSpec {
  Task task;
  ModelFamily model;
  // The data key that bounds a sequence's length in tokens: learned
  // positions (model.max_positions) must cover it.
  const char* length_key;
  int DataConfig::*length;
  std::vector<TaskMetric> metrics;  // what a validation can report, loss first
  std::vector<RequiredData> required_data;
  ConfigRule rules = nullptr;  // the task's own cross-field rules
  // The task's own defaults: sets the keys the config did not write
  // (origins.written) where the task wants another value than Config{}'s.
  void (*defaults)(Config&, const KeyOrigins&) = nullptr;
};

// Applies task_spec(config.task).defaults (load_config, before validate).
void apply_task_defaults(Config& config);

// Every task, in the order of EnumNames<Task>.
const std::vector<TaskSpec>& task_table();
const TaskSpec& task_spec(Task task);

// Why config.task cannot report `metric` ("" when it can).
std::string metric_unavailable(const Config& config, ValidMetric metric);
// Whether every validation of config.task reports `metric`, listed or not.
bool metric_always_reported(const Config& config, ValidMetric metric);

}  // namespace rotor
