// BLEU and chrF (src/eval/): every tokenizer on arbitrary bytes, then corpus
// BLEU and chrF of a hypothesis against a reference. The input:
//   byte 0      options: bits 0-2 the BLEU tokenizer (mod 5), bit 3
//               lowercase, bit 4 compound splitting, bits 5-6 the smoothing,
//               bit 7 effective order and German for moses; chrF takes word
//               n-grams, whitespace and eps smoothing from bits 0-2
//   the rest    lines: hypothesis, reference, hypothesis, reference, ...
// The scorers take any bytes, so here even a rotor::Error is a finding.
// Scores must be finite and within [0, 100]; UTF-8 decoding (invalid bytes
// as lone surrogates) must give the bytes back.
#include <cmath>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"
#include "eval/tokenizers.h"
#include "eval/unicode.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;
using namespace rotor::eval;

namespace {

void tokenize_every_way(std::string_view line) {
  for (BleuTokenizer t : {BleuTokenizer::k13a, BleuTokenizer::kIntl, BleuTokenizer::kChar,
                          BleuTokenizer::kNone, BleuTokenizer::kMoses})
    (void)compound_split(tokenize(line, t));
  (void)tokenize_moses(line, "de");
  (void)tokenize_moses(line, "fr");
  (void)unicode_lower(line);
  (void)split_whitespace(line);
  (void)collapse_whitespace(line);
  (void)rstrip_whitespace(line);
  fuzz::require(encode_utf8(decode_utf8(line)) == line, "UTF-8 decoding lost bytes");
}

bool is_score(double s) {
  return std::isfinite(s) && s >= 0 && s <= 100 + 1e-9;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text = fuzz::as_text(data + 1, size - 1);

  std::vector<std::string> hyps, refs;
  size_t begin = 0;
  for (size_t n = 0; begin <= text.size(); ++n) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    tokenize_every_way(line);
    (n % 2 ? refs : hyps).emplace_back(line);
    begin = end + 1;
  }
  if (refs.size() < hyps.size()) refs.emplace_back();

  BleuOptions bleu;
  constexpr BleuTokenizer kTokenizers[] = {BleuTokenizer::k13a, BleuTokenizer::kIntl,
                                           BleuTokenizer::kChar, BleuTokenizer::kNone,
                                           BleuTokenizer::kMoses};
  bleu.tokenize = kTokenizers[(flags & 7) % 5];
  bleu.lowercase = flags & 8;
  bleu.compound_split = flags & 16;
  constexpr BleuSmooth kSmooth[] = {BleuSmooth::kExp, BleuSmooth::kFloor, BleuSmooth::kAddK,
                                    BleuSmooth::kNone};
  bleu.smooth = kSmooth[(flags >> 5) & 3];
  bleu.effective_order = flags & 128;
  bleu.lang = flags & 128 ? "de" : "en";
  const BleuResult b = corpus_bleu(hyps, {refs}, bleu);
  if (!is_score(b.score)) fuzz::fail("BLEU out of [0, 100]: " + format_bleu(b));
  (void)bleu_signature(bleu, 1);

  ChrfOptions chrf;
  chrf.word_order = flags & 1 ? 2 : 0;
  chrf.whitespace = flags & 2;
  chrf.eps_smoothing = flags & 4;
  chrf.lowercase = flags & 8;
  const ChrfResult c = corpus_chrf(hyps, {refs}, chrf);
  if (!is_score(c.score)) fuzz::fail("chrF out of [0, 100]: " + format_chrf(c, chrf));
  return 0;
}
