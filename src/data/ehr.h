// Prepared EHR data (what `rotor prepare-ehr` writes, data/ehr_prepare.h) and
// the sequence builder that turns a patient into model inputs, BEHRT-style:
//
//   [CLS] visit1 [SEP] visit2 [SEP] ... visitN [SEP]
//
// DIR holds
//   vocab.txt          one token per line, "TOKEN<TAB>COUNT"; line i is id i.
//                      Ids 0-6 are the specials of the masked-LM layout
//                      (data/mlm.h, MlmSpecialIds::standard): <pad> <unk> <s>
//                      </s> [MASK] [CLS] [SEP]; codes follow from id 7 by
//                      descending training count (ties by code). A code seen
//                      fewer than --min-count times in training is <unk>.
//   SPLIT.{bin,idx}    for SPLIT in train, valid, test: a corpus (data/corpus.h,
//                      vocab_size 0) with one sentence per example: the
//                      patient's tokens without [CLS], three int32 per token,
//                      interleaved: code id, age id, visit index (0 for the
//                      first stored visit). A visit's codes are followed by a
//                      [SEP] that carries the visit's age and index.
//   SPLIT.patients     the patient id of each example of SPLIT, one a line.
//   SPLIT.labels.{bin,idx}  with --labels only: sentence i holds the label
//                      code ids (ascending, no repeats; codes of the vocabulary
//                      only) of example i of SPLIT.
//   ehr.json           what the directory holds (EhrMeta) and the fingerprint
//                      of what made it (inputs' hashes, options). Written last;
//                      prepare-ehr removes it first, so a directory whose
//                      ehr.json is present is complete.
// Age ids are floor(age in months / (unit months x bin)) with unit 12
// (years) or 1 (months); the segment of a token is its visit index mod 2
// and is not stored.
//
// A config names a split by its prefix: data.train = DIR/train.
//
// Task multilabel on EHR data (next-visit prediction): the label vocabulary is
// the code vocabulary, every code of vocab.txt (ids 7 .. V-1, label k = code
// id 7 + k, named by its code), whether or not it occurs as a label: so every
// prepare-ehr output of one vocabulary has the same labels, and a code that
// never follows a cut-off in training stays predictable (its AP is left out
// of the means where no example has it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/classification.h"
#include "data/corpus.h"
#include "data/fingerprint.h"

namespace rotor::data {

inline constexpr int32_t kEhrPad = 0, kEhrUnk = 1, kEhrMask = 4, kEhrCls = 5, kEhrSep = 6;
inline constexpr int32_t kEhrFirstCode = 7;
inline constexpr int kEhrChannels = 3;  // code, age, visit per stored token

struct EhrMeta {
  int64_t vocab_size = 0;                  // lines of vocab.txt
  int64_t age_vocab_size = 0;              // the largest age id of any split + 1
  std::string age_unit;                    // "years" or "months"
  int64_t age_bin = 1;                     // ages per bin, in age_unit
  std::string labels;                      // "" (none), "next_visit" or "window:MONTHS"
  int64_t train = 0, valid = 0, test = 0;  // examples per split

  // DIR/ehr.json; a rotor::Error naming it when it is missing (prepare-ehr
  // did not finish) or malformed.
  static EhrMeta load(const std::string& dir);
};

// The directory of a split prefix (DIR/train -> DIR).
std::string ehr_dir_of(const std::string& prefix);
// Whether PREFIX is a prepared EHR split (its directory has an ehr.json).
bool is_ehr_split(const std::string& prefix);

// One split of a prepared directory, memory-mapped.
class EhrSplit {
 public:
  // Opens DIR/ehr.json, PREFIX.{bin,idx} and, where the directory has labels,
  // PREFIX.labels.{bin,idx}. A rotor::Error naming the file for a missing or
  // damaged one, a sentence whose length is not a multiple of 3, a code id
  // outside the vocabulary, an age id outside the age vocabulary, or labels
  // that do not align with the examples.
  static EhrSplit open(const std::string& prefix);

  size_t size() const { return tokens_->size(); }
  // Example i's stored tokens: 3 int32 per token (code, age, visit).
  std::span<const int32_t> tokens(size_t i) const { return tokens_->sentence(i); }
  // Example i's label ids (empty without labels).
  std::span<const int32_t> labels(size_t i) const;
  bool has_labels() const { return labels_ != nullptr; }
  const EhrMeta& meta() const { return meta_; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  EhrMeta meta_;
  std::shared_ptr<const MmapCorpus> tokens_, labels_;
};

// The model inputs of one patient: [CLS] then the newest max_len - 1 stored
// tokens. Visit indices are counted again from the first kept token's visit
// (0); [CLS] takes visit 0, the age of the first kept token and segment 0;
// segment = visit index mod 2. `positions` are the visit indices (BEHRT's
// positions, model.position_source: visit).
struct EhrSequence {
  std::vector<int32_t> codes, ages, segments, positions;
  size_t size() const { return codes.size(); }
};
// `tokens`: 3 int32 per token as stored; max_len >= 2. A rotor::Error for a
// length that is not a multiple of 3 or an empty patient.
EhrSequence build_ehr_sequence(std::span<const int32_t> tokens, int64_t max_len);
// Its size() without building it (the same errors).
int64_t ehr_sequence_length(std::span<const int32_t> tokens, int64_t max_len);

// What a prepared directory is, for a run that resumes on it
// (tasks/data.h): the fingerprint DIR/ehr.json records (prepare-ehr's
// options and its inputs' sizes and hashes), with DIR/vocab.txt's hashed now
// as the file "vocab.txt". Two directories agree exactly when they number
// their codes and ages alike and hold the same patients. nullopt when
// ehr.json records none; a rotor::Error naming it when it is missing or its
// fingerprint is malformed.
std::optional<Fingerprint> ehr_fingerprint(const std::string& dir);

// The tokens of DIR/vocab.txt (line i is id i), without the counts; a
// rotor::Error naming the file and line for a malformed one.
std::vector<std::string> read_ehr_vocab(const std::string& dir);
// The codes of DIR/vocab.txt (ids kEhrFirstCode ..): task multilabel's labels.
std::vector<std::string> ehr_label_names(const std::string& dir);

// The examples of a labelled split as a multi-label set (data/classification.h)
// of vocab_size - kEhrFirstCode labels: ids, types, ages and positions from
// build_ehr_sequence (at most max_len tokens), label k = code id 7 + k. A
// rotor::Error naming the split when it holds a label id outside the codes,
// or when it has no labels (prepared without --labels) and require_labels;
// without, a set without labels (has_labels false).
ClassificationSet ehr_multilabel_set(const EhrSplit& split, int64_t max_len,
                                     bool require_labels = true);

}  // namespace rotor::data
