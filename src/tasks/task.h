// What the training loop needs from a job, whatever its model and data, and
// the registry of the tasks that provide it. Each task is a folder of
// src/tasks/ (its config row, data plumbing and TrainingTask) and a line of
// src/tasks/tasks.def: translation (encoder-decoder, label-smoothed loss over
// target tokens), mlm (encoder, loss over masked tokens), classification,
// multilabel and lm (decoder-only, loss over next tokens). The loop in
// train/trainer.cpp owns the schedule, logging and checkpoints; train/step.h
// the optimizer and the data-parallel exchange.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/tasks.h"
#include "data/batcher.h"
#include "nn/context.h"
#include "nn/parameters.h"

namespace rotor::tasks {

struct TaskSums {
  double loss = 0;         // summed over `tokens` (label-smoothed for translation)
  double nll = 0;          // -log p summed over `tokens`
  int64_t tokens = 0;      // the tokens the loss is normalized by
  int64_t all_tokens = 0;  // every token read (for tokens/s)
  int64_t correct = 0;     // masked-LM, classification: predictions equal to the target
  bool has_correct = false;
  void add(const TaskSums& o) {
    loss += o.loss;
    nll += o.nll;
    tokens += o.tokens;
    all_tokens += o.all_tokens;
    correct += o.correct;
    has_correct = has_correct || o.has_correct;
  }
};

// What a validation measured: the loss sums over the whole set, and the
// scores of decoded translations when train.valid_metrics asks for them.
struct ValidationResult {
  TaskSums sums;
  // bleu, chrf (translation); f1, mcc, pearson, spearman (classification);
  // ap, auroc (multilabel)
  std::vector<std::pair<ValidMetric, double>> scores;
  // Further measures a task reports by name, logged and recorded with the
  // others (task lm: bpb, bits per UTF-8 byte of the text).
  std::vector<std::pair<std::string, double>> measures;
  std::string how;      // how the set was evaluated, for the log line ("" = the usual)
  int64_t decoded = 0;  // sentences decoded for the scores
  double decode_seconds = 0;
  // The value of `metric` (loss and accuracy per token); NaN when not measured,
  // and for loss and accuracy when no token was scored (sums.tokens 0).
  double value(ValidMetric metric) const;
};

// The data sets a task evaluates on: data.valid during training, data.test
// once at the end.
enum class EvalSplit { Valid, Test };

class TrainingTask {
 public:
  virtual ~TrainingTask() = default;
  virtual nn::ParameterStore& params() = 0;
  virtual std::string tokenizer_path() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Files every checkpoint holds besides the weights, state, config and
  // tokenizer (name, contents): task multilabel's labels.txt.
  virtual std::vector<std::pair<std::string, std::string>> checkpoint_files() const { return {}; }
  // The names of the classifier's outputs in row order (task classification:
  // data.labels; multilabel: its label vocabulary); empty for the other
  // tasks, regression and multiple choice. model.init_from reads the label
  // rows of a checkpoint by them (checkpoint/label_rows.h).
  virtual std::vector<std::string> label_names() const { return {}; }
  // Forward and backward (loss gradient scaled by ctx.loss_scale: 1, or the
  // fp16 loss scale; accumulated) of the next micro-batch of the training
  // stream, computed in ctx.dtype.
  virtual TaskSums train_micro_batch(const nn::Context& ctx) = 0;
  // The loss over a whole evaluation set (fixed masks for masked-LM), and the
  // scores of train.valid_metrics. has_split is false when the config names
  // no such data.
  virtual bool has_split(EvalSplit split) const = 0;
  virtual ValidationResult evaluate(EvalSplit split, Device device) = 0;
  bool has_valid() const { return has_split(EvalSplit::Valid); }
  // Where the training stream is: saved in checkpoints, restored on resume.
  virtual data::BatchPosition position() const = 0;
  virtual void set_position(data::BatchPosition position) = 0;
};

// The training half of a task (its config half is its TaskSpec,
// config/tasks.h): each task's folder defines one (`kNameSlice`, task.cpp).
struct TaskSlice {
  // The task's TrainingTask for `config`, its data loaded (and prepared from
  // raw text when needed), its model built on `device` (parameters
  // allocated, not initialized). Rank r of world_size reads its own shard of
  // every epoch.
  std::unique_ptr<TrainingTask> (*make)(const Config& config, Device device, int rank,
                                        int world_size) = nullptr;
  // Before a resumed run writes anything: the task's own check that its data
  // is still what the checkpoint was trained on, in place of tasks/data.h's
  // tokenizer and corpus checks (task multilabel: the label vocabulary).
  // Null: those checks.
  void (*check_resumable)(const Config& config, const std::string& checkpoint_dir) = nullptr;
};

// TaskSlice::make for a TrainingTask constructed from (config, device, rank,
// world_size).
template <class T>
std::unique_ptr<TrainingTask> make_training_task(const Config& config, Device device, int rank,
                                                 int world_size) {
  return std::make_unique<T>(config, device, rank, world_size);
}

// The training halves of the registered tasks (src/tasks/tasks.def), each
// defined in its task's folder.
#define ROTOR_TASK(Name, Trainer) extern const TaskSlice k##Trainer##Slice;
#include "tasks/tasks.def"
#undef ROTOR_TASK

// The training half of `task`.
const TaskSlice& task_slice(Task task);

// Registers a task besides those of tasks.def (both halves; they outlive
// every config that names the task): config.task accepts spec.name from now
// on. A rotor::Error when the name is taken. Returns the task's handle.
Task register_task(const TaskSpec& spec, const TaskSlice& slice);

// task_slice(config.task).make.
std::unique_ptr<TrainingTask> make_task(const Config& config, Device device, int rank = 0,
                                        int world_size = 1);

}  // namespace rotor::tasks
