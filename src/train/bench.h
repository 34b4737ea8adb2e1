// `rotor bench train`: the throughput of training a config's model on the
// config's data and device. It sets up its run as `rotor train` does
// (train/session.h: this rank's device, the task with its data prepared from
// raw text into OUTPUT_DIR when needed, model.init_from, the precision and
// the update step), runs `warmup` updates,
// then `steps` timed updates (forward, backward, optimizer step) and reports
// tokens/s, the mean update time split into phases, and peak memory: of the
// whole run, and of the activations (the most a micro-batch's forward and
// backward held above what was held when its forward began: the weights,
// gradients, moments and the batch). It writes no checkpoint, log file or
// metrics. run_checkpoint_comparison runs it without and with
// train.checkpoint_activations, for the memory that saves and the time it
// costs.
//
// The phase split comes from nn::PhaseHook marks that the tasks place at the
// start of the forward and of the backward. On a GPU, reading a phase's end
// needs a device synchronization at every mark: the bench does that in a pass
// of its own, after a pass without those synchronizations that gives the
// tokens/s. Training never synchronizes inside a step.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/profile.h"

namespace rotor::train {

struct BenchOptions {
  int64_t steps = 20;    // timed updates
  int64_t warmup = 3;    // untimed updates before them
  bool profile = false;  // then as many updates again, each op timed (core/profile.h)
};

// One micro-batch as the model saw it. Translation: [sequences, src_len]
// source and [sequences, tgt_len] target (padded), `tokens` the target
// tokens, `all_tokens` source + target. Masked-LM: [sequences, src_len]
// input, tgt_len 0, `tokens` the masked tokens, `all_tokens` the non-pad ones.
struct BenchBatch {
  int64_t sequences = 0, src_len = 0, tgt_len = 0;
  int64_t tokens = 0, all_tokens = 0;
};

struct BenchPhases {
  double data = 0;       // next batch from the batcher, copied to the device
  double forward = 0;    // forward and loss
  double backward = 0;   // backward (gradients accumulated)
  double optimizer = 0;  // zero_grad, clipping, Adam(W) step
  double total() const { return data + forward + backward + optimizer; }
};

struct BenchResult {
  std::string task, device, device_name, precision;
  int64_t parameters = 0;
  int64_t vocab_size = 0;
  int64_t steps = 0, warmup = 0;
  int update_freq = 1;
  bool phase_sync = false;  // the device was synchronized at phase boundaries (GPU)

  // The throughput pass (on the CPU the only pass).
  double seconds = 0;  // the timed updates, end to end
  int64_t tokens = 0, all_tokens = 0;
  double step_ms = 0, step_ms_min = 0, step_ms_max = 0;
  // The phase pass (the throughput pass on the CPU): mean ms per update.
  BenchPhases phases_ms;
  double phase_step_ms = 0;

  bool checkpoint_activations = false;  // train.checkpoint_activations
  size_t peak_bytes = 0;  // held by rotor's allocator on the device (the CUDA pool on a GPU)
  // The activation peak: over the micro-batches of the run, the most held
  // during forward and backward above what was held when the forward began
  // (that base: the largest seen at a forward's start).
  size_t activation_peak_bytes = 0, base_bytes = 0;
  size_t max_rss_bytes = 0;         // process maximum resident set size
  std::vector<BenchBatch> batches;  // the throughput pass's micro-batches, in order
  std::vector<double> losses;       // the throughput pass's updates: loss per token
  // --profile: the ops' self times over `steps` more updates (a pass of its
  // own, so that the timers never touch the figures above), slowest first,
  // and that pass's wall time per update.
  std::vector<profile::Row> profile;
  double profile_step_ms = 0;

  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
  double all_tokens_per_s() const {
    return seconds > 0 ? static_cast<double>(all_tokens) / seconds : 0;
  }
};

// Runs the benchmark of `config` (validated for training). Throws rotor::Error.
BenchResult run_train_bench(const Config& config, const BenchOptions& options);

// The bench of `config` without, then with train.checkpoint_activations
// (whatever the config says), each as run_train_bench runs it.
struct CheckpointComparison {
  BenchResult off, on;
};
CheckpointComparison run_checkpoint_comparison(const Config& config, const BenchOptions& options);
// The two reports and a summary: the activation peak each way and what
// checkpointing saves, the update time each way and what it costs.
std::string format_checkpoint_comparison(const CheckpointComparison& result,
                                         const std::string& config_path);
// {"compare": "train.checkpoint_activations", "off": bench_json, "on": bench_json}
nlohmann::ordered_json checkpoint_comparison_json(const CheckpointComparison& result,
                                                  const Config& config,
                                                  const std::string& config_path);

// The report for people (several lines, ending with a newline), and the
// figures for scripts (scripts/bench/train_peer.py reads the model, the
// optimizer settings and the batches from it). `config_path` is echoed.
std::string format_bench(const BenchResult& result, const std::string& config_path);
nlohmann::ordered_json bench_json(const BenchResult& result, const Config& config,
                                  const std::string& config_path);

}  // namespace rotor::train
