// `rotor average CKPT... --output DIR` or `rotor average --last N --run RUN_DIR
// --output DIR`: the mean of the model weights of several checkpoints, written
// as a checkpoint directory for `rotor translate --checkpoint DIR`.
#include <cstdio>

#include "checkpoint/average.h"
#include "checkpoint/checkpoint.h"
#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"

namespace {

struct AverageArgs {
  std::vector<std::string> inputs;
  std::string output, run;
  int64_t last = 0;
  bool last_given = false, run_given = false;
};

int run_average(const AverageArgs& a) {
  using namespace rotor;
  std::vector<std::string> inputs = a.inputs;
  for (const auto& in : inputs) cli::check_nonempty("average", "checkpoint", in);
  if (a.last_given || a.run_given) {
    if (!inputs.empty())
      ROTOR_FAIL("average: give checkpoints or --last N --run RUN_DIR, not both");
    if (!a.last_given || !a.run_given)
      ROTOR_FAIL("average: --last N and --run RUN_DIR go together");
    cli::check_int("average", "--last", a.last, 1, 100'000);
    cli::check_nonempty("average", "--run", a.run);
    inputs = checkpoint::last_checkpoints(a.run, static_cast<int>(a.last));
  }
  if (inputs.empty())
    ROTOR_FAIL("average: no checkpoints given (CKPT... or --last N --run RUN_DIR)");
  // The output must not be, or lie inside, a checkpoint it reads.
  // Each held while it is read (not pruned by a run training there).
  std::vector<std::unique_ptr<checkpoint::HeldCheckpoint>> held;
  std::vector<std::string> dirs;
  for (const auto& in : inputs) {
    held.push_back(std::make_unique<checkpoint::HeldCheckpoint>(in));
    dirs.push_back(held.back()->dir());
  }
  cli::check_output_dir("average", "--output", a.output, dirs, /*may_be_checkpoint=*/true);
  std::vector<std::string> used = checkpoint::average_checkpoints(dirs, a.output);
  std::fprintf(stderr, "rotor: averaged %zu checkpoints into %s\n", used.size(), a.output.c_str());
  return 0;
}

}  // namespace

ROTOR_COMMAND("average", "Average the weights of several checkpoints", 12, [](CLI::App& app) {
  auto a = std::make_shared<AverageArgs>();
  app.add_option("checkpoints", a->inputs, "Checkpoint or run directories");
  app.add_option("--output,-o", a->output, "Directory to write the averaged checkpoint to")
      ->required();
  app.add_option_function<int64_t>(
      "--last",
      [a](const int64_t& n) {
        a->last = n;
        a->last_given = true;
      },
      "Average the newest N step_* checkpoints of --run");
  app.add_option_function<std::string>(
      "--run",
      [a](const std::string& r) {
        a->run = r;
        a->run_given = true;
      },
      "Run directory for --last");
  return [a] { return run_average(*a); };
});
