// Masked-LM batches of prepared EHR data (data/ehr.h): one patient per row,
// built by build_ehr_sequence (at most seq_len tokens, the newest kept),
// masked as text blocks are (data/mlm.h, Masker: the codes only -- the
// specials <pad> <unk> [CLS] [SEP] [MASK] are never selected nor drawn as
// random replacements; the example index is the block id of the masking
// stream). Rows carry the segment as token types, the age ids and the visit
// positions.
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
                MlmBatcherOptions options);

  MlmHostBatch next();
  BatchPosition position() const { return plan_.position(); }
  void set_position(BatchPosition p) { plan_.set_position(p); }
  int64_t batches_in_epoch() const { return plan_.batches_in_epoch(); }
  // The batch of these examples, masked with `round`; masked: false leaves
  // them unmasked (no targets), for inspection and tests.
  MlmHostBatch make_batch(const std::vector<int64_t>& example_ids, uint64_t round,
                          bool masked = true) const;

 private:
  std::shared_ptr<const EhrSplit> split_;
  int64_t seq_len_;
  Masker masker_;
  MlmBatcherOptions opt_;
  BatchPlan plan_;
};

}  // namespace rotor::data
