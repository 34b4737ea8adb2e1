// `rotor train`: the training loop. It joins the job and builds its run
// through train/session.h (as `rotor bench train` does), adding what only
// training has: the run directory lock, the resolved config, the log file and
// the resume; then it repeats one update (train/step.h) while the scheduler
// (train/scheduler.h) says when to log, validate, save and stop.
#pragma once

#include <string>

#include "config/config.h"

namespace rotor::train {

struct TrainOptions {
  bool resume = false;      // continue from OUTPUT_DIR/checkpoint_last
  bool overwrite = false;   // start afresh in a directory that holds a run (train/run_dir.h)
  std::string config_path;  // the config file, never overwritten by OUTPUT_DIR/config.yaml
};

// Runs the whole job described by `config`. Returns the process exit code.
int run_training(const Config& config, const std::string& config_yaml, const TrainOptions& options);

}  // namespace rotor::train
