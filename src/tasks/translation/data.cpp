#include "tasks/translation/data.h"

#include <span>

#include "core/error.h"
#include "nn/position.h"
#include "tasks/data.h"

namespace rotor::tasks {

namespace {

ParallelCorpus open_pair(const std::string& prefix, const data::Tokenizer& tokenizer) {
  ParallelCorpus p;
  p.src = open_corpus(prefix + ".src", tokenizer);
  p.tgt = open_corpus(prefix + ".tgt", tokenizer);
  return p;
}

// Every sentence of `corpus` (data.<key>) fits the model's position table
// with its eos or bos.
void check_fits(const Config& c, const std::string& key, const data::MmapCorpus& corpus) {
  if (!nn::has_position_table(c.model.position)) return;
  const int64_t most = c.model.max_positions - 1;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::span<const int32_t> s = corpus.sentence(i);
    // A stored </s> is the position the batcher would add.
    const int64_t n = static_cast<int64_t>(s.size()) - (!s.empty() && s.back() == data::kEosId);
    if (n > most)
      ROTOR_FAIL(
          "data.{}: {}: sentence {} has {} tokens, more than model.max_positions - 1 = {} ({} "
          "positions); prepare it with --max-len {}",
          key, corpus.prefix(), i + 1, n, most, to_string(c.model.position), most);
  }
}

ParallelCorpus open_checked_pair(const Config& c, const std::string& key, const std::string& spm,
                                 const data::Tokenizer& tokenizer) {
  ParallelCorpus p = open_pair(prepared_prefix(c, key, spm), tokenizer);
  check_fits(c, key, *p.src);
  check_fits(c, key, *p.tgt);
  return p;
}

}  // namespace

TranslationData load_translation_data(const Config& c, bool need_train) {
  TranslationData d;
  d.spm_path = ensure_tokenizer(c);
  d.tokenizer = data::Tokenizer::load(d.spm_path);
  if (need_train) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    d.train = open_checked_pair(c, "train", d.spm_path, d.tokenizer);
  }
  if (!c.data.valid.empty()) d.valid = open_checked_pair(c, "valid", d.spm_path, d.tokenizer);
  if (!c.data.test.empty()) d.test = open_checked_pair(c, "test", d.spm_path, d.tokenizer);
  return d;
}

models::TranslationBatch to_model_batch(const data::Batch& b, Device device, bool variable_length) {
  models::TranslationBatch m;
  if (variable_length) {
    // Row r's first lengths[r] tokens of each [B, len] tensor, end to end.
    const auto lay = [&](const Tensor& t, const std::vector<int32_t>& lengths,
                         std::vector<int32_t>* documents) {
      const std::vector<int32_t> ids = t.to_ints();
      const int64_t width = t.size(1);
      std::vector<int32_t> out;
      for (int64_t r = 0; r < b.size(); ++r) {
        const int32_t n = lengths[static_cast<size_t>(r)];
        ROTOR_CHECK(n > 0 && n <= width, "translation batch: row {} has {} tokens of {}", r, n,
                    width);
        out.insert(out.end(), ids.begin() + r * width, ids.begin() + r * width + n);
        if (documents) documents->insert(documents->end(), static_cast<size_t>(n), int32_t(r));
      }
      return Tensor::from_ints(out, {1, static_cast<int64_t>(out.size())}, device);
    };
    m.src = lay(b.src, b.src_lengths, &m.src_documents);
    m.tgt_in = lay(b.tgt_in, b.tgt_lengths, &m.tgt_documents);
    m.tgt_out = lay(b.tgt_out, b.tgt_lengths, nullptr);
    m.tgt_tokens = b.tgt_tokens;
    m.src_tokens = b.src_tokens;
    return m;
  }
  m.src = b.src.to(device);
  m.src_lengths = Tensor::from_ints(b.src_lengths, {b.size()}, device);
  m.tgt_in = b.tgt_in.to(device);
  m.tgt_out = b.tgt_out.to(device);
  m.tgt_tokens = b.tgt_tokens;
  m.src_tokens = b.src_tokens;
  return m;
}

}  // namespace rotor::tasks
