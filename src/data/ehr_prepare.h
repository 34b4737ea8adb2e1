// `rotor prepare-ehr`: EHR tables or JSON lines (data/ehr_input.h) ->
// a prepared directory (data/ehr.h): a code vocabulary, and per split the
// patients' token sequences (and, with labels, the fine-tuning targets).
//
// Patients with fewer than min_visits visits are dropped. Each remaining
// patient goes to one split, by a seeded hash of its id (so no patient is in
// two splits, and the split of a patient does not depend on the others):
// test with probability test_fraction, valid with valid_fraction, else train.
//
// Labels (one example per patient; the history up to the cut-off is the input):
//   next_visit     cut-off visit c drawn (seeded, per patient) from 0..n-2;
//                  the labels are the codes of visit c+1.
//   window:MONTHS  c drawn among the visits followed by a visit at most MONTHS
//                  later; the labels are the codes of every later visit within
//                  MONTHS of visit c.
// Label codes outside the vocabulary are left out; a patient left without any
// label (or without a cut-off) is dropped and counted.
#pragma once

#include <cstdint>
#include <string>

#include "core/io.h"
#include "data/ehr_input.h"

namespace rotor::data {

struct EhrPrepareOptions {
  std::string events, patients;  // the CSV tables, or
  std::string jsonl;             // JSON lines
  EhrCsvColumns columns;
  std::string output_dir;
  std::string labels;  // "", "next_visit" or "window:MONTHS"
  int64_t min_visits = 1;
  int64_t min_count = 1;           // codes seen fewer times in training are <unk>
  std::string age_unit = "years";  // or "months"
  int64_t age_bin = 1;             // age_unit per age id
  double valid_fraction = 0.1, test_fraction = 0.1;
  uint64_t seed = 1;
};

struct EhrPrepareStats {
  int64_t patients = 0, kept = 0, dropped_few_visits = 0, dropped_no_label = 0;
  int64_t train = 0, valid = 0, test = 0;  // examples
  int64_t vocab_size = 0, age_vocab_size = 0, tokens = 0, unknown_tokens = 0;
  std::string summary() const;  // one line
};

// The label rule of `labels` ("", next_visit, window:MONTHS): its window in
// months (0 for next_visit and none). A rotor::Error naming --labels otherwise.
int64_t parse_ehr_labels(const std::string& labels);

// Reads the input, writes DIR as data/ehr.h lays it out, whole or not at all
// (a failed or killed run leaves an earlier DIR as it was; its temporary is
// removed by the next run). Errors: the readers', no patient left, an empty
// training split, a DIR holding files prepare-ehr does not write.
EhrPrepareStats prepare_ehr(const EhrPrepareOptions& options);

// How prepare-ehr writes its directory (whole or not at all, core/io.h): the
// names of an earlier one it replaces; a directory holding anything else is
// refused.
DirectoryWriter ehr_prepare_writer();

}  // namespace rotor::data
