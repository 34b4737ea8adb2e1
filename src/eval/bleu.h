// Corpus BLEU compatible with sacreBLEU 2.x defaults (Post, 2018):
// 13a tokenization, case-sensitive, clipped 1..4-gram counts summed over the
// corpus, brevity penalty against the closest reference length (ties go to the
// shorter one), 'exp' smoothing, effective order off.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "eval/tokenizers.h"

namespace rotor::eval {

inline constexpr int kBleuMaxOrder = 4;

enum class BleuSmooth {
  kNone,   // a zero precision makes BLEU 0
  kFloor,  // a zero-match order gets smooth_value matches (default 0.1)
  kAddK,   // orders n > 1 get smooth_value (default 1) added to matches and totals
  kExp,    // the k-th zero-match order gets 100 / (2^k * total) (mteval-v13a)
};
BleuSmooth parse_bleu_smooth(const std::string& name);
const char* bleu_smooth_name(BleuSmooth s);

struct BleuOptions {
  BleuTokenizer tokenize = BleuTokenizer::k13a;
  std::string lang = "en";  // the language of BleuTokenizer::kMoses (its apostrophe rules)
  bool lowercase = false;
  // The tokenized, compound-split BLEU of Vaswani et al. and the papers that
  // follow them: after tokenizing hypothesis and references (`tokenize`:
  // moses for their protocol, 13a for an approximation of it), split
  // compounds (a-b -> a ##AT##-##AT## b, see compound_split) in both.
  bool compound_split = false;
  BleuSmooth smooth = BleuSmooth::kExp;
  double smooth_value = -1;  // < 0: the method's default
  bool effective_order = false;
};

// Sufficient statistics; they add over segments.
struct BleuStats {
  std::array<int64_t, kBleuMaxOrder> counts{};  // clipped n-gram matches
  std::array<int64_t, kBleuMaxOrder> totals{};  // hypothesis n-grams
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
};

struct BleuResult {
  double score = 0;                                // 0..100
  std::array<double, kBleuMaxOrder> precisions{};  // percent
  double bp = 0;
  double ratio = 0;  // hyp_len / ref_len
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
  std::array<int64_t, kBleuMaxOrder> counts{};
  std::array<int64_t, kBleuMaxOrder> totals{};
};

// The words BLEU counts for one segment: lowercase, strip trailing
// whitespace, tokenize, split compounds (when asked), split on whitespace.
std::vector<std::string> bleu_words(const std::string& segment, const BleuOptions& opts);

// Statistics of one segment against its references (already split in words).
BleuStats bleu_segment_stats(const std::vector<std::string>& hyp,
                             const std::vector<std::vector<std::string>>& refs);

// BLEU from statistics, as sacreBLEU's BLEU.compute_bleu.
BleuResult bleu_from_stats(const BleuStats& stats, const BleuOptions& opts);

// refs[k][i] is the k-th reference of segment i; every refs[k] has
// hyps.size() lines (checked).
BleuResult corpus_bleu(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs,
                       const BleuOptions& opts = {});

// "BLEU = 26.33 62.1/32.4/19.9/12.6 (BP = 1.000 ratio = 1.003 hyp_len = 61450 ref_len = 61287)"
std::string format_bleu(const BleuResult& r, int width = 2);

// sacreBLEU 2.x signature fields, e.g.
// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:rotor-0.1.0"; the
// tokenizer reads "moses-de" for the moses tokenizer and gains "+atat" with
// compound splitting ("tok:moses-de+atat").
std::string bleu_signature(const BleuOptions& opts, int nrefs);

}  // namespace rotor::eval
