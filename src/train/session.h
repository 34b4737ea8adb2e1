// How one rank of `rotor train` and of `rotor bench train` is set up
// (docs/design.md, "A training run"). Both build their run here, so that the
// benchmark measures the run that training makes; they differ only in what
// they do with it (train/trainer.cpp loops, logs and saves; train/bench.cpp
// times updates).
//
//   Session session(config, options);  // join: this rank's device, the communicator
//   ...                                // the trainer's extras: run directory, config, log
//   session.build(resume);             // the task and its model, ready to update
//
// build() runs, in this order: the task (rank 0 prepares the data while the
// other ranks wait), the parameters initialized from the seed,
// model.init_from (checkpoint/import_hf.h, logged), the precision policy, the
// scheduler, the update step, the optional resume hook, the optimizer's shard
// (sharded moments), the broadcast of rank 0's weights and the refresh of the
// 16-bit compute copy.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "config/config.h"
#include "core/device.h"
#include "nn/parameters.h"
#include "parallel/communicator.h"
#include "tasks/task.h"
#include "train/precision.h"
#include "train/scheduler.h"
#include "train/step.h"

namespace rotor::train {

// The GPUs as a session reaches them: how many answer, and making the one of
// this rank current. parallel::rank_device decides which one that is; tests
// stand in for both on a machine without a GPU, where a CPU's lack of a
// device index would otherwise hide the question each rank asks.
struct DeviceAccess {
  std::function<int()> count;
  // Makes `gpu` this process's current device; returns the device the run's
  // tensors live on (`gpu` itself, but for tests).
  std::function<Device(Device gpu)> bind;

  static DeviceAccess cuda();  // cuda_device_count and cuda::set_device
};

struct SessionOptions {
  // The rendezvous store of dist.rendezvous auto when no launcher names one:
  // OUTPUT_DIR/.rendezvous for `rotor train`; "" (none) for the bench, which
  // joins a job only under a launcher.
  std::string store_dir;
  DeviceAccess devices = DeviceAccess::cuda();
};

class Session {
 public:
  // Joins the job: config.device resolved, this rank's device
  // (parallel::rank_device from the launcher's local rank) made current, and
  // the communicator over the ranks. `config` must outlive the session.
  Session(const Config& config, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Builds the run (the order is in the header comment). `resume`, when
  // given, runs after the update step exists and before the broadcast: it
  // loads a checkpoint's weights, optimizer moments and precision state.
  void build(const std::function<void(Session&)>& resume = {});

  // Ends the run before parallel::finalize: the update step, the task and
  // the communicator, in that order.
  void close();

  const Config& config() const { return config_; }
  Device device() const { return device_; }
  parallel::Communicator& comm() { return *comm_; }
  int rank() const { return comm_->rank(); }
  int world() const { return comm_->world_size(); }

  // After build():
  tasks::TrainingTask& task() { return *task_; }
  nn::ParameterStore& params() { return task_->params(); }
  PrecisionPolicy& precision() { return *precision_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  UpdateStep& step() { return *step_; }

 private:
  const Config& config_;
  Device device_;
  std::unique_ptr<parallel::Communicator> comm_;
  std::unique_ptr<tasks::TrainingTask> task_;
  std::unique_ptr<PrecisionPolicy> precision_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<UpdateStep> step_;  // refers to all of the above: destroyed first
};

}  // namespace rotor::train
