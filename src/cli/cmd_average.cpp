// `rotor average CKPT... --output DIR` or `rotor average --last N --run RUN_DIR
// --output DIR`: the mean of the model weights of several checkpoints, written
// as a checkpoint directory for `rotor translate --checkpoint DIR`.
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "checkpoint/average.h"

namespace {

struct AverageArgs {
  std::vector<std::string> inputs;
  std::string output, run;
  int last = 0;
};

int run_average(const AverageArgs& a) {
  using namespace rotor;
  std::vector<std::string> inputs = a.inputs;
  if (a.last > 0 || !a.run.empty()) {
    if (!inputs.empty())
      ROTOR_FAIL("average: give checkpoints or --last N --run RUN_DIR, not both");
    if (a.last <= 0 || a.run.empty()) ROTOR_FAIL("average: --last N and --run RUN_DIR go together");
    inputs = checkpoint::last_checkpoints(a.run, a.last);
  }
  if (inputs.empty())
    ROTOR_FAIL("average: no checkpoints given (CKPT... or --last N --run RUN_DIR)");
  std::vector<std::string> used = checkpoint::average_checkpoints(inputs, a.output);
  std::fprintf(stderr, "rotor: averaged %zu checkpoints into %s\n", used.size(), a.output.c_str());
  return 0;
}

}  // namespace

ROTOR_COMMAND("average", "Average the weights of several checkpoints", 12, [](CLI::App& app) {
  auto a = std::make_shared<AverageArgs>();
  app.add_option("checkpoints", a->inputs, "Checkpoint or run directories");
  app.add_option("--output,-o", a->output, "Directory to write the averaged checkpoint to")
      ->required();
  app.add_option("--last", a->last, "Average the newest N step_* checkpoints of --run")
      ->check(CLI::PositiveNumber);
  app.add_option("--run", a->run, "Run directory for --last");
  return [a] { return run_average(*a); };
});
