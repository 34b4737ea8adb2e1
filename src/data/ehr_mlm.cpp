#include "data/ehr_mlm.h"

#include "core/error.h"

namespace rotor::data {

EhrMlmBatcher::EhrMlmBatcher(std::shared_ptr<const EhrSplit> split, int64_t seq_len,
                             const Masker& masker, MlmBatcherOptions options)
    : split_(std::move(split)),
      seq_len_(seq_len),
      masker_(masker),
      opt_(options),
      plan_(split_ ? static_cast<int64_t>(split_->size()) : 0, options) {
  ROTOR_CHECK(split_, "EhrMlmBatcher needs a split");
  if (seq_len < 2) ROTOR_FAIL("data.seq_len: {} is too short for [CLS] + codes", seq_len);
}

MlmHostBatch EhrMlmBatcher::make_batch(const std::vector<int64_t>& ids, uint64_t round,
                                       bool masked) const {
  const int64_t B = static_cast<int64_t>(ids.size());
  ROTOR_CHECK(B > 0, "an empty EHR batch");
  std::vector<EhrSequence> rows;
  int64_t T = 0;
  for (int64_t id : ids) {
    rows.push_back(build_ehr_sequence(split_->tokens(static_cast<size_t>(id)), seq_len_));
    T = std::max<int64_t>(T, static_cast<int64_t>(rows.back().size()));
  }
  const size_t n = static_cast<size_t>(B * T);
  std::vector<int32_t> input(n, kEhrPad), types(n, 0), ages(n, 0), pos(n, 0);
  std::vector<int32_t> lengths(ids.size()), positions, targets, row_masked;
  for (size_t b = 0; b < rows.size(); ++b) {
    EhrSequence& s = rows[b];
    row_masked.clear();
    if (masked)
      masker_.mask(s.codes, round, static_cast<uint64_t>(ids[b]), seq_len_, row_masked, targets);
    for (int32_t t : row_masked) positions.push_back(static_cast<int32_t>(b) * T + t);
    const size_t at = b * static_cast<size_t>(T);
    std::copy(s.codes.begin(), s.codes.end(), input.begin() + at);
    std::copy(s.segments.begin(), s.segments.end(), types.begin() + at);
    std::copy(s.ages.begin(), s.ages.end(), ages.begin() + at);
    std::copy(s.positions.begin(), s.positions.end(), pos.begin() + at);
    lengths[b] = static_cast<int32_t>(s.size());
  }
  MlmHostBatch batch = mlm_host_batch(input, lengths, positions, targets, B, T);
  batch.token_type_ids = Tensor::from_ints(types, {B, T});
  batch.age_ids = Tensor::from_ints(ages, {B, T});
  batch.position_ids = Tensor::from_ints(pos, {B, T});
  return batch;
}

MlmHostBatch EhrMlmBatcher::next() {
  const BatchPlan::Next n = plan_.next();
  return make_batch(*n.ids, opt_.fixed_masking ? kFixedMaskingRound : n.epoch);
}

}  // namespace rotor::data
