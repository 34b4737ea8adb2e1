#include "data/synth_ehr.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"
#include "core/philox.h"
#include "data/synth_outputs.h"

namespace rotor::data {

namespace {

// A chronic condition: its code, its incidence per visit at an age (years),
// and the condition earlier in its chain that multiplies it (-1: none).
struct Chronic {
  const char* code;
  double base;    // incidence per visit at the peak of `shape`
  int shape;      // 0: rises with age, 1: falls with age, 2: peaks at 45
  int cause;      // index of the condition that multiplies it
  double factor;  // by how much
};

constexpr Chronic kChronic[] = {
    {"E11", 0.080, 0, -1, 1.0},  // type 2 diabetes
    {"I10", 0.100, 0, -1, 1.0},  // hypertension
    {"N18", 0.015, 0, 0, 8.0},   // chronic kidney disease <- diabetes
    {"D63", 0.010, 0, 2, 10.0},  // anaemia in CKD <- kidney disease
    {"I50", 0.012, 0, 1, 8.0},   // heart failure <- hypertension
    {"I48", 0.010, 0, 4, 8.0},   // atrial fibrillation <- heart failure
    {"J45", 0.030, 1, -1, 1.0},  // asthma
    {"F32", 0.030, 2, -1, 1.0},  // depression
    {"M81", 0.030, 0, -1, 1.0},  // osteoporosis
    {"G30", 0.010, 0, -1, 1.0},  // Alzheimer's disease
};
constexpr int kNumChronic = sizeof(kChronic) / sizeof(kChronic[0]);
constexpr double kChainTrigger = 0.05;  // chance of each chain's trigger at a visit

constexpr const char* kAcute[] = {"J06", "J20", "A09", "R05", "R51", "N39", "S93", "L03",
                                  "H10", "K52", "R10", "B34", "J02", "T14", "M54", "R50",
                                  "H66", "K21", "R42", "S61", "L30", "J01", "R11", "Z23"};
constexpr int kNumAcute = sizeof(kAcute) / sizeof(kAcute[0]);

double age_weight(int shape, double years) {
  switch (shape) {
    case 0:
      return std::min(1.0, std::exp((years - 65.0) / 20.0));
    case 1:
      return std::exp(-years / 15.0);
    default:
      return std::exp(-((years - 45.0) * (years - 45.0)) / (2.0 * 15.0 * 15.0));
  }
}

void check_knobs(const SynthEhrKnobs& k) {
  auto real = [](const char* name, double v, double hi) {
    if (!(v >= 0.0 && v <= hi)) ROTOR_FAIL("synth ehr: {} must be in [0, {}], got {}", name, hi, v);
  };
  auto integer = [](const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) ROTOR_FAIL("synth ehr: {} must be in [{}, {}], got {}", name, lo, hi, v);
  };
  real("recur", k.recur, 1.0);
  real("age_effect", k.age_effect, 10.0);
  integer("chains", k.chains, 0, 999);
  real("chain_strength", k.chain_strength, 1.0);
  integer("noise_codes", k.noise_codes, 1, 999);
  integer("noise_per_visit", k.noise_per_visit, 1, k.noise_codes);
  real("noise_zipf", k.noise_zipf, 10.0);
}

// The acute code of index i: the list above, then A001, A002, ...
std::string acute_code(int64_t i) {
  return i < kNumAcute ? std::string(kAcute[i]) : fmt::format("A{:03}", i - kNumAcute + 1);
}

}  // namespace

std::vector<SynthEhrPatient> synth_ehr_cohort(int64_t n, uint64_t seed,
                                              const SynthEhrKnobs& knobs) {
  check_knobs(knobs);
  const SynthEhrKnobs defaults;
  // Zipf: the cumulative weights of the acute codes, rank i + 1 weighing
  // 1 / (i + 1)^s; uniform draws keep rng.below (the default cohort's draws).
  std::vector<double> zipf_cdf;
  if (knobs.noise_zipf > 0) {
    double total = 0;
    for (int64_t i = 0; i < knobs.noise_codes; ++i) {
      total += std::pow(static_cast<double>(i + 1), -knobs.noise_zipf);
      zipf_cdf.push_back(total);
    }
    for (double& c : zipf_cdf) c /= total;
  }
  std::vector<std::string> acute(static_cast<size_t>(knobs.noise_codes));
  for (int64_t i = 0; i < knobs.noise_codes; ++i) acute[static_cast<size_t>(i)] = acute_code(i);
  std::vector<std::string> triggers, targets;
  for (int64_t i = 1; i <= knobs.chains; ++i) {
    triggers.push_back(fmt::format("X{:03}", i));
    targets.push_back(fmt::format("Y{:03}", i));
  }
  std::vector<SynthEhrPatient> cohort;
  cohort.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    PhiloxRng rng(seed, static_cast<uint64_t>(i));
    SynthEhrPatient p;
    p.id = fmt::format("P{:06}", i + 1);
    p.birth_year = 1930 + static_cast<int64_t>(rng.below(80));
    p.birth_month = 1 + static_cast<int64_t>(rng.below(12));
    p.birth_day = 1 + static_cast<int64_t>(rng.below(28));
    p.record.id = p.id;
    // Months from birth to the end of 2020: no visit after it.
    const int64_t last = (2020 - p.birth_year) * 12 + (12 - p.birth_month);
    const int64_t visits = 3 + static_cast<int64_t>(rng.below(18));
    int64_t age = static_cast<int64_t>(rng.below(static_cast<uint64_t>(
        std::max<int64_t>(1, last - visits * 18))));  // the first visit leaves room for the others
    bool has[kNumChronic] = {};
    std::vector<uint8_t> triggered(static_cast<size_t>(knobs.chains), 0);  // at the last visit
    for (int64_t v = 0; v < visits && age <= last; ++v) {
      EhrVisit visit{age, {}};
      const double years = static_cast<double>(age) / 12.0;
      for (int k = 0; k < kNumChronic; ++k) {
        const Chronic& c = kChronic[k];
        if (has[k]) {
          if (rng.uniform() < knobs.recur) visit.codes.push_back(c.code);
          continue;
        }
        double w = age_weight(c.shape, years);
        if (knobs.age_effect != defaults.age_effect) w = std::pow(w, knobs.age_effect);
        double p_new = c.base * w;
        if (c.cause >= 0 && has[c.cause]) p_new *= c.factor;
        if (rng.uniform() < std::min(p_new, 0.9)) {
          has[k] = true;
          visit.codes.push_back(c.code);
        }
      }
      for (size_t k = 0; k < triggered.size(); ++k) {  // chains: targets, then new triggers
        if (triggered[k] && rng.uniform() < knobs.chain_strength) visit.codes.push_back(targets[k]);
        triggered[k] = rng.uniform() < kChainTrigger;
        if (triggered[k]) visit.codes.push_back(triggers[k]);
      }
      const int64_t n_acute =
          1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(knobs.noise_per_visit)));
      for (int64_t a = 0; a < n_acute; ++a) {
        size_t i = 0;
        if (zipf_cdf.empty()) {
          i = static_cast<size_t>(rng.below(static_cast<uint64_t>(knobs.noise_codes)));
        } else {
          const double u = rng.uniform();
          i = static_cast<size_t>(std::upper_bound(zipf_cdf.begin(), zipf_cdf.end(), u) -
                                  zipf_cdf.begin());
          i = std::min(i, zipf_cdf.size() - 1);
        }
        const std::string& code = acute[i];
        if (std::find(visit.codes.begin(), visit.codes.end(), code) == visit.codes.end())
          visit.codes.push_back(code);
      }
      p.record.visits.push_back(std::move(visit));
      age += 1 + static_cast<int64_t>(rng.below(18));
    }
    cohort.push_back(std::move(p));
  }
  return cohort;
}

std::vector<std::string> write_synth_ehr(const SynthEhrOptions& o) {
  if (o.format != "csv" && o.format != "jsonl")
    ROTOR_FAIL("synth ehr: --format must be csv or jsonl, got '{}'", o.format);
  const auto cohort = synth_ehr_cohort(o.patients, o.seed, o.knobs);
  auto date = [](const SynthEhrPatient& p, int64_t months) {
    const int64_t m = p.birth_month - 1 + months;
    return fmt::format("{:04}-{:02}-{:02}", p.birth_year + m / 12, m % 12 + 1, p.birth_day);
  };
  if (o.format == "jsonl") {
    std::string text;
    for (const auto& p : cohort) {
      json_io::Json j = json_io::Json::object();
      j["patient_id"] = p.id;
      j["visits"] = json_io::Json::array();
      for (const auto& v : p.record.visits)
        j["visits"].push_back({{"age", v.age_months}, {"codes", v.codes}});
      text += j.dump() + "\n";
    }
    write_synth_files(o.output_dir, "ehr", {{"patients.jsonl", std::move(text)}});
    return {o.output_dir + "/patients.jsonl"};
  }
  std::string patients = "patient_id,birth_date\n", events = "patient_id,time,visit_id,code\n";
  for (const auto& p : cohort) {
    patients += fmt::format("{},{}\n", p.id, date(p, 0));
    for (size_t v = 0; v < p.record.visits.size(); ++v)
      for (const auto& code : p.record.visits[v].codes)
        events += fmt::format("{},{},V{},{}\n", p.id, date(p, p.record.visits[v].age_months), v + 1,
                              code);
  }
  // A user's own file of one of these names is never replaced
  // (data/synth_outputs.h).
  write_synth_files(o.output_dir, "ehr",
                    {{"patients.csv", std::move(patients)}, {"events.csv", std::move(events)}});
  return {o.output_dir + "/events.csv", o.output_dir + "/patients.csv"};
}

}  // namespace rotor::data
