// A task's config row (docs/design.md, "Adding a task"): the model it builds,
// the validation metrics it can report, the data keys training requires, its
// own cross-field rules and defaults, and the traits that code outside the
// task asks instead of its name. Each task defines its row in its folder
// (src/tasks/NAME/spec.cpp) and registers it with one line of
// src/tasks/tasks.def; config.task is a handle on it (config/task_kind.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
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

// The head of an encoder-classifier task (models/bert_classifier.h): one
// label an example (classes, or a number with data.regression, or the right
// candidate with data.choices), or a set of labels.
enum class LabelMode { None, Single, Multi };

// What `rotor export --format hf` writes for a task's checkpoints.
enum class HfExport {
  None,
  MaskedLm,                // BertForMaskedLM / RoFormerForMaskedLM
  SequenceClassification,  // BertForSequenceClassification / RoFormer... (problem_type
                           // single_label_classification, multi_label_classification or
                           // regression)
  CausalLm,                // GPTNeoXForCausalLM / GPT2LMHeadModel
};

struct TaskSpec {
  const char* name;  // the spelling of config.task
  ModelFamily model;
  // The data key that bounds a sequence's length in tokens: learned
  // positions (model.max_positions) must cover it.
  const char* length_key = "data.seq_len";
  int DataConfig::*length = &DataConfig::seq_len;
  std::vector<TaskMetric> metrics;  // what a validation can report, loss first
  std::vector<RequiredData> required_data;
  ConfigRule rules = nullptr;  // the task's own cross-field rules
  // The task's own defaults: sets the keys the config did not write
  // (origins.written) where the task wants another value than Config{}'s.
  void (*defaults)(Config&, const KeyOrigins&) = nullptr;

  // ---- traits: what the config checks, the data plumbing, the exports and
  // the commands ask of a task, so that none of them names one.
  // data.<key> is a parallel corpus (PREFIX.SRC_LANG, PREFIX.TGT_LANG),
  // batched by data.max_tokens; training text is cleaned by data.max_len and
  // data.max_len_ratio, evaluation text by the position table.
  bool parallel_text = false;
  // The loss is label-smoothed by train.label_smoothing.
  bool label_smoothing = false;
  // It trains its SentencePiece model from data.train when missing; false: it
  // reads its encoder's (data.spm_model, or model.init_from's).
  bool trains_tokenizer = true;
  // A SentencePiece model it trains reserves [MASK] [CLS] [SEP] (ids 4-6).
  bool mlm_symbols = false;
  // A byte tokenizer keeps line breaks as tokens (one byte stream).
  bool byte_line_ends = false;
  // data.format ehr (prepare-ehr splits) feeds it.
  bool reads_ehr = false;
  // data.packing documents packs its documents (lines; patients with
  // data.format ehr; a classifier's examples) into blocks, or lays a
  // translation batch's sentence pairs end to end (variable length).
  bool packs_documents = false;
  LabelMode labels = LabelMode::None;
  HfExport hf_export = HfExport::None;
  // What its loss counts, and what it reads, in `rotor bench train`'s lines.
  const char* loss_tokens = "target";
  const char* read_tokens = "source + target";
  // The inference commands that run its checkpoints ("eval", "predict").
  std::vector<std::string_view> commands = {};
};

inline const TaskSpec& task_spec(Task task) {
  return task.spec();
}

// Applies task_spec(config.task).defaults (load_config, before validate).
void apply_task_defaults(Config& config);

// Whether `task` runs checkpoints of command `cmd`; the tasks that do, as
// "task-lm and task-mlm", for the command's error.
bool task_serves(Task task, std::string_view cmd);
std::string tasks_serving(std::string_view cmd);

// Why config.task cannot report `metric` ("" when it can).
std::string metric_unavailable(const Config& config, ValidMetric metric);
// Whether every validation of config.task reports `metric`, listed or not.
bool metric_always_reported(const Config& config, ValidMetric metric);

}  // namespace rotor
