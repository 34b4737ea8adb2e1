#include "data/ehr_mlm.h"

#include <algorithm>

#include "core/error.h"
#include "data/row_packer.h"

namespace rotor::data {

std::vector<uint64_t> EhrMlmBatcher::pack_rows(const EhrSplit& split, int64_t seq_len) {
  RowPacker rows(seq_len);
  for (size_t p = 0; p < split.size(); ++p) rows.add(ehr_sequence_length(split.tokens(p), seq_len));
  return std::move(rows).bounds();
}

EhrMlmBatcher::EhrMlmBatcher(std::shared_ptr<const EhrSplit> split, int64_t seq_len,
                             const Masker& masker, MlmBatcherOptions options, bool pack)
    : row_starts_(split && pack && seq_len >= 2 ? pack_rows(*split, seq_len)
                                                : std::vector<uint64_t>{}),
      split_(std::move(split)),
      seq_len_(seq_len),
      masker_(masker),
      opt_(options),
      plan_(!split_ ? 0
            : pack  ? rows()
                    : static_cast<int64_t>(split_->size()),
            options) {
  ROTOR_CHECK(split_, "EhrMlmBatcher needs a split");
  if (seq_len < 2) ROTOR_FAIL("data.seq_len: {} is too short for [CLS] + codes", seq_len);
}

std::vector<int64_t> EhrMlmBatcher::row_patients(int64_t i) const {
  ROTOR_CHECK(i >= 0 && i < rows(), "packed row {} of {}", i, rows());
  std::vector<int64_t> out;
  for (uint64_t p = row_starts_[static_cast<size_t>(i)];
       p < row_starts_[static_cast<size_t>(i) + 1]; ++p)
    out.push_back(static_cast<int64_t>(p));
  return out;
}

MlmHostBatch EhrMlmBatcher::make_batch(const std::vector<int64_t>& ids, uint64_t round,
                                       bool masked) const {
  const int64_t B = static_cast<int64_t>(ids.size());
  ROTOR_CHECK(B > 0, "an empty EHR batch");
  const bool packed = !row_starts_.empty();
  // Each row's patients (one unless packed) and their sequences.
  std::vector<std::vector<int64_t>> patients(ids.size());
  std::vector<std::vector<EhrSequence>> rows(ids.size());
  int64_t T = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    patients[b] = packed ? row_patients(ids[b]) : std::vector<int64_t>{ids[b]};
    int64_t length = 0;
    for (int64_t p : patients[b]) {
      rows[b].push_back(build_ehr_sequence(split_->tokens(static_cast<size_t>(p)), seq_len_));
      length += static_cast<int64_t>(rows[b].back().size());
    }
    T = std::max(T, length);
  }
  const size_t n = static_cast<size_t>(B * T);
  std::vector<int32_t> input(n, kEhrPad), types(n, 0), ages(n, 0), pos(n, 0), docs;
  if (packed) docs.assign(n, -1);
  std::vector<int32_t> lengths(ids.size()), positions, targets, row_masked;
  for (size_t b = 0; b < rows.size(); ++b) {
    size_t at = b * static_cast<size_t>(T);
    for (size_t k = 0; k < rows[b].size(); ++k) {
      EhrSequence& s = rows[b][k];
      row_masked.clear();
      if (masked)
        masker_.mask(s.codes, round, static_cast<uint64_t>(patients[b][k]), seq_len_, row_masked,
                     targets);
      for (int32_t t : row_masked) positions.push_back(static_cast<int32_t>(at) + t);
      std::copy(s.codes.begin(), s.codes.end(), input.begin() + at);
      std::copy(s.segments.begin(), s.segments.end(), types.begin() + at);
      std::copy(s.ages.begin(), s.ages.end(), ages.begin() + at);
      std::copy(s.positions.begin(), s.positions.end(), pos.begin() + at);
      if (packed) std::fill_n(docs.begin() + at, s.size(), static_cast<int32_t>(k));
      at += s.size();
    }
    lengths[b] = static_cast<int32_t>(at - b * static_cast<size_t>(T));
  }
  MlmHostBatch batch = mlm_host_batch(input, lengths, positions, targets, B, T);
  batch.token_type_ids = Tensor::from_ints(types, {B, T});
  batch.age_ids = Tensor::from_ints(ages, {B, T});
  batch.position_ids = Tensor::from_ints(pos, {B, T});
  batch.documents = std::move(docs);
  return batch;
}

MlmHostBatch EhrMlmBatcher::next() {
  const BatchPlan::Next n = plan_.next();
  return make_batch(*n.ids, opt_.fixed_masking ? kFixedMaskingRound : n.epoch);
}

}  // namespace rotor::data
