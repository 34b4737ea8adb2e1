// BLEU and chrF per bucket of source length: how a translator's quality
// changes with the length of what it translates (e.g. past the lengths it
// was trained on). A segment's bucket is chosen by its source line's length
// in words (Python's str.split()) or characters (Unicode code points after
// stripping trailing whitespace); each bucket's scores are corpus scores of
// its segments' summed statistics, so the "all" row is corpus BLEU and chrF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "eval/chrf.h"

namespace rotor::eval {

enum class LengthUnit { kWords, kChars };
LengthUnit parse_length_unit(const std::string& name);  // "words" | "chars"
const char* length_unit_name(LengthUnit unit);

// "0,10,20,40": strictly increasing non-negative integers, the lower edges
// of the buckets [0,10), [10,20), [20,40), [40,inf). A first edge above 0
// adds the bucket [0, first): "10,20" is [0,10), [10,20), [20,inf).
// Anything else is a rotor::Error quoting the text.
std::vector<int64_t> parse_length_edges(const std::string& text);
inline constexpr const char* kDefaultLengthEdges = "0,10,20,30,40,50,60";

int64_t source_length(const std::string& line, LengthUnit unit);

struct LengthBucket {
  int64_t lo = 0;
  int64_t hi = -1;  // exclusive; -1: no upper bound
  int64_t lines = 0;
  int64_t source_length = 0;  // summed over the bucket's lines
  BleuResult bleu;            // both zero when lines == 0
  ChrfResult chrf;
};

// "0-9", "7" (a bucket of one length), "40+": inclusive bounds.
std::string bucket_name(const LengthBucket& b);

struct LengthScores {
  std::vector<LengthBucket> buckets;  // one per edge, empty ones included
  LengthBucket all;                   // every segment: corpus BLEU and chrF
};

// sources[i] is the source of hyps[i]; refs[k][i] its k-th reference. Every
// list must have hyps.size() lines (a rotor::Error otherwise).
LengthScores score_by_length(const std::vector<std::string>& sources,
                             const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& refs,
                             const std::vector<int64_t>& edges, LengthUnit unit,
                             const BleuOptions& bleu = {}, const ChrfOptions& chrf = {});

}  // namespace rotor::eval
