// chrF (Popović, 2015) compatible with sacreBLEU 2.x's CHRF defaults: character
// n-grams of orders 1..6 over the segment with all whitespace removed, beta 2,
// statistics summed over the corpus, then precision and recall each averaged
// over the orders that have n-grams on both sides and combined into one
// F-beta score (not an average of per-order F-scores). word_order 2 gives chrF++.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rotor::eval {

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;  // 2 for chrF++
  int beta = 2;
  bool lowercase = false;
  bool whitespace = false;     // keep whitespace inside character n-grams
  bool eps_smoothing = false;  // average per-order F-scores (chrF.cpp/Moses style)
};

struct ChrfResult {
  double score = 0;  // 0..100
  // For each order (characters 1..char_order, then words 1..word_order):
  // hypothesis n-grams, reference n-grams, matches.
  std::vector<int64_t> stats;
};

// F-score (0..100) of summed statistics, as sacreBLEU's CHRF._compute_f_score.
double chrf_from_stats(const std::vector<int64_t>& stats, const ChrfOptions& opts);

// Statistics of one segment; with several references the one with the best
// segment F-score is kept (sacreBLEU's rule).
std::vector<int64_t> chrf_segment_stats(const std::string& hyp,
                                        const std::vector<std::string>& refs,
                                        const ChrfOptions& opts);

// refs[k][i]: the k-th reference of segment i (each refs[k] has hyps.size() lines).
ChrfResult corpus_chrf(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs,
                       const ChrfOptions& opts = {});

// "chrF2 = 57.35" ("chrF2++ = ..." with word n-grams).
std::string format_chrf(const ChrfResult& r, const ChrfOptions& opts, int width = 2);
std::string chrf_name(const ChrfOptions& opts);

// "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:rotor-0.1.0"
std::string chrf_signature(const ChrfOptions& opts, int nrefs);

}  // namespace rotor::eval
