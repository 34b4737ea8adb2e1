// `rotor train`: the training loop for translation (DESIGN.md decisions 2-3,
// 6-12): token batches, label-smoothed loss normalized by target tokens,
// Adam with a schedule and clipping, gradient accumulation (update_freq),
// validation, JSON-lines metrics, checkpoints and exact resume.
#pragma once

#include <string>

#include "models/transformer.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "config/config.h"

namespace rotor::train {

struct TrainOptions {
  bool resume = false;  // continue from OUTPUT_DIR/checkpoint_last
};

// Runs the whole job described by `config`. Returns the process exit code.
int run_training(const Config& config, const std::string& config_yaml, const TrainOptions& options);

// The optimizer and learning-rate schedule a config describes (`rotor train`
// and `rotor bench train` build the same ones).
optim::OptimizerOptions optimizer_options(const Config& config);
optim::ScheduleOptions schedule_options(const Config& config);

}  // namespace rotor::train
