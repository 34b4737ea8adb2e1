#include "tasks/translation/scores.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "decode/beam_search.h"
#include "eval/bleu.h"
#include "eval/chrf.h"

namespace rotor::tasks {

namespace {

// A sentence of the corpus as the model reads a source: with its </s>.
std::vector<int32_t> source_tokens(const data::MmapCorpus& src, size_t i) {
  const auto s = src.sentence(i);
  std::vector<int32_t> out(s.begin(), s.end());
  if (out.empty() || out.back() != data::kEosId) out.push_back(data::kEosId);
  return out;
}

// A target sentence as text (its </s>, when stored, decodes to nothing).
std::string target_text(const data::Tokenizer& tok, const data::MmapCorpus& tgt, size_t i) {
  return tok.decode(tgt.sentence(i));
}

}  // namespace

TranslationScores score_translations(models::EncoderDecoder& model,
                                     const data::Tokenizer& tokenizer, const data::MmapCorpus& src,
                                     const data::MmapCorpus& tgt, const TranslationScoreOptions& o,
                                     Device device) {
  const auto t0 = std::chrono::steady_clock::now();
  size_t n = std::min(src.size(), tgt.size());
  if (o.max_sentences > 0) n = std::min(n, o.max_sentences);
  // Sentences sorted by source length (stable), cut into batches whose
  // padded size fits max_tokens: little padding, and the order is kept for
  // the scores.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return src.length(a) < src.length(b); });
  decode::SearchOptions search;
  search.beam = o.decode.beam;
  search.lenpen = o.decode.lenpen;
  search.max_len_a = o.decode.max_len_a;
  search.max_len_b = o.decode.max_len_b;
  nn::Context ctx;
  ctx.training = false;
  ctx.device = device;

  std::vector<std::string> hyps(n), refs(n);
  size_t start = 0;
  while (start < n) {
    size_t end = start;
    int64_t longest = 0;
    while (end < n) {
      const int64_t len = src.length(order[end]) + 1;
      const int64_t rows = static_cast<int64_t>(end - start) + 1;
      if (end > start && (rows * std::max(longest, len) > o.max_tokens || rows > 256)) break;
      longest = std::max(longest, len);
      ++end;
    }
    const int64_t B = static_cast<int64_t>(end - start), S = longest;
    std::vector<int32_t> ids(static_cast<size_t>(B * S), data::kPadId);
    std::vector<int32_t> lengths(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      const std::vector<int32_t> s = source_tokens(src, order[start + static_cast<size_t>(b)]);
      std::copy(s.begin(), s.end(), ids.begin() + b * S);
      lengths[static_cast<size_t>(b)] = static_cast<int32_t>(s.size());
    }
    const Tensor batch = Tensor::from_ints(ids, {B, S}, device);
    const std::vector<decode::Hypothesis> out =
        decode::beam_search(model, batch, lengths, search, ctx);
    for (int64_t b = 0; b < B; ++b) {
      const size_t i = order[start + static_cast<size_t>(b)];
      hyps[i] = tokenizer.decode(out[static_cast<size_t>(b)].tokens);
      refs[i] = target_text(tokenizer, tgt, i);
    }
    start = end;
  }

  TranslationScores r;
  r.sentences = static_cast<int64_t>(n);
  if (n == 0) return r;
  if (o.bleu) r.bleu = eval::corpus_bleu(hyps, {refs}).score;
  if (o.chrf) r.chrf = eval::corpus_chrf(hyps, {refs}).score;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace rotor::tasks
