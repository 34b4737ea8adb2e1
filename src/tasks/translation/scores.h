// Validation BLEU and chrF during training (train.valid_metrics), as fairseq's
// --eval-bleu and Marian's --valid-metrics: the source sentences of a
// binarized parallel corpus are decoded with the configured beam search, in
// batches on the model's device, the hypotheses and the references are
// detokenized with the SentencePiece model, and rotor's sacreBLEU-compatible
// scorers (13a BLEU, chrF2) score them. The references are the binarized
// target sentences decoded back to text, which is the raw text up to
// SentencePiece's normalization (NFKC): for the paper's numbers, score the
// raw references with scripts/eval/ (docs/reproduce.md).
#pragma once

#include <cstdint>
#include <optional>

#include "config/config.h"
#include "data/corpus.h"
#include "data/sentencepiece.h"
#include "models/transformer.h"

namespace rotor::tasks {

struct TranslationScoreOptions {
  bool bleu = true, chrf = false;
  size_t max_sentences = 0;   // the first N sentences (0: all)
  int64_t max_tokens = 4096;  // source tokens per decoding batch, padding counted
  DecodeConfig decode;
};

struct TranslationScores {
  std::optional<double> bleu, chrf;
  int64_t sentences = 0;
  double seconds = 0;  // decoding and scoring
};

TranslationScores score_translations(models::EncoderDecoder& model,
                                     const data::Tokenizer& tokenizer, const data::MmapCorpus& src,
                                     const data::MmapCorpus& tgt,
                                     const TranslationScoreOptions& options, Device device);

}  // namespace rotor::tasks
