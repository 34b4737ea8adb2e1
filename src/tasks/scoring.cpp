#include "tasks/scoring.h"

#include <algorithm>
#include <cmath>

#include "core/logging.h"
#include "data/ehr_mlm.h"
#include "tasks/data.h"

namespace rotor::tasks {

TaskSums to_sums(const models::LmSums& s, const models::LmBatch& b) {
  return {s.loss, s.loss, s.tokens, b.tokens, s.correct, s.has_correct};
}

TaskSums to_sums(const models::MlmSums& s, const models::MlmBatch& b) {
  return {s.loss, s.loss, s.tokens, b.tokens, s.correct, s.has_correct};
}

int32_t lm_end_of_text(const data::Tokenizer& tokenizer) {
  return tokenizer.is_bytes() ? -1 : tokenizer.eos_id();
}

int64_t lm_scored_bytes(const data::Tokenizer& tokenizer, const data::LmBlocks& blocks,
                        const std::function<int64_t()>& text_bytes) {
  return std::max<int64_t>(tokenizer.is_bytes() ? blocks.target_tokens() : text_bytes(), 1);
}

std::shared_ptr<const data::LmBlocks> lm_eval_blocks(std::shared_ptr<const data::MmapCorpus> corpus,
                                                     int64_t block_size,
                                                     const data::Tokenizer& tokenizer,
                                                     const std::string& name,
                                                     data::LmPacking packing,
                                                     data::TextDocuments documents) {
  return std::make_shared<const data::LmBlocks>(
      std::move(corpus), block_size, lm_end_of_text(tokenizer),
      /*keep_partial=*/true, name, packing, std::move(documents));
}

data::TextDocuments text_documents(const Config& c, const data::Tokenizer& tokenizer) {
  data::TextDocuments d;
  d.paragraphs = c.data.document_separator == DocumentSeparator::BlankLine;
  // A byte tokenizer keeps a line's own break: a blank line is whitespace
  // and that break. (SentencePiece encodes a blank line as nothing.)
  if (d.paragraphs && tokenizer.is_bytes())
    for (unsigned char b : {' ', '\t', '\r', '\n'}) d.blank_tokens.push_back(tokenizer.byte_id(b));
  return d;
}

data::LmPacking lm_packing(const Config& c) {
  return c.data.packing == Packing::Documents ? data::LmPacking::Documents
                                              : data::LmPacking::Stream;
}

std::string lm_scoring_how(int64_t block_size) {
  return fmt::format("non-overlapping blocks of {} tokens", block_size);
}

ValidationResult score_lm(models::DecoderLM& model, std::shared_ptr<const data::LmBlocks> blocks,
                          int64_t text_bytes, int64_t batch_size, const nn::Context& ctx) {
  ROTOR_CHECK(blocks != nullptr, "score_lm: no blocks");
  const int64_t block_size = blocks->seq_len();
  const bool documents = blocks->packing() == data::LmPacking::Documents;
  data::LmBatcherOptions bo;
  bo.batch_size = batch_size;
  bo.shuffle = false;
  bo.drop_last = false;
  data::LmBatcher batcher(std::move(blocks), bo);
  ValidationResult r;
  for (int64_t i = 0, n = batcher.batches_in_epoch(); i < n; ++i) {
    models::LmBatch b = to_model_batch(batcher.next(), ctx.device);
    r.sums.add(to_sums(model.forward_loss(b, ctx), b));
  }
  // Bits per byte: the total negative log-likelihood in bits over the bytes
  // of the text it scores.
  const double bytes = static_cast<double>(std::max<int64_t>(text_bytes, 1));
  r.measures.emplace_back("bpb", r.sums.nll / (std::log(2.0) * bytes));
  r.how = documents ? fmt::format("packed documents (lines) in blocks of {} tokens", block_size)
                    : lm_scoring_how(block_size);
  return r;
}

data::MaskingOptions mlm_masking(const Config& c, const data::Tokenizer& tokenizer) {
  data::MaskingOptions m{c.data.mask_prob,         c.data.mask_token_prob,
                         c.data.random_token_prob, static_cast<uint64_t>(c.seed),
                         tokenizer.vocab_size(),   data::MlmSpecialIds::from_tokenizer(tokenizer)};
  m.random_special = c.data.random_token_special;
  return m;
}

data::MlmPacking mlm_packing(const Config& c) {
  return c.data.packing == Packing::Documents ? data::MlmPacking::Documents
                                              : data::MlmPacking::Stream;
}

void log_mlm_packing(const data::PackedBlocks& blocks, const std::string& name) {
  if (blocks.packing() != data::MlmPacking::Documents) return;
  log().info(
      "{}: {} documents ({}), {} split (longer than a block), {} pieces in {} blocks of up to {} "
      "tokens ({:.2f} a block)",
      name, blocks.documents(), blocks.paragraphs() ? "paragraphs" : "lines",
      blocks.split_documents(), blocks.pieces(), blocks.size(), blocks.seq_len(),
      static_cast<double>(blocks.pieces()) /
          static_cast<double>(std::max<int64_t>(blocks.size(), 1)));
}

ValidationResult score_mlm(models::BertForMaskedLM& model,
                           std::shared_ptr<const data::PackedBlocks> blocks,
                           const data::MaskingOptions& masking, int64_t batch_size,
                           const nn::Context& ctx) {
  ROTOR_CHECK(blocks != nullptr, "score_mlm: no blocks");
  data::MlmBatcherOptions bo;
  bo.batch_size = batch_size;
  bo.shuffle = false;
  bo.fixed_masking = true;  // the same masks in every evaluation of every run
  bo.drop_last = false;
  data::MlmBatcher batcher(std::move(blocks), data::Masker(masking), bo);
  ValidationResult r;
  for (int64_t i = 0, n = batcher.batches_in_epoch(); i < n; ++i) {
    models::MlmBatch b = to_model_batch(batcher.next(), ctx.device);
    r.sums.add(to_sums(model.forward_loss(b, ctx), b));
  }
  return r;
}

data::MaskingOptions ehr_mlm_masking(const Config& c, int64_t vocab_size) {
  data::MaskingOptions m{c.data.mask_prob,
                         c.data.mask_token_prob,
                         c.data.random_token_prob,
                         static_cast<uint64_t>(c.seed),
                         static_cast<int32_t>(vocab_size),
                         data::MlmSpecialIds::standard()};
  m.random_special = c.data.random_token_special;
  return m;
}

ValidationResult score_ehr_mlm(models::BertForMaskedLM& model,
                               std::shared_ptr<const data::EhrSplit> split, int64_t seq_len,
                               const data::MaskingOptions& masking, int64_t batch_size,
                               const nn::Context& ctx, bool pack) {
  ROTOR_CHECK(split != nullptr, "score_ehr_mlm: no split");
  data::MlmBatcherOptions bo;
  bo.batch_size = batch_size;
  bo.shuffle = false;
  bo.fixed_masking = true;  // the same masks in every evaluation of every run
  bo.drop_last = false;
  data::EhrMlmBatcher batcher(std::move(split), seq_len, data::Masker(masking), bo, pack);
  ValidationResult r;
  for (int64_t i = 0, n = batcher.batches_in_epoch(); i < n; ++i) {
    models::MlmBatch b = to_model_batch(batcher.next(), ctx.device);
    r.sums.add(to_sums(model.forward_loss(b, ctx), b));
  }
  return r;
}

}  // namespace rotor::tasks
