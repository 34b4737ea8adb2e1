// train/scheduler.h: when a run logs, validates, saves and stops (max_updates,
// max_epochs, an update without tokens, patience, signals).
#include <gtest/gtest.h>

#include <cmath>

#include "train/scheduler.h"

namespace rotor::train {
namespace {

TrainConfig config() {
  TrainConfig t;
  t.max_updates = 10;
  t.log_interval = 3;
  t.valid_interval = 4;
  t.save_interval = 5;
  t.patience = 2;
  return t;
}

TEST(Scheduler, IntervalsAndTheLastUpdate) {
  const Scheduler s(config(), true);
  for (int64_t step = 1; step <= 10; ++step) {
    SCOPED_TRACE(step);
    EXPECT_EQ(s.log_now(step), step % 3 == 0 || step == 10);
    EXPECT_EQ(s.validate_now(step), step % 4 == 0 || step == 10);
    EXPECT_EQ(s.save_now(step, StopReason::None), step % 5 == 0 || step == 10);
    EXPECT_TRUE(s.save_now(step, StopReason::Signal)) << "a run that stops early saves";
    EXPECT_EQ(s.finished(step), step == 10);
  }
}

TEST(Scheduler, StopsBeforeAnUpdateOnMaxUpdatesAndMaxEpochs) {
  TrainConfig t = config();
  t.max_epochs = 2;
  const Scheduler s(t, true);
  EXPECT_EQ(s.before_update(0, 0), StopReason::None);
  EXPECT_EQ(s.before_update(9, 1), StopReason::None);
  EXPECT_EQ(s.before_update(10, 0), StopReason::MaxUpdates);
  EXPECT_EQ(s.before_update(10, 2), StopReason::MaxUpdates) << "max_updates is asked first";
  EXPECT_EQ(s.before_update(3, 2), StopReason::MaxEpochs);
  EXPECT_EQ(s.before_update(3, 5), StopReason::MaxEpochs);
  EXPECT_FALSE(s.epochs_done(1));
  EXPECT_TRUE(s.epochs_done(2));
  t.max_epochs = 0;  // no limit
  const Scheduler unlimited(t, true);
  EXPECT_FALSE(unlimited.epochs_done(1000000));
  EXPECT_EQ(unlimited.before_update(9, 1000000), StopReason::None);
}

TEST(Scheduler, StopsAfterAnUpdateWithoutTokens) {
  const Scheduler s(config(), true);
  EXPECT_EQ(s.after_update(0), StopReason::NoTokens);
  EXPECT_EQ(s.after_update(1), StopReason::None);
  EXPECT_TRUE(s.save_now(3, StopReason::NoTokens));
}

TEST(Scheduler, StopsOnTheSignalTheRanksAgreeOn) {
  EXPECT_EQ(Scheduler(config(), true).signals(), StopReason::None) << "no agreement: never";
  bool signalled = false;
  int asked = 0;
  const Scheduler s(config(), true, [&] {
    ++asked;
    return signalled;
  });
  EXPECT_EQ(s.signals(), StopReason::None);
  signalled = true;
  EXPECT_EQ(s.signals(), StopReason::Signal);
  EXPECT_EQ(asked, 2) << "asked once per call: a collective every rank makes at the same point";
  EXPECT_NE(stop_reason_text(StopReason::Signal).find("signal"), std::string_view::npos);
}

TEST(Scheduler, NoValidationWithoutDataOrInterval) {
  EXPECT_FALSE(Scheduler(config(), false).validate_now(4));
  TrainConfig t = config();
  t.valid_interval = 0;
  EXPECT_FALSE(Scheduler(t, true).validate_now(10));
  t.save_interval = 0;
  EXPECT_FALSE(Scheduler(t, true).save_now(5, StopReason::None));
  EXPECT_TRUE(Scheduler(t, true).save_now(10, StopReason::None));
}

TEST(Scheduler, PatienceCountsValidationsWithoutImprovement) {
  const Scheduler s(config(), true);
  checkpoint::TrainerState state;
  EXPECT_TRUE(s.record_validation(3.0, state).improved);
  EXPECT_EQ(state.best_score, 3.0);
  auto v = s.record_validation(3.5, state);
  EXPECT_FALSE(v.improved || v.stop);
  EXPECT_EQ(state.bad_validations, 1);
  v = s.record_validation(2.5, state);
  EXPECT_TRUE(v.improved) << "an improvement resets the count";
  EXPECT_FALSE(v.stop);
  EXPECT_EQ(state.bad_validations, 0);
  EXPECT_EQ(state.best_score, 2.5);
  EXPECT_FALSE(s.record_validation(2.5, state).stop) << "equal is no improvement";
  v = s.record_validation(2.6, state);
  EXPECT_TRUE(v.stop) << "two in a row without improvement";
  EXPECT_FALSE(v.improved);
  EXPECT_FALSE(s.record_validation(std::nan(""), state).improved) << "NaN never improves";
  TrainConfig no_patience = config();
  no_patience.patience = 0;
  checkpoint::TrainerState st;
  for (double x : {1.0, 2.0, 3.0, 4.0})
    EXPECT_FALSE(Scheduler(no_patience, true).record_validation(x, st).stop);
}

TEST(Scheduler, HigherIsBetterForScoresAndTheRecordFollowsTheMetric) {
  TrainConfig t = config();
  t.best_metric = ValidMetric::Bleu;
  const Scheduler s(t, true);
  checkpoint::TrainerState state;
  state.step = 4;
  EXPECT_TRUE(s.record_validation(20.0, state).improved);
  EXPECT_EQ(state.best_metric, "bleu");
  EXPECT_EQ(state.best_step, 4);
  state.step = 8;
  EXPECT_FALSE(s.record_validation(19.0, state).improved) << "lower BLEU is worse";
  EXPECT_TRUE(s.record_validation(21.0, state).improved);
  EXPECT_EQ(state.best_step, 8);
  // A run resumed with another best_metric starts its record afresh.
  t.best_metric = ValidMetric::Loss;
  EXPECT_TRUE(Scheduler(t, true).record_validation(99.0, state).improved);
  EXPECT_EQ(state.best_metric, "loss");
}

}  // namespace
}  // namespace rotor::train
