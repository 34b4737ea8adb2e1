#include "data/lm.h"

#include <algorithm>

#include "core/error.h"

namespace rotor::data {

LmBlocks::LmBlocks(std::shared_ptr<const MmapCorpus> corpus, int64_t seq_len, int32_t eos_id,
                   bool keep_partial, const std::string& name)
    : corpus_(std::move(corpus)), seq_len_(seq_len), eos_(eos_id) {
  ROTOR_CHECK(corpus_, "LmBlocks needs a corpus");
  if (seq_len < 1) ROTOR_FAIL("data.seq_len: {} tokens; a block needs at least 1", seq_len);
  const uint64_t sep = eos_ >= 0 ? 1 : 0;  // the end-of-text token after a sentence
  uint64_t n = 0;                          // stream length
  for (size_t j = 0; j < corpus_->size(); ++j)
    if (const int64_t Lj = content_length(j); Lj > 0) n += static_cast<uint64_t>(Lj) + sep;
  // Stream tokens with a next token: n - 1 targets in all.
  const uint64_t L = static_cast<uint64_t>(seq_len);
  const uint64_t targets = n > 0 ? n - 1 : 0;
  const uint64_t blocks = keep_partial ? (targets + L - 1) / L : targets / L;
  stream_tokens_ = static_cast<int64_t>(n);
  target_tokens_ = static_cast<int64_t>(keep_partial ? targets : blocks * L);
  if (blocks == 0)
    ROTOR_FAIL("{} has {} tokens{}, too few for {}",
               name.empty() ? "language-model corpus " + corpus_->prefix() : name, n,
               sep ? " (with an end-of-text token per line)" : "",
               keep_partial ? std::string("a token and its next one to score")
                            : fmt::format("one block of data.seq_len {} + 1", seq_len));
  starts_.reserve(blocks);
  uint64_t g = 0;  // stream position of the current sentence's first token
  for (size_t j = 0; j < corpus_->size() && starts_.size() < blocks; ++j) {
    const int64_t Lj = content_length(j);
    if (Lj == 0) continue;
    const uint64_t end = g + static_cast<uint64_t>(Lj) + sep;  // the sentence and its </s>
    for (uint64_t next = starts_.size() * L; next < end && starts_.size() < blocks; next += L)
      starts_.push_back({j, next - g});
    g = end;
  }
  ROTOR_CHECK(starts_.size() == blocks, "LmBlocks: {} starts for {} blocks", starts_.size(),
              blocks);
}

int64_t LmBlocks::content_length(uint64_t sentence) const {
  auto s = corpus_->sentence(sentence);
  return static_cast<int64_t>(s.size()) - (!s.empty() && s.back() == eos_ ? 1 : 0);
}

void LmBlocks::block_into(int64_t i, std::vector<int32_t>& out) const {
  ROTOR_CHECK(i >= 0 && i < size(), "block {} of {}", i, size());
  out.clear();
  int64_t remaining = seq_len_ + 1;
  uint64_t s = starts_[static_cast<size_t>(i)].sentence;
  uint64_t off = starts_[static_cast<size_t>(i)].offset;
  for (; remaining > 0 && s < corpus_->size(); ++s, off = 0) {
    const int64_t L = content_length(s);
    if (L == 0) continue;
    auto toks = corpus_->sentence(s);
    const int64_t take = std::min<int64_t>(remaining, L - static_cast<int64_t>(off));
    out.insert(out.end(), toks.begin() + static_cast<int64_t>(off),
               toks.begin() + static_cast<int64_t>(off) + take);
    remaining -= take;
    if (remaining == 0 || eos_ < 0) continue;
    out.push_back(eos_);
    --remaining;
  }
}

std::vector<int32_t> LmBlocks::block(int64_t i) const {
  std::vector<int32_t> out;
  block_into(i, out);
  return out;
}

LmBatcher::LmBatcher(std::shared_ptr<const LmBlocks> blocks, LmBatcherOptions options)
    : blocks_(std::move(blocks)), opt_(options), plan_(blocks_ ? blocks_->size() : 0, options) {
  ROTOR_CHECK(blocks_, "LmBatcher needs blocks");
}

LmHostBatch LmBatcher::make_batch(const std::vector<int64_t>& ids) const {
  const int64_t B = static_cast<int64_t>(ids.size());
  ROTOR_CHECK(B > 0, "an empty LM batch");
  std::vector<std::vector<int32_t>> rows(ids.size());
  int64_t T = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    blocks_->block_into(ids[b], rows[b]);
    T = std::max<int64_t>(T, static_cast<int64_t>(rows[b].size()) - 1);
  }
  std::vector<int32_t> input(static_cast<size_t>(B * T), opt_.pad_id);
  std::vector<int32_t> target(static_cast<size_t>(B * T), opt_.pad_id);
  int64_t tokens = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    const auto& r = rows[b];
    const int64_t n = static_cast<int64_t>(r.size()) - 1;  // inputs with a target
    ROTOR_CHECK(n >= 1, "block {} has no target", ids[b]);
    std::copy(r.begin(), r.end() - 1, input.begin() + static_cast<int64_t>(b) * T);
    std::copy(r.begin() + 1, r.end(), target.begin() + static_cast<int64_t>(b) * T);
    tokens += n;
  }
  LmHostBatch batch;
  batch.input_ids = Tensor::from_ints(input, {B, T});
  batch.targets = Tensor::from_ints(target, {B, T});
  batch.tokens = tokens;
  return batch;
}

LmHostBatch LmBatcher::next() {
  return make_batch(*plan_.next().ids);
}

}  // namespace rotor::data
