// `rotor train CONFIG [--set key.path=value]... [--resume | --overwrite] [--dump-config]`
#include <cstdio>

#include "cli/command.h"
#include "config/config.h"
#include "train/trainer.h"

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  bool resume = false;
  bool overwrite = false;
  bool dump = false;
};

}  // namespace

ROTOR_COMMAND("train", "Train a model from a YAML config", 10, [](CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  app.add_option("config", args->config, "YAML config file")->required();
  app.add_option("--set", args->overrides, "Override a config key: --set train.max_updates=100");
  app.add_flag("--resume", args->resume, "Continue from OUTPUT_DIR/checkpoint_last");
  app.add_flag("--overwrite", args->overwrite,
               "Start afresh in an OUTPUT_DIR that holds a run (its files are moved into "
               "OUTPUT_DIR/previous-<date>-<time>/)");
  app.add_flag("--dump-config", args->dump, "Print the resolved config and exit");
  return [args] {
    rotor::Config cfg = rotor::load_config(args->config, args->overrides);
    const std::string yaml = rotor::dump_config(cfg);
    if (args->dump) {
      std::fputs(yaml.c_str(), stdout);
      return 0;
    }
    if (args->resume && args->overwrite)
      throw rotor::Error("--resume and --overwrite exclude each other");
    rotor::train::TrainOptions o;
    o.resume = args->resume;
    o.overwrite = args->overwrite;
    o.config_path = args->config;
    return rotor::train::run_training(cfg, yaml, o);
  };
});
