#include "data/lm.h"

#include <algorithm>

#include "core/error.h"
#include "data/row_packer.h"

namespace rotor::data {

LmBlocks::LmBlocks(std::shared_ptr<const MmapCorpus> corpus, int64_t seq_len, int32_t eos_id,
                   bool keep_partial, const std::string& name, LmPacking packing,
                   TextDocuments documents)
    : corpus_(std::move(corpus)),
      seq_len_(seq_len),
      eos_(eos_id),
      packing_(packing),
      documents_kind_(std::move(documents)) {
  ROTOR_CHECK(corpus_, "LmBlocks needs a corpus");
  if (seq_len < 1) ROTOR_FAIL("data.seq_len: {} tokens; a block needs at least 1", seq_len);
  if (packing == LmPacking::Documents) {
    pack_documents(name);
    return;
  }
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

void LmBlocks::pack_documents(const std::string& name) {
  const int64_t sep = eos_ >= 0 ? 1 : 0, L = seq_len_;
  const uint64_t n = corpus_->size();
  const bool paragraphs = documents_kind_.paragraphs;
  // A sentence's tokens in the document stream: its content and its </s>.
  const auto length = [&](uint64_t s) { return content_length(s) + sep; };
  RowPacker blocks(L);  // in pairs
  for (uint64_t j = 0; j < n;) {
    if (content_length(j) == 0 || (paragraphs && blank(j))) {
      ++j;
      continue;
    }
    // The document: sentence j alone, or its paragraph j .. k - 1.
    uint64_t k = j + 1;
    int64_t m = length(j);  // the document's tokens
    if (paragraphs)
      for (; k < n && content_length(k) > 0 && !blank(k); ++k) m += length(k);
    stream_tokens_ += m;
    if (m >= 2) {  // else no (input, next token) pair
      ++documents_;
      if (m - 1 > L) ++split_;
      uint64_t s = j;  // the sentence of document offset `off`, at `in` in it
      int64_t in = 0;
      for (int64_t off = 0; off < m - 1; off += L, in += L) {
        for (; in >= length(s); ++s) in -= length(s);
        const int64_t pairs = std::min(L, m - 1 - off);
        ROTOR_CHECK(in < (int64_t{1} << 32), "a sentence of {} tokens", in);
        blocks.add(pairs);
        pieces_.push_back({s, static_cast<uint32_t>(in), static_cast<uint32_t>(pairs + 1)});
        target_tokens_ += pairs;
      }
    }
    j = k;
  }
  block_pieces_ = std::move(blocks).bounds();
  if (pieces_.empty())
    ROTOR_FAIL("{} has no document ({}) of 2 or more tokens{} to pack (data.packing documents)",
               name.empty() ? "language-model corpus " + corpus_->prefix() : name,
               paragraphs ? "paragraph" : "line", sep ? " with its end-of-text token" : "");
}

void LmBlocks::pairs_into(int64_t i, std::vector<int32_t>& inputs, std::vector<int32_t>& targets,
                          std::vector<int32_t>& positions, std::vector<int32_t>& segments) const {
  ROTOR_CHECK(i >= 0 && i < size(), "block {} of {}", i, size());
  inputs.clear();
  targets.clear();
  positions.clear();
  segments.clear();
  if (packing_ == LmPacking::Stream) {
    std::vector<int32_t> toks;
    block_into(i, toks);
    if (toks.size() < 2) return;
    inputs.assign(toks.begin(), toks.end() - 1);  // positions and segments stay empty
    targets.assign(toks.begin() + 1, toks.end());
    return;
  }
  const uint64_t first = block_pieces_[static_cast<size_t>(i)],
                 last = block_pieces_[static_cast<size_t>(i) + 1];
  std::vector<int32_t> piece_tokens;
  for (uint64_t p = first; p < last; ++p) {
    const Piece& piece = pieces_[p];
    // The piece's tokens, from its first on through its document's sentences.
    piece_tokens.clear();
    const int64_t sep = eos_ >= 0 ? 1 : 0;
    for (uint64_t s = piece.sentence, in = piece.offset; piece_tokens.size() < piece.tokens;
         ++s, in = 0) {
      ROTOR_CHECK(s < corpus_->size(), "LmBlocks: piece {} runs past the corpus", p);
      auto toks = corpus_->sentence(s);
      const int64_t content = content_length(s);
      for (int64_t k = static_cast<int64_t>(in);
           k < content + sep && piece_tokens.size() < piece.tokens; ++k)
        piece_tokens.push_back(k < content ? toks[static_cast<size_t>(k)] : eos_);
    }
    for (int64_t t = 0; t + 1 < piece.tokens; ++t) {
      inputs.push_back(piece_tokens[static_cast<size_t>(t)]);
      targets.push_back(piece_tokens[static_cast<size_t>(t) + 1]);
      positions.push_back(static_cast<int32_t>(t));
      segments.push_back(static_cast<int32_t>(p - first));
    }
  }
}

bool LmBlocks::blank(uint64_t sentence) const {
  return documents_kind_.blank(
      corpus_->sentence(sentence).first(static_cast<size_t>(content_length(sentence))));
}

int64_t LmBlocks::content_length(uint64_t sentence) const {
  auto s = corpus_->sentence(sentence);
  return static_cast<int64_t>(s.size()) - (!s.empty() && s.back() == eos_ ? 1 : 0);
}

void LmBlocks::block_into(int64_t i, std::vector<int32_t>& out) const {
  ROTOR_CHECK(packing_ == LmPacking::Stream,
              "LmBlocks::block_into: packed documents are read by pairs_into");
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
  struct Row {
    std::vector<int32_t> inputs, targets, positions, segments;
  };
  std::vector<Row> rows(ids.size());
  int64_t T = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    Row& r = rows[b];
    blocks_->pairs_into(ids[b], r.inputs, r.targets, r.positions, r.segments);
    ROTOR_CHECK(!r.inputs.empty(), "block {} has no target", ids[b]);
    T = std::max<int64_t>(T, static_cast<int64_t>(r.inputs.size()));
  }
  const bool documents = blocks_->packing() == LmPacking::Documents;
  std::vector<int32_t> input(static_cast<size_t>(B * T), opt_.pad_id);
  std::vector<int32_t> target(static_cast<size_t>(B * T), opt_.pad_id);
  LmHostBatch batch;
  std::vector<int32_t> positions;
  if (documents) {
    batch.segments.assign(static_cast<size_t>(B * T), -1);
    positions.assign(static_cast<size_t>(B * T), 0);
  }
  int64_t tokens = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    const Row& r = rows[b];
    const int64_t at = static_cast<int64_t>(b) * T;
    std::copy(r.inputs.begin(), r.inputs.end(), input.begin() + at);
    std::copy(r.targets.begin(), r.targets.end(), target.begin() + at);
    if (documents) {
      std::copy(r.segments.begin(), r.segments.end(), batch.segments.begin() + at);
      std::copy(r.positions.begin(), r.positions.end(), positions.begin() + at);
    }
    tokens += static_cast<int64_t>(r.inputs.size());
  }
  batch.input_ids = Tensor::from_ints(input, {B, T});
  batch.targets = Tensor::from_ints(target, {B, T});
  batch.tokens = tokens;
  if (documents) batch.positions = Tensor::from_ints(positions, {B, T});
  return batch;
}

LmHostBatch LmBatcher::next() {
  return make_batch(*plan_.next().ids);
}

}  // namespace rotor::data
