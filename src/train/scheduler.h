// When a run logs, validates, saves and stops: decisions from the config and
// the trainer state only, so that the training loop (train/trainer.cpp) reads
// as a loop and these rules are tested on their own
// (tests/cpu/test_scheduler.cpp).
#pragma once

#include <cstdint>
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
  Scheduler(const TrainConfig& train, bool has_valid);

  // train.max_updates reached.
  bool finished(int64_t step) const { return step >= max_updates_; }
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
  ValidMetric best_metric_;
  bool has_valid_;
};

}  // namespace rotor::train
