// `rotor synth TASK`: write a synthetic data set. Tasks: numbers-en-de
// (English number words -> German number words, see src/data/synth_numbers.h).
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "data/synth_numbers.h"

namespace {

struct SynthArgs {
  std::string task;
  rotor::data::SynthNumbersOptions numbers;
};

int run_synth(const SynthArgs& a) {
  if (a.task != "numbers-en-de")
    ROTOR_FAIL("synth: unknown task '{}' (available: numbers-en-de)", a.task);
  auto splits = rotor::data::write_synth_numbers(a.numbers);
  std::printf("synth numbers-en-de: wrote %s/{train,valid,test,test_long}.{en,de} (",
              a.numbers.output_dir.c_str());
  for (size_t i = 0; i < splits.size(); ++i)
    std::printf("%s%s %zu", i ? ", " : "", splits[i].name.c_str(), splits[i].numbers.size());
  std::printf(" pairs, seed %llu)\n", static_cast<unsigned long long>(a.numbers.seed));
  return 0;
}

}  // namespace

ROTOR_COMMAND("synth", "Write a synthetic data set (numbers-en-de)", 22, [](CLI::App& sub) {
  auto a = std::make_shared<SynthArgs>();
  auto& o = a->numbers;
  sub.add_option("task", a->task, "Task: numbers-en-de")->required();
  sub.add_option("--output", o.output_dir, "Output directory (created)")->required();
  sub.add_option("--seed", o.seed, "Random seed")->capture_default_str();
  sub.add_option("--train", o.train, "Training pairs")->capture_default_str();
  sub.add_option("--valid", o.valid, "Validation pairs")->capture_default_str();
  sub.add_option("--test", o.test, "Test pairs")->capture_default_str();
  sub.add_option("--test-long", o.test_long, "Longer-than-training test pairs")
      ->capture_default_str();
  return [a] { return run_synth(*a); };
});
