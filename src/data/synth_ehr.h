// `rotor synth ehr`: a synthetic cohort of patients with visits of diagnosis
// codes, with structure a model can learn and a label-frequency baseline
// cannot (tests and the tiny configs of configs/ehr/ run on it offline):
//
//   chronic conditions (E11 diabetes, I10 hypertension, J45 asthma, ...):
//     once acquired, a condition recurs at each later visit with
//     probability 0.8;
//   age-dependent incidence: at each visit a patient acquires chronic
//     condition k with a probability that depends on age (rising with age
//     for most, falling for asthma, peaking in middle age for depression);
//   comorbidity chains: a condition multiplies the incidence of the next in
//     its chain (E11 -> N18 kidney disease -> D63 anaemia; I10 -> I50 heart
//     failure -> I48 atrial fibrillation);
//   acute codes (one to two per visit, uniform over 24 codes): noise.
//
// Patients are born 1930-01-01 .. 2009-12-28 (day 1 to 28), have 3 to 20
// visits, one to eighteen months apart, none after 2020. Everything is a
// function of (seed, patient index).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/ehr_input.h"

namespace rotor::data {

struct SynthEhrOptions {
  std::string output_dir;
  int64_t patients = 1000;
  uint64_t seed = 1;
  std::string format = "csv";  // csv: events.csv + patients.csv; jsonl: patients.jsonl
};

struct SynthEhrPatient {
  std::string id;
  int64_t birth_year = 0, birth_month = 0, birth_day = 0;
  EhrPatient record;  // visits with age in months (whole: visits fall on the birth day)
};

// The cohort, deterministic.
std::vector<SynthEhrPatient> synth_ehr_cohort(int64_t patients, uint64_t seed);

// Writes the cohort in `format` into DIR (created), each file atomically;
// returns the paths written.
std::vector<std::string> write_synth_ehr(const SynthEhrOptions& options);

}  // namespace rotor::data
