// Checkpoints (docs/design.md, Checkpoints and run directories):
// OUTPUT_DIR/checkpoints/step_N/ holds
//   model.safetensors      the fp32 weights, Hugging Face style names
//   optimizer.safetensors  the Adam moments (exp_avg, exp_avg_sq), flat
//   trainer_state.json     step, data position, RNG seed, loss scale, ...
//   config.yaml            the resolved config
//   spm.model              the tokenizer, so a checkpoint stands alone: a
//                          SentencePiece model, or a byte tokenizer's file
//                          (data/sentencepiece.h; Tokenizer::load reads both)
//   labels.txt             task multilabel: its label vocabulary, a label a line
//   vocab.txt              EHR data (data.format ehr): the prepare-ehr
//                          directory's code vocabulary (data/ehr.h), which
//                          model.init_from compares with the fine-tuning data's
// Each directory is written under a temporary name, fsync'ed and renamed; the
// symlink OUTPUT_DIR/checkpoint_last is then swapped to point at it, and all
// but the newest keep_last step_N directories are pruned. Pruning renames a
// directory away before deleting it, so a step_N directory is always
// complete or absent, even when the process is killed.
// OUTPUT_DIR/checkpoints/best/ holds the model of the best validation so far
// (the same files but the optimizer state), replaced atomically when a
// validation improves on it and never pruned.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/batcher.h"
#include "nn/parameters.h"
#include "optim/optimizer.h"

namespace rotor::checkpoint {

struct TrainerState {
  int64_t step = 0;                   // updates done
  int64_t micro_step = 0;             // micro-batches done per rank (keys the dropout streams)
  data::BatchPosition position;       // of rank 0's batch stream
  int world_size = 1;                 // of the run that saved it: position and
                                      // micro_step are per rank of that world
  double loss_scale = 1.0;            // fp16: the dynamic loss scale; else 1
  int64_t loss_scale_good_steps = 0;  // fp16: good steps since the scale last changed
  int64_t skipped_steps = 0;
  // The best validation so far of train.best_metric (named, so that a run
  // resumed with another metric starts its record afresh), and the
  // validations since it improved (train.patience).
  bool has_best = false;
  std::string best_metric = "loss";
  double best_score = 0;
  int64_t best_step = 0;
  int64_t bad_validations = 0;
  double train_seconds = 0;
};

struct CheckpointContents {
  const nn::ParameterStore* params = nullptr;
  const optim::Optimizer* optimizer = nullptr;  // may be null (averaged checkpoints)
  TrainerState state;
  std::string config_yaml;
  std::string spm_model;  // path of the tokenizer to copy in ("" = none)
  // Files a task adds (name in the directory, contents): kLabelsFile.
  std::vector<std::pair<std::string, std::string>> files;
};

// Task multilabel's label vocabulary in a checkpoint.
inline constexpr const char* kLabelsFile = "labels.txt";
// kLabelsFile's text: a label a line, each ending in "\n".
std::string labels_file_text(const std::vector<std::string>& labels);
// Reads one back; a missing file, an empty line or no label is a
// rotor::Error naming the file (and the line).
std::vector<std::string> read_labels_file(const std::string& path);
// An EHR run's code vocabulary in a checkpoint (a copy of DIR/vocab.txt).
inline constexpr const char* kEhrVocabFile = "vocab.txt";
// What an EHR run's data were (data::ehr_fingerprint of the directory of each
// of data.train, data.valid and data.test, by key), which --resume checks.
inline constexpr const char* kEhrDataFile = "ehr_data.json";

// Writes OUTPUT_DIR/checkpoints/step_<state.step>, repoints checkpoint_last
// and prunes to keep_last. Returns the checkpoint directory.
std::string save_checkpoint(const std::string& output_dir, const CheckpointContents& c,
                            int keep_last);

// Replaces OUTPUT_DIR/checkpoints/best with `c` (its optimizer left out).
// Returns the directory.
std::string save_best(const std::string& output_dir, const CheckpointContents& c);

// The step of a checkpoint directory name "step_N", or -1 for any other name.
int64_t checkpoint_step(const std::string& dir_name);

// The checkpoint a resumed run continues from: the newest complete step_N
// of OUTPUT_DIR (a kill between publishing a checkpoint and repointing
// checkpoint_last leaves the link one behind), or "" when there is none.
std::string latest_checkpoint(const std::string& output_dir);

// The complete checkpoints of a run directory (step, path), oldest first.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir);

// Removes what interrupted writers of OUTPUT_DIR left behind: temporary and
// half-pruned checkpoint directories, temporary links. Only the run that
// holds the directory's lock may call it (train/run_dir.h).
void remove_stale_temporaries(const std::string& output_dir);

// A run directory (its checkpoint_last), RUN:best (its checkpoints/best), or a
// checkpoint directory -> the checkpoint directory. A rotor::Error when none
// holds a checkpoint.
std::string resolve_checkpoint(const std::string& path);

// A checkpoint being read: resolve_checkpoint's directory with a shared lock
// (flock) on it for the reader's lifetime, which the pruning of a run that
// is training there respects (save_checkpoint skips a step_N directory a
// reader holds, and prunes it at a later save). A checkpoint pruned between
// the resolution and the lock is resolved again (a run's checkpoint_last
// has moved on to a newer one). The inference commands hold what they read.
class HeldCheckpoint {
 public:
  explicit HeldCheckpoint(const std::string& path);
  ~HeldCheckpoint();
  HeldCheckpoint(const HeldCheckpoint&) = delete;
  HeldCheckpoint& operator=(const HeldCheckpoint&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int fd_ = -1;
};

// Loads model.safetensors into `params`: every parameter must be present with
// its shape and hold finite values (a clear error names the first that does
// not: a model of NaN weights would only translate into empty lines).
void load_weights(const std::string& checkpoint_dir, nn::ParameterStore& params);
void load_optimizer(const std::string& checkpoint_dir, optim::Optimizer& optimizer);
TrainerState load_trainer_state(const std::string& checkpoint_dir);

// The weights of a store as named tensors (views; no copy).
void save_weights(const std::string& path, const nn::ParameterStore& params,
                  const std::string& config_yaml);

}  // namespace rotor::checkpoint
