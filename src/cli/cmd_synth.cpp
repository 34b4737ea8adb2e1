// `rotor synth TASK`: write a synthetic data set. Tasks: numbers-en-de
// (English number words -> German number words, see src/data/synth_numbers.h)
// and ehr (a cohort of patients with visits of diagnosis codes, see
// src/data/synth_ehr.h).
#include <cstdint>
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/synth_ehr.h"
#include "data/synth_numbers.h"

namespace {

struct SynthArgs {
  std::string task;
  rotor::data::SynthNumbersOptions numbers;
  int64_t seed = 1;
  int64_t patients = 1000;
  std::string format = "csv";
  rotor::data::SynthEhrKnobs knobs;
};

int run_synth_ehr(const SynthArgs& a) {
  using namespace rotor::cli;
  check_int("synth", "--patients", a.patients, 1, 10'000'000);
  if (a.format != "csv" && a.format != "jsonl")
    ROTOR_FAIL("synth: --format must be csv or jsonl, got '{}'", a.format);
  const auto& k = a.knobs;
  check_real("synth", "--recur", k.recur, 0, 1);
  check_real("synth", "--age-effect", k.age_effect, 0, 10);
  check_int("synth", "--chains", k.chains, 0, 999);
  check_real("synth", "--chain-strength", k.chain_strength, 0, 1);
  check_int("synth", "--noise-codes", k.noise_codes, 1, 999);
  check_int("synth", "--noise-per-visit", k.noise_per_visit, 1, k.noise_codes);
  check_real("synth", "--noise-zipf", k.noise_zipf, 0, 10);
  rotor::data::SynthEhrOptions o;
  o.knobs = k;
  o.output_dir = a.numbers.output_dir;
  o.patients = a.patients;
  o.seed = static_cast<uint64_t>(a.seed);
  o.format = a.format;
  const auto files = rotor::data::write_synth_ehr(o);
  std::printf("synth ehr: wrote %lld patients to", static_cast<long long>(a.patients));
  for (const auto& f : files) std::printf(" %s", f.c_str());
  std::printf(" (seed %llu)\n", static_cast<unsigned long long>(o.seed));
  return 0;
}

int run_synth(const SynthArgs& a) {
  if (a.task != "numbers-en-de" && a.task != "ehr")
    ROTOR_FAIL("synth: unknown task '{}' (available: numbers-en-de, ehr)", a.task);
  using namespace rotor::cli;
  check_output_dir("synth", "--output", a.numbers.output_dir, {});
  check_int("synth", "--seed", a.seed, 0, INT64_MAX);
  if (a.task == "ehr") return run_synth_ehr(a);
  // Bounded here so that their sum cannot overflow; synth_numbers_splits
  // checks what the task allows (90000 distinct numbers in train+valid+test).
  check_int("synth", "--train", a.numbers.train, 1, 90'000);
  check_int("synth", "--valid", a.numbers.valid, 0, 90'000);
  check_int("synth", "--test", a.numbers.test, 0, 90'000);
  check_int("synth", "--test-long", a.numbers.test_long, 0, 1'000'000);
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

ROTOR_COMMAND("synth", "Write a synthetic data set (numbers-en-de, ehr)", 22, [](CLI::App& sub) {
  auto a = std::make_shared<SynthArgs>();
  auto& o = a->numbers;
  sub.add_option("task", a->task, "Task: numbers-en-de or ehr")->required();
  sub.add_option("--output", o.output_dir, "Output directory (created)")->required();
  // Read as a signed number: CLI11 would wrap "-1" around into 2^64 - 1.
  sub.add_option_function<int64_t>(
      "--seed", [a](const int64_t& seed) { a->seed = seed; }, "Random seed (default 1)");
  sub.add_option("--train", o.train, "numbers-en-de: training pairs")->capture_default_str();
  sub.add_option("--valid", o.valid, "numbers-en-de: validation pairs")->capture_default_str();
  sub.add_option("--test", o.test, "numbers-en-de: test pairs")->capture_default_str();
  sub.add_option("--test-long", o.test_long, "numbers-en-de: longer-than-training test pairs")
      ->capture_default_str();
  sub.add_option("--patients", a->patients, "ehr: patients in the cohort")->capture_default_str();
  sub.add_option("--format", a->format, "ehr: csv (events.csv, patients.csv) or jsonl")
      ->capture_default_str();
  auto& k = a->knobs;  // src/data/synth_ehr.h; the defaults make the shipped cohort
  sub.add_option("--recur", k.recur, "ehr: chance that a chronic condition recurs at a later visit")
      ->capture_default_str();
  sub.add_option("--age-effect", k.age_effect,
                 "ehr: exponent of the age curves of incidence (0: none, 2: sharper)")
      ->capture_default_str();
  sub.add_option("--chains", k.chains,
                 "ehr: next-visit chains (a trigger code makes its target likely at the next "
                 "visit)")
      ->capture_default_str();
  sub.add_option("--chain-strength", k.chain_strength,
                 "ehr: chance of a chain's target at the visit after its trigger")
      ->capture_default_str();
  sub.add_option("--noise-codes", k.noise_codes, "ehr: acute (noise) codes")->capture_default_str();
  sub.add_option("--noise-per-visit", k.noise_per_visit,
                 "ehr: at most this many acute codes per visit (one to that many)")
      ->capture_default_str();
  sub.add_option("--noise-zipf", k.noise_zipf,
                 "ehr: Zipf exponent of the acute codes' frequencies (0: uniform)")
      ->capture_default_str();
  return [a] { return run_synth(*a); };
});
