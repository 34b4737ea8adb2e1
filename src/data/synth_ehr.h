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
// function of (seed, patient index, knobs).
//
// The knobs (SynthEhrKnobs, `rotor synth ehr --recur ...`) make cohorts of
// known difficulty; at their defaults the cohort is the one above, byte for
// byte (no draw is added or moved):
//   recur           the chance that a chronic condition recurs at each later
//                   visit (0.8);
//   age_effect      the exponent of the age curve: incidence = base x
//                   age_weight^age_effect (1; 0: every age at the peak, 2: a
//                   sharper age dependence);
//   chains          next-visit chains (0): N trigger codes (X001 ..), each
//                   present at a visit with chance 0.05, and N target codes
//                   (Y001 ..): a target appears at the visit after its
//                   trigger with chance chain_strength (0.6) -- what only a
//                   model that reads the last visit predicts;
//   noise_codes     the acute codes (24: the list below; more are named
//                   A001 ..), noise_per_visit of them at most per visit (2;
//                   one to that many, uniform), drawn uniformly or, with
//                   noise_zipf s > 0, with weight 1 / rank^s (Zipf).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/ehr_input.h"

namespace rotor::data {

struct SynthEhrKnobs {
  double recur = 0.8;           // chance of a chronic condition at each later visit
  double age_effect = 1.0;      // exponent of the age curves of incidence
  int64_t chains = 0;           // next-visit chains (trigger -> target at the next visit)
  double chain_strength = 0.6;  // chance of the target at the visit after its trigger
  int64_t noise_codes = 24;     // acute (noise) codes
  int64_t noise_per_visit = 2;  // at most this many acute codes per visit (one to that many)
  double noise_zipf = 0.0;      // Zipf exponent of the acute codes' frequencies; 0: uniform
  bool operator==(const SynthEhrKnobs&) const = default;
};

struct SynthEhrOptions {
  std::string output_dir;
  int64_t patients = 1000;
  uint64_t seed = 1;
  std::string format = "csv";  // csv: events.csv + patients.csv; jsonl: patients.jsonl
  SynthEhrKnobs knobs;
};

struct SynthEhrPatient {
  std::string id;
  int64_t birth_year = 0, birth_month = 0, birth_day = 0;
  EhrPatient record;  // visits with age in months (whole: visits fall on the birth day)
};

// The cohort, deterministic. A rotor::Error for knobs out of range (chances
// in [0, 1], age_effect and noise_zipf in [0, 10], chains in [0, 999],
// noise_codes in [1, 999], noise_per_visit in [1, noise_codes]).
std::vector<SynthEhrPatient> synth_ehr_cohort(int64_t patients, uint64_t seed,
                                              const SynthEhrKnobs& knobs = {});

// Writes the cohort in `format` into DIR (created), each file atomically;
// returns the paths written.
std::vector<std::string> write_synth_ehr(const SynthEhrOptions& options);

}  // namespace rotor::data
