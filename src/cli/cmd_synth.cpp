// `rotor synth TASK`: write a synthetic data set. Tasks: numbers-en-de
// (English number words -> German number words, see src/data/synth_numbers.h).
#include <cstdint>
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/synth_numbers.h"

namespace {

struct SynthArgs {
  std::string task;
  rotor::data::SynthNumbersOptions numbers;
  int64_t seed = 1;
};

int run_synth(const SynthArgs& a) {
  if (a.task != "numbers-en-de")
    ROTOR_FAIL("synth: unknown task '{}' (available: numbers-en-de)", a.task);
  using namespace rotor::cli;
  check_output_dir("synth", "--output", a.numbers.output_dir, {});
  // Bounded here so that their sum cannot overflow; synth_numbers_splits
  // checks what the task allows (90000 distinct numbers in train+valid+test).
  check_int("synth", "--train", a.numbers.train, 1, 90'000);
  check_int("synth", "--valid", a.numbers.valid, 0, 90'000);
  check_int("synth", "--test", a.numbers.test, 0, 90'000);
  check_int("synth", "--test-long", a.numbers.test_long, 0, 1'000'000);
  check_int("synth", "--seed", a.seed, 0, INT64_MAX);
  rotor::data::SynthNumbersOptions o = a.numbers;
  o.seed = static_cast<uint64_t>(a.seed);
  auto splits = rotor::data::write_synth_numbers(o);
  std::printf("synth numbers-en-de: wrote %s/{train,valid,test,test_long}.{en,de} (",
              a.numbers.output_dir.c_str());
  for (size_t i = 0; i < splits.size(); ++i)
    std::printf("%s%s %zu", i ? ", " : "", splits[i].name.c_str(), splits[i].numbers.size());
  std::printf(" pairs, seed %llu)\n", static_cast<unsigned long long>(o.seed));
  return 0;
}

}  // namespace

ROTOR_COMMAND("synth", "Write a synthetic data set (numbers-en-de)", 22, [](CLI::App& sub) {
  auto a = std::make_shared<SynthArgs>();
  auto& o = a->numbers;
  sub.add_option("task", a->task, "Task: numbers-en-de")->required();
  sub.add_option("--output", o.output_dir, "Output directory (created)")->required();
  // Read as a signed number: CLI11 would wrap "-1" around into 2^64 - 1.
  sub.add_option_function<int64_t>(
      "--seed", [a](const int64_t& seed) { a->seed = seed; }, "Random seed (default 1)");
  sub.add_option("--train", o.train, "Training pairs")->capture_default_str();
  sub.add_option("--valid", o.valid, "Validation pairs")->capture_default_str();
  sub.add_option("--test", o.test, "Test pairs")->capture_default_str();
  sub.add_option("--test-long", o.test_long, "Longer-than-training test pairs")
      ->capture_default_str();
  return [a] { return run_synth(*a); };
});
