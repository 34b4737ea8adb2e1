// Masked-LM batches of prepared EHR data (data/ehr.h): one patient per row,
// built by build_ehr_sequence (at most seq_len tokens, the newest kept),
// masked as text blocks are (data/mlm.h, Masker: the codes only -- the
// specials <pad> <unk> [CLS] [SEP] [MASK] are never selected nor drawn as
// random replacements; the example index is the block id of the masking
// stream). Rows carry the segment as token types, the age ids and the visit
// positions.
//
// Packed patients (pack: true, data.packing documents): patients fill rows
// of seq_len tokens greedily in split order (a patient that does not fit
// the rest of a row starts the next; each patient is at most seq_len
// tokens), the batch plan runs over those rows, and every token carries its
// patient's index in the row (MlmHostBatch::documents): attention stays
// within a patient, whose visit positions restart by themselves. A patient
// is masked exactly as in its own row (its example index keys the stream).
#pragma once

#include <memory>
#include <vector>

#include "data/batch_plan.h"
#include "data/ehr.h"
#include "data/mlm.h"

namespace rotor::data {

class EhrMlmBatcher {
 public:
  // A rotor::Error when seq_len < 2.
  EhrMlmBatcher(std::shared_ptr<const EhrSplit> split, int64_t seq_len, const Masker& masker,
                MlmBatcherOptions options, bool pack = false);

  MlmHostBatch next();
  BatchPosition position() const { return plan_.position(); }
  void set_position(BatchPosition p) { plan_.set_position(p); }
  int64_t batches_in_epoch() const { return plan_.batches_in_epoch(); }
  // The batch of these examples (packed: of these rows of patients),
  // masked with `round`; masked: false leaves them unmasked (no targets),
  // for inspection and tests.
  MlmHostBatch make_batch(const std::vector<int64_t>& example_ids, uint64_t round,
                          bool masked = true) const;
  // Packed: the rows of patients, and the patients of row i.
  int64_t rows() const { return static_cast<int64_t>(row_starts_.size()) - 1; }
  std::vector<int64_t> row_patients(int64_t i) const;

 private:
  static std::vector<uint64_t> pack_rows(const EhrSplit& split, int64_t seq_len);
  std::vector<uint64_t> row_starts_;  // packed: row i holds patients [i] .. [i + 1] - 1
  std::shared_ptr<const EhrSplit> split_;
  int64_t seq_len_;
  Masker masker_;
  MlmBatcherOptions opt_;
  BatchPlan plan_;
};

}  // namespace rotor::data
