// `rotor prepare-ehr`: EHR tables (--events, --patients) or JSON lines
// (--jsonl) -> a prepared directory of patient sequences (src/data/ehr.h).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "data/ehr_prepare.h"

namespace {

struct PrepareEhrArgs {
  rotor::data::EhrPrepareOptions o;
  int64_t seed = 1;
};

int run_prepare_ehr(PrepareEhrArgs& a) {
  using namespace rotor::cli;
  auto& o = a.o;
  const char* cmd = "prepare-ehr";
  const bool csv = !o.events.empty() || !o.patients.empty();
  if (csv == !o.jsonl.empty())
    ROTOR_FAIL("{}: give either --events and --patients (CSV) or --jsonl", cmd);
  std::vector<std::string> inputs;
  if (csv) {
    check_nonempty(cmd, "--events", o.events);
    check_nonempty(cmd, "--patients", o.patients);
    check_input_file(cmd, "--events", o.events);
    check_input_file(cmd, "--patients", o.patients);
    inputs = {o.events, o.patients};
  } else {
    check_input_file(cmd, "--jsonl", o.jsonl);
    inputs = {o.jsonl};
  }
  check_output_dir(cmd, "--output", o.output_dir, {});
  for (const auto& in : inputs)
    if (inside(in, o.output_dir))
      ROTOR_FAIL("{}: --output {} holds the input {}; name another directory", cmd, o.output_dir,
                 in);
  rotor::data::parse_ehr_labels(o.labels);
  check_int(cmd, "--min-visits", o.min_visits, 1, 1'000'000);
  check_int(cmd, "--min-count", o.min_count, 1, 1'000'000'000);
  check_int(cmd, "--age-bin", o.age_bin, 1, 1200);
  if (o.age_unit != "years" && o.age_unit != "months")
    ROTOR_FAIL("{}: --age-unit must be years or months, got '{}'", cmd, o.age_unit);
  check_real(cmd, "--valid-fraction", o.valid_fraction, 0, 1);
  check_real(cmd, "--test-fraction", o.test_fraction, 0, 1);
  if (o.valid_fraction + o.test_fraction >= 1)
    ROTOR_FAIL("{}: --valid-fraction {} + --test-fraction {} leave no training patients", cmd,
               o.valid_fraction, o.test_fraction);
  check_int(cmd, "--seed", a.seed, 0, INT64_MAX);
  o.seed = static_cast<uint64_t>(a.seed);
  const auto st = rotor::data::prepare_ehr(o);
  std::printf("%s\n", st.summary().c_str());
  std::printf("prepare-ehr: wrote %s/{train,valid,test}.{bin,idx}%s, vocab.txt and ehr.json\n",
              o.output_dir.c_str(), o.labels.empty() ? "" : ", {train,valid,test}.labels.*");
  return 0;
}

}  // namespace

ROTOR_COMMAND(
    "prepare-ehr", "Turn EHR tables or JSON lines into patient sequences", 23, [](CLI::App& sub) {
      auto a = std::make_shared<PrepareEhrArgs>();
      auto& o = a->o;
      sub.add_option("--events", o.events, "CSV of events: patient_id,time,visit_id,code");
      sub.add_option("--patients", o.patients, "CSV of patients: patient_id,birth_date");
      sub.add_option("--jsonl", o.jsonl, "JSON lines, one patient per line");
      sub.add_option("--output", o.output_dir, "Output directory (created)")->required();
      sub.add_option("--labels", o.labels,
                     "Fine-tuning labels: next_visit or window:MONTHS (default none)");
      sub.add_option("--min-visits", o.min_visits, "Drop patients with fewer visits")
          ->capture_default_str();
      sub.add_option("--min-count", o.min_count, "Codes seen fewer times in training become <unk>")
          ->capture_default_str();
      sub.add_option("--age-unit", o.age_unit, "Ages in years or months")->capture_default_str();
      sub.add_option("--age-bin", o.age_bin, "Age units per age id")->capture_default_str();
      sub.add_option("--valid-fraction", o.valid_fraction, "Patients in valid")
          ->capture_default_str();
      sub.add_option("--test-fraction", o.test_fraction, "Patients in test")->capture_default_str();
      sub.add_option_function<int64_t>(
          "--seed", [a](const int64_t& s) { a->seed = s; },
          "Seed of the split and the cut-offs (default 1)");
      sub.add_option("--patient-column", o.columns.patient_id, "Patient id column")
          ->capture_default_str();
      sub.add_option("--time-column", o.columns.time, "Event date column")->capture_default_str();
      sub.add_option("--visit-column", o.columns.visit_id, "Visit id column")
          ->capture_default_str();
      sub.add_option("--code-column", o.columns.code, "Code column")->capture_default_str();
      sub.add_option("--birth-column", o.columns.birth_date, "Birth date column")
          ->capture_default_str();
      return [a] { return run_prepare_ehr(*a); };
    });
