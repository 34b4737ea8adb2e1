// `rotor bench train CONFIG [--steps N] [--warmup W] [--set k=v]... [--json FILE] [--profile]
// [--compare-checkpointing]`: the training throughput of a config
// (train/bench.h); with --compare-checkpointing, run without and with
// train.checkpoint_activations, the memory it saves and the time it costs.
// `bench` groups the
// benchmarks; kernel benchmarks live in bench/ (CUDA builds).
#include <cstdio>
#include <memory>

#include "cli/args.h"
#include "cli/command.h"
#include "config/config.h"
#include "core/io.h"
#include "core/json_io.h"
#include "train/bench.h"

namespace {

struct BenchTrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  int64_t steps = 20;
  int64_t warmup = 3;
  std::string json;
  bool json_given = false;
  bool compare_checkpointing = false;
  bool profile = false;
};

int run_bench_train(const BenchTrainArgs& a) {
  using namespace rotor;
  cli::check_input_file("bench train", "config", a.config);
  // --steps and --warmup: run_train_bench checks them before any work.
  if (a.json_given) cli::check_output_file("bench train", "--json", a.json, {a.config});
  const Config cfg = load_config(a.config, a.overrides);
  train::BenchOptions o;
  o.steps = a.steps;
  o.warmup = a.warmup;
  o.profile = a.profile;
  if (a.compare_checkpointing) {
    const train::CheckpointComparison r = train::run_checkpoint_comparison(cfg, o);
    if (a.json_given) {
      const json_io::Json j = train::checkpoint_comparison_json(r, cfg, a.config);
      atomic_write_file(a.json,
                        j.dump(2, ' ', false, json_io::Json::error_handler_t::replace) + "\n");
    }
    const std::string text = train::format_checkpoint_comparison(r, a.config);
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  const train::BenchResult r = train::run_train_bench(cfg, o);
  if (a.json_given) {
    // A config path that is not UTF-8 is written with U+FFFD for its bad bytes.
    const json_io::Json j = train::bench_json(r, cfg, a.config);
    atomic_write_file(a.json,
                      j.dump(2, ' ', false, json_io::Json::error_handler_t::replace) + "\n");
  }
  const std::string text = train::format_bench(r, a.config);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

// The setup lambda is parenthesized: its captures hold a comma.
ROTOR_COMMAND("bench", "Benchmarks: `rotor bench train CONFIG` (training throughput)", 95,
              ([](CLI::App& app) {
                app.require_subcommand(1);
                auto args = std::make_shared<BenchTrainArgs>();
                CLI::App* train = app.add_subcommand(
                    "train", "Training throughput of a config: tokens/s, step phases, peak memory");
                train->add_option("config", args->config, "YAML config file")->required();
                train->add_option("--steps", args->steps, "Timed updates (default 20)");
                train->add_option("--warmup", args->warmup, "Untimed updates first (default 3)");
                train->add_option("--set", args->overrides,
                                  "Override a config key: --set data.max_tokens=4096");
                train->add_option_function<std::string>(
                    "--json",
                    [args](const std::string& path) {
                      args->json = path;
                      args->json_given = true;
                    },
                    "Also write the figures as JSON to FILE");
                train->add_flag("--compare-checkpointing", args->compare_checkpointing,
                                "Run without and with train.checkpoint_activations: the "
                                "activation memory it saves, the update time it costs");
                train->add_flag("--profile", args->profile,
                                "Then --steps more updates with every op timed: each op's calls, "
                                "self time, share of the update, GFLOP/s and GB/s");
                return [args, train]() -> int {
                  if (train->parsed()) return run_bench_train(*args);
                  return 0;
                };
              }));
