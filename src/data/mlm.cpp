#include "data/mlm.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "data/row_packer.h"

namespace rotor::data {

// ---- special ids -------------------------------------------------------------

namespace {
std::vector<int32_t> control_ids(int32_t cls, int32_t sep, int32_t mask) {
  return {kPadId, kUnkId, kBosId, kEosId, cls, sep, mask};
}
}  // namespace

MlmSpecialIds MlmSpecialIds::from_tokenizer(const Tokenizer& tok) {
  MlmSpecialIds s;
  auto need = [&](const char* piece) {
    const int32_t id = tok.piece_to_id(piece);
    if (id == tok.unk_id() || id < 0)
      ROTOR_FAIL(
          "tokenizer {} has no {} symbol: masked-LM needs the user-defined symbols "
          "[MASK],[CLS],[SEP] (train it with rotor spm-train --user-defined-symbols "
          "\"[MASK],[CLS],[SEP]\")",
          tok.path(), piece);
    return id;
  };
  s.mask = need("[MASK]");
  s.cls = need("[CLS]");
  s.sep = need("[SEP]");
  s.never_mask = control_ids(s.cls, s.sep, s.mask);
  return s;
}

MlmSpecialIds MlmSpecialIds::standard() {
  MlmSpecialIds s;
  s.mask = 4;
  s.cls = 5;
  s.sep = 6;
  s.never_mask = control_ids(s.cls, s.sep, s.mask);
  return s;
}

// ---- packing -----------------------------------------------------------------

PackedBlocks::PackedBlocks(std::shared_ptr<const MmapCorpus> corpus, int64_t seq_len,
                           int32_t cls_id, int32_t sep_id, MlmPacking packing,
                           const std::string& name, TextDocuments documents)
    : corpus_(std::move(corpus)),
      seq_len_(seq_len),
      cls_(cls_id),
      sep_(sep_id),
      packing_(packing),
      documents_kind_(std::move(documents)) {
  ROTOR_CHECK(corpus_, "PackedBlocks needs a corpus");
  if (packing == MlmPacking::Documents) {
    pack_documents(name);
    return;
  }
  if (seq_len < 2) ROTOR_FAIL("data.seq_len: {} is too short for [CLS] + tokens", seq_len);
  const uint64_t chunk = static_cast<uint64_t>(seq_len - 1);
  uint64_t g = 0;  // stream position of the current sentence's first token
  for (size_t j = 0; j < corpus_->size(); ++j) {
    const int64_t L = content_length(j);
    if (L == 0) continue;
    const uint64_t end = g + static_cast<uint64_t>(L) + 1;  // the sentence and its [SEP]
    for (uint64_t next = starts_.size() * chunk; next < end; next += chunk)
      starts_.push_back({j, next - g});
    g = end;
  }
  stream_tokens_ = static_cast<int64_t>(g);
  if (starts_.empty())
    ROTOR_FAIL("masked-LM corpus {} has no tokens ({} sentences)", corpus_->prefix(),
               corpus_->size());
}

void PackedBlocks::pack_documents(const std::string& name) {
  if (seq_len_ < 3)
    ROTOR_FAIL("data.seq_len: {} is too short for [CLS] + tokens + [SEP] (data.packing documents)",
               seq_len_);
  const int64_t room = seq_len_ - 2;  // content tokens per piece
  const uint64_t count = corpus_->size();
  const bool paragraphs = documents_kind_.paragraphs;
  const auto blank = [&](uint64_t s) {
    const int64_t L = content_length(s);
    return L == 0 || (paragraphs &&
                      documents_kind_.blank(corpus_->sentence(s).first(static_cast<size_t>(L))));
  };
  RowPacker blocks(seq_len_);
  for (uint64_t j = 0; j < count;) {
    if (blank(j)) {
      ++j;
      continue;
    }
    // The document: sentence j, or its paragraph j .. k - 1 joined by [SEP]s.
    uint64_t k = j + 1;
    int64_t L = content_length(j);
    if (paragraphs)
      for (; k < count && !blank(k); ++k) L += 1 + content_length(k);
    ++documents_;
    if (L > room) ++split_;
    uint64_t s = j;  // the sentence of document offset `off`, at `in` in it
    int64_t in = 0;
    for (int64_t off = 0; off < L; off += room, in += room) {
      for (; in >= content_length(s) + 1; ++s) in -= content_length(s) + 1;
      const int64_t n = std::min(room, L - off);
      blocks.add(n + 2);  // with its [CLS] and [SEP]
      pieces_.push_back({s, static_cast<uint32_t>(in), static_cast<uint32_t>(n)});
      stream_tokens_ += n + 2;
    }
    j = k;
  }
  block_pieces_ = std::move(blocks).bounds();
  if (pieces_.empty())
    ROTOR_FAIL("{} has no tokens ({} sentences) to pack (data.packing documents)",
               name.empty() ? "masked-LM corpus " + corpus_->prefix() : name, corpus_->size());
}

std::vector<PackedBlocks::PieceSpan> PackedBlocks::block_pieces(int64_t i) const {
  ROTOR_CHECK(packing_ == MlmPacking::Documents, "PackedBlocks: stream blocks have no pieces");
  ROTOR_CHECK(i >= 0 && i < size(), "block {} of {}", i, size());
  std::vector<PieceSpan> out;
  for (uint64_t p = block_pieces_[static_cast<size_t>(i)];
       p < block_pieces_[static_cast<size_t>(i) + 1]; ++p)
    out.push_back({p, static_cast<int64_t>(pieces_[p].tokens) + 2});
  return out;
}

int64_t PackedBlocks::content_length(uint64_t sentence) const {
  auto s = corpus_->sentence(sentence);
  return static_cast<int64_t>(s.size()) - (!s.empty() && s.back() == kEosId ? 1 : 0);
}

void PackedBlocks::block_into(int64_t i, std::vector<int32_t>& out) const {
  ROTOR_CHECK(i >= 0 && i < size(), "block {} of {}", i, size());
  out.clear();
  if (packing_ == MlmPacking::Documents) {
    for (uint64_t p = block_pieces_[static_cast<size_t>(i)];
         p < block_pieces_[static_cast<size_t>(i) + 1]; ++p) {
      const Piece& piece = pieces_[p];
      out.push_back(cls_);
      const size_t end = out.size() + piece.tokens;
      // Content on across the sentences, a [SEP] after each (a paragraph's).
      for (uint64_t s = piece.sentence, in = piece.offset; out.size() < end; ++s, in = 0) {
        ROTOR_CHECK(s < corpus_->size(), "PackedBlocks: piece {} runs past the corpus", p);
        auto toks = corpus_->sentence(s);
        const uint64_t L = static_cast<uint64_t>(content_length(s));
        for (uint64_t k = in; k <= L && out.size() < end; ++k)
          out.push_back(k < L ? toks[static_cast<size_t>(k)] : sep_);
      }
      out.push_back(sep_);
    }
    return;
  }
  out.push_back(cls_);
  int64_t remaining = seq_len_ - 1;
  uint64_t s = starts_[static_cast<size_t>(i)].sentence;
  uint64_t off = starts_[static_cast<size_t>(i)].offset;
  while (remaining > 0 && s < corpus_->size()) {
    const int64_t L = content_length(s);
    if (L > 0) {
      auto toks = corpus_->sentence(s);
      const int64_t take = std::min<int64_t>(remaining, L - static_cast<int64_t>(off));
      out.insert(out.end(), toks.begin() + static_cast<int64_t>(off),
                 toks.begin() + static_cast<int64_t>(off) + take);
      remaining -= take;
      off += static_cast<uint64_t>(take);
      if (static_cast<int64_t>(off) < L) break;  // the block is full
      if (remaining == 0) break;                 // full before this sentence's [SEP]
      out.push_back(sep_);
      --remaining;
    }
    ++s;
    off = 0;
  }
}

std::vector<int32_t> PackedBlocks::block(int64_t i) const {
  std::vector<int32_t> out;
  block_into(i, out);
  return out;
}

// ---- masking -----------------------------------------------------------------

Masker::Masker(MaskingOptions options) : opt_(std::move(options)), vocab_(opt_.vocab_size) {
  auto unit = [](double p) { return p >= 0.0 && p <= 1.0; };
  if (!unit(opt_.mask_prob) || !unit(opt_.mask_token_prob) || !unit(opt_.random_token_prob) ||
      opt_.mask_token_prob + opt_.random_token_prob > 1.0 + 1e-12)
    ROTOR_FAIL(
        "masking: probabilities mask_prob {} mask_token_prob {} random_token_prob {} are "
        "not valid",
        opt_.mask_prob, opt_.mask_token_prob, opt_.random_token_prob);
  if (vocab_ <= 0) ROTOR_FAIL("masking: vocabulary size {} must be positive", vocab_);
  const MlmSpecialIds& s = opt_.special;
  if (s.mask < 0 || s.mask >= vocab_ || s.cls < 0 || s.cls >= vocab_ || s.sep < 0 ||
      s.sep >= vocab_)
    ROTOR_FAIL("masking: special ids [MASK] {} [CLS] {} [SEP] {} must lie in [0, {})", s.mask,
               s.cls, s.sep, vocab_);
  never_.assign(static_cast<size_t>(vocab_), 0);
  for (int32_t id : s.never_mask)
    if (id >= 0 && id < vocab_) never_[static_cast<size_t>(id)] = 1;
  for (int32_t id = 0; id < vocab_; ++id)
    if (opt_.random_special || !never_[static_cast<size_t>(id)]) replacements.push_back(id);
  if (replacements.empty()) ROTOR_FAIL("masking: every id of the vocabulary is special");
}

void Masker::mask(std::span<int32_t> ids, uint64_t round, uint64_t block, int64_t seq_len,
                  std::vector<int32_t>& positions, std::vector<int32_t>& targets) const {
  ROTOR_CHECK(static_cast<int64_t>(ids.size()) <= seq_len, "block of {} tokens > seq_len {}",
              ids.size(), seq_len);
  const uint64_t stream = rng_stream(round, 0, RngPurpose::Masking, 0);
  const uint64_t seed = opt_.seed;
  const float p_select = static_cast<float>(opt_.mask_prob);
  const float p_mask = static_cast<float>(opt_.mask_token_prob);
  const float p_random = static_cast<float>(opt_.mask_token_prob + opt_.random_token_prob);
  const uint64_t n_repl = replacements.size();
  for (size_t t = 0; t < ids.size(); ++t) {
    const int32_t id = ids[t];
    if (!maskable(id)) continue;
    const uint64_t base = 4 * (block * static_cast<uint64_t>(seq_len) + t);
    if (!(philox_uniform(seed, stream, base) < p_select)) continue;
    positions.push_back(static_cast<int32_t>(t));
    targets.push_back(id);
    const float u = philox_uniform(seed, stream, base + 1);
    if (u < p_mask) {
      ids[t] = opt_.special.mask;
    } else if (u < p_random) {
      const uint64_t r = philox_u32(seed, stream, base + 2);
      ids[t] = replacements[static_cast<size_t>((r * n_repl) >> 32)];
    }
  }
}

// ---- batching ----------------------------------------------------------------

MlmBatcher::MlmBatcher(std::shared_ptr<const PackedBlocks> blocks, const Masker& masker,
                       MlmBatcherOptions options)
    : blocks_(std::move(blocks)),
      masker_(masker),
      opt_(options),
      plan_(blocks_ ? static_cast<int64_t>(blocks_->size()) : 0, options) {
  ROTOR_CHECK(blocks_, "MlmBatcher needs blocks");
}

MlmHostBatch MlmBatcher::make_batch(const std::vector<int64_t>& ids, uint64_t round) const {
  const int64_t B = static_cast<int64_t>(ids.size());
  ROTOR_CHECK(B > 0, "an empty MLM batch");
  std::vector<std::vector<int32_t>> rows(ids.size());
  int64_t T = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    blocks_->block_into(ids[b], rows[b]);
    T = std::max<int64_t>(T, static_cast<int64_t>(rows[b].size()));
  }
  const bool documents = blocks_->packing() == MlmPacking::Documents;
  std::vector<int32_t> input(static_cast<size_t>(B * T), masker_.options().special.pad);
  std::vector<int32_t> lengths(ids.size()), positions, targets, pos_row;
  std::vector<int32_t> doc_index;  // documents: each token's piece in its row, -1 for padding
  if (documents) doc_index.assign(static_cast<size_t>(B * T), -1);
  for (size_t b = 0; b < ids.size(); ++b) {
    const int64_t row = static_cast<int64_t>(b) * T;
    if (documents) {  // each piece masked on its own, keyed by its global index
      int64_t at = 0, k = 0;
      for (const PackedBlocks::PieceSpan& p : blocks_->block_pieces(ids[b])) {
        pos_row.clear();
        masker_.mask(std::span<int32_t>(rows[b]).subspan(static_cast<size_t>(at),
                                                         static_cast<size_t>(p.length)),
                     round, p.id, blocks_->seq_len(), pos_row, targets);
        for (int32_t t : pos_row) positions.push_back(static_cast<int32_t>(row + at + t));
        for (int64_t t = 0; t < p.length; ++t)
          doc_index[static_cast<size_t>(row + at + t)] = static_cast<int32_t>(k);
        at += p.length;
        ++k;
      }
    } else {
      pos_row.clear();
      masker_.mask(rows[b], round, static_cast<uint64_t>(ids[b]), blocks_->seq_len(), pos_row,
                   targets);
      for (int32_t t : pos_row) positions.push_back(static_cast<int32_t>(row + t));
    }
    std::copy(rows[b].begin(), rows[b].end(), input.begin() + row);
    lengths[b] = static_cast<int32_t>(rows[b].size());
  }
  MlmHostBatch batch = mlm_host_batch(input, lengths, positions, targets, B, T);
  batch.documents = std::move(doc_index);
  return batch;
}

MlmHostBatch mlm_host_batch(const std::vector<int32_t>& input, const std::vector<int32_t>& lengths,
                            const std::vector<int32_t>& positions,
                            const std::vector<int32_t>& targets, int64_t B, int64_t T) {
  MlmHostBatch batch;
  const int64_t M = static_cast<int64_t>(positions.size());
  batch.input_ids = Tensor::from_ints(input, {B, T});
  batch.lengths = Tensor::from_ints(lengths, {B});
  batch.masked_positions = Tensor::from_ints(positions, {M});
  batch.masked_targets = Tensor::from_ints(targets, {M});
  for (int32_t n : lengths) batch.tokens += n;
  batch.masked_tokens = M;
  return batch;
}

MlmHostBatch MlmBatcher::next() {
  const BatchPlan::Next n = plan_.next();
  return make_batch(*n.ids, opt_.fixed_masking ? kFixedMaskingRound : n.epoch);
}

}  // namespace rotor::data
