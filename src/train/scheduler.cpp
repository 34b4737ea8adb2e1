#include "train/scheduler.h"

#include <cmath>
#include <string>
#include <utility>

namespace rotor::train {

std::string_view stop_reason_text(StopReason r) {
  switch (r) {
    case StopReason::None:
      return "running";
    case StopReason::MaxUpdates:
      return "train.max_updates reached";
    case StopReason::MaxEpochs:
      return "train.max_epochs reached";
    case StopReason::Patience:
      return "early stopping (train.patience)";
    case StopReason::Signal:
      return "stopped by a signal";
    case StopReason::NoTokens:
      return "no training tokens left";
  }
  return "?";
}

Scheduler::Scheduler(const TrainConfig& t, bool has_valid, std::function<bool()> signalled)
    : max_updates_(t.max_updates),
      log_interval_(t.log_interval),
      valid_interval_(t.valid_interval),
      save_interval_(t.save_interval),
      patience_(t.patience),
      max_epochs_(t.max_epochs),
      best_metric_(t.best_metric),
      has_valid_(has_valid),
      signalled_(std::move(signalled)) {}

bool Scheduler::epochs_done(uint64_t epoch) const {
  return max_epochs_ > 0 && epoch >= static_cast<uint64_t>(max_epochs_);
}

StopReason Scheduler::before_update(int64_t step, uint64_t epoch) const {
  if (finished(step)) return StopReason::MaxUpdates;
  if (epochs_done(epoch)) return StopReason::MaxEpochs;
  return StopReason::None;
}

StopReason Scheduler::after_update(int64_t tokens) const {
  return tokens == 0 ? StopReason::NoTokens : StopReason::None;
}

StopReason Scheduler::signals() const {
  return signalled_ && signalled_() ? StopReason::Signal : StopReason::None;
}

bool Scheduler::log_now(int64_t step) const {
  return (log_interval_ > 0 && step % log_interval_ == 0) || finished(step);
}

bool Scheduler::validate_now(int64_t step) const {
  return has_valid_ && valid_interval_ > 0 && (step % valid_interval_ == 0 || finished(step));
}

bool Scheduler::save_now(int64_t step, StopReason stop) const {
  return (save_interval_ > 0 && step % save_interval_ == 0) || finished(step) ||
         stop != StopReason::None;
}

Scheduler::Verdict Scheduler::record_validation(double score,
                                                checkpoint::TrainerState& state) const {
  const std::string metric(to_string(best_metric_));
  if (state.best_metric != metric) {  // another metric than the run's record: start afresh
    state.best_metric = metric;
    state.has_best = false;
    state.bad_validations = 0;
  }
  const bool higher_is_better = best_metric_ != ValidMetric::Loss;
  const bool better = higher_is_better ? score > state.best_score : score < state.best_score;
  if (!std::isnan(score) && (!state.has_best || better)) {
    state.has_best = true;
    state.best_score = score;
    state.best_step = state.step;
    state.bad_validations = 0;
    return {true, false};
  }
  ++state.bad_validations;
  return {false, patience_ > 0 && state.bad_validations >= patience_};
}

}  // namespace rotor::train
