// When a run logs, validates, saves and stops: decisions from the config, the
// trainer state and the data position only, so that the training loop
// (train/trainer.cpp) and the update (train/step.h) read as a loop and a
// computation, and these rules are tested on their own
// (tests/cpu/test_scheduler.cpp). A run stops before an update on
// train.max_updates and train.max_epochs, after one on an update without
// tokens, on train.patience and on SIGTERM/SIGINT.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "checkpoint/checkpoint.h"
#include "config/config.h"

namespace rotor::train {

enum class StopReason {
  None,
  MaxUpdates,  // train.max_updates reached
  MaxEpochs,   // train.max_epochs reached
  Patience,    // train.patience validations without improvement
  Signal,      // SIGTERM/SIGINT on some rank
  NoTokens,    // an update found nothing to learn from on any rank
};
std::string_view stop_reason_text(StopReason reason);

class Scheduler {
 public:
  // `signalled` answers whether SIGTERM/SIGINT reached any rank, the same on
  // every rank (parallel::agree_stop: a collective); empty: never.
  Scheduler(const TrainConfig& train, bool has_valid, std::function<bool()> signalled = {});

  // train.max_updates reached.
  bool finished(int64_t step) const { return step >= max_updates_; }
  // train.max_epochs (0: no limit) reached at data epoch `epoch` (0-based,
  // the task's position). Also asked inside an update before each
  // micro-batch after its first: the last update of the last epoch may have
  // fewer micro-batches (as fairseq's).
  bool epochs_done(uint64_t epoch) const;

  // Before the update after `step`, the data at epoch `epoch`: MaxUpdates or
  // MaxEpochs when the run makes no more updates, else None.
  StopReason before_update(int64_t step, uint64_t epoch) const;
  // After an update whose micro-batches held `tokens` tokens to learn from
  // over every rank: NoTokens when there were none (no step was made: the
  // data is used up), else None.
  StopReason after_update(int64_t tokens) const;
  // Signal when SIGTERM/SIGINT reached any rank (cluster preemption), else
  // None. Every rank asks at the same point of every update, so that all
  // stop after the same one.
  StopReason signals() const;
  // Every train.log_interval updates, and at the last one.
  bool log_now(int64_t step) const;
  // Every train.valid_interval updates and at the last one, when there is
  // validation data (valid_interval 0: never).
  bool validate_now(int64_t step) const;
  // Every train.save_interval updates (0: never), at the last one, and
  // whenever the run stops early.
  bool save_now(int64_t step, StopReason stop) const;

  // Records a validation's score of train.best_metric in `state` (at
  // state.step): the best so far and the validations since it improved
  // (lower is better for the loss, higher for accuracy, BLEU and chrF).
  // `improved`: a new best (the run saves it as checkpoints/best); `stop`:
  // train.patience validations in a row did not improve it. A NaN score
  // never improves.
  struct Verdict {
    bool improved = false, stop = false;
  };
  Verdict record_validation(double score, checkpoint::TrainerState& state) const;
  ValidMetric best_metric() const { return best_metric_; }

 private:
  int64_t max_updates_, log_interval_, valid_interval_, save_interval_;
  int patience_;
  int64_t max_epochs_;
  ValidMetric best_metric_;
  bool has_valid_;
  std::function<bool()> signalled_;
};

}  // namespace rotor::train
