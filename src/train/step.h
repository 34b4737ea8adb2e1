// One training update, the same code for `rotor train` and `rotor bench
// train` (Marian keeps how an update is computed apart from when to
// validate, save or stop; train/scheduler.h holds the latter):
//
//   zero the gradients
//   update_freq micro-batches (fewer when the scheduler says train.max_epochs
//     ends the data inside the update): forward and backward of the task, dropout
//     keyed by the global micro-batch index; the last micro-batch's backward
//     launches the gradient all-reduce in buckets as layers become final
//   finish the all-reduce; sum the token and loss counts over the ranks
//   learning rate of update step+1 from the schedule; gradients scaled by
//     1 / (global tokens x fp16 loss scale)
//   the precision's test hook, the optimizer step (replicated, or sharded
//     over the ranks), then the precision's reaction (a skipped fp16 step
//     halves the scale; the 16-bit weight copy is refreshed)
#pragma once

#include <cstdint>
#include <memory>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "nn/context.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "parallel/communicator.h"
#include "parallel/data_parallel.h"
#include "tasks/task.h"
#include "train/precision.h"
#include "train/scheduler.h"

namespace rotor::train {

// The optimizer and learning-rate schedule a config describes.
optim::OptimizerOptions optimizer_options(const Config& config);
optim::ScheduleOptions schedule_options(const Config& config);

// Marks between the parts of an update, for benchmarks (train/bench.cpp);
// the marks inside a micro-batch (nn::PhaseHook) come from the task.
struct StepPhases : nn::PhaseHook {
  virtual void update_begins() {}       // before the gradients are zeroed
  virtual void micro_batch_begins() {}  // before the task takes its next batch
  virtual void micro_batch_ends(const tasks::TaskSums& /*sums*/) {}  // after its backward
  virtual void optimizer_ends() {}  // after the all-reduce and the optimizer step
};

struct UpdateResult {
  tasks::TaskSums sums;  // over the micro-batches of every rank; no tokens: no step was made
  optim::StepInfo info;  // gradient norm; skipped for non-finite gradients
  double lr = 0;         // the learning rate of this update
};

class UpdateStep {
 public:
  // The parameters of `task` are initialized (or loaded) before the first
  // run(); `comm` spans the ranks (world size 1: no communication at all);
  // `scheduler` says when the data's epochs end.
  UpdateStep(const Config& config, tasks::TrainingTask& task, PrecisionPolicy& precision,
             parallel::Communicator& comm, const Scheduler& scheduler);
  ~UpdateStep();

  // The update after state.step, once scheduler.before_update let it run:
  // advances state.step and state.micro_step (and the precision's
  // bookkeeping in state) when it was made (sums.tokens > 0).
  UpdateResult run(checkpoint::TrainerState& state, StepPhases* phases = nullptr);

  // The full optimizer state: load a checkpoint's moments into optimizer(),
  // then call optimizer_loaded() on every rank (the sharded optimizer takes
  // its shard). Before saving, gather_optimizer() (collective) puts the full
  // moments into optimizer() on rank 0.
  optim::Optimizer& optimizer() { return optimizer_; }
  void optimizer_loaded();
  const optim::Optimizer& gather_optimizer();

  // The all-reduce buckets (null unless world > 1 with replicated moments).
  const parallel::GradientBuckets* buckets() const { return buckets_.get(); }

 private:
  const Config& config_;
  tasks::TrainingTask& task_;
  PrecisionPolicy& precision_;
  parallel::Communicator& comm_;
  const Scheduler& scheduler_;
  optim::Optimizer optimizer_;  // full moments: world 1, or the replicated case
  std::unique_ptr<parallel::ShardedAdamW> sharded_;
  std::unique_ptr<parallel::GradientBuckets> buckets_;
  optim::ScheduleOptions schedule_;
  nn::Context ctx_;
};

}  // namespace rotor::train
