#include "eval/length_buckets.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "core/error.h"
#include "eval/unicode.h"

namespace rotor::eval {

LengthUnit parse_length_unit(const std::string& name) {
  if (name == "words") return LengthUnit::kWords;
  if (name == "chars") return LengthUnit::kChars;
  ROTOR_FAIL("unknown source length unit '{}' (choose words or chars)", name);
}

const char* length_unit_name(LengthUnit unit) {
  return unit == LengthUnit::kWords ? "words" : "chars";
}

std::vector<int64_t> parse_length_edges(const std::string& text) {
  constexpr int64_t kMaxEdge = 1'000'000'000;
  std::vector<int64_t> edges;
  size_t i = 0;
  while (i <= text.size()) {
    const size_t comma = std::min(text.find(',', i), text.size());
    int64_t v = 0;
    const auto r = std::from_chars(text.data() + i, text.data() + comma, v);
    if (r.ec != std::errc() || r.ptr != text.data() + comma || v < 0 || v > kMaxEdge)
      ROTOR_FAIL(
          "length buckets must be integers from 0 to {} separated by commas (0,10,20,40), got "
          "\"{}\"",
          kMaxEdge, text);
    if (!edges.empty() && v <= edges.back())
      ROTOR_FAIL("length buckets must increase, got {} after {} in \"{}\"", v, edges.back(), text);
    edges.push_back(v);
    i = comma + 1;
  }
  if (edges.front() > 0) edges.insert(edges.begin(), 0);
  return edges;
}

int64_t source_length(const std::string& line, LengthUnit unit) {
  if (unit == LengthUnit::kWords) return static_cast<int64_t>(split_whitespace(line).size());
  return static_cast<int64_t>(decode_utf8(rstrip_whitespace(line)).size());
}

std::string bucket_name(const LengthBucket& b) {
  if (b.hi < 0) return fmt::format("{}+", b.lo);
  return b.hi == b.lo + 1 ? fmt::format("{}", b.lo) : fmt::format("{}-{}", b.lo, b.hi - 1);
}

namespace {

// Summed statistics of a bucket while segments are added.
struct Sums {
  int64_t lines = 0, source_length = 0;
  BleuStats bleu;
  std::vector<int64_t> chrf;

  void add(int64_t length, const BleuStats& b, const std::vector<int64_t>& c) {
    ++lines;
    source_length += length;
    for (int n = 0; n < kBleuMaxOrder; ++n) {
      bleu.counts[n] += b.counts[n];
      bleu.totals[n] += b.totals[n];
    }
    bleu.hyp_len += b.hyp_len;
    bleu.ref_len += b.ref_len;
    if (chrf.empty()) chrf.assign(c.size(), 0);
    for (size_t k = 0; k < c.size(); ++k) chrf[k] += c[k];
  }

  LengthBucket result(int64_t lo, int64_t hi, const BleuOptions& bo, const ChrfOptions& co) const {
    LengthBucket out;
    out.lo = lo;
    out.hi = hi;
    out.lines = lines;
    out.source_length = source_length;
    if (lines > 0) {
      out.bleu = bleu_from_stats(bleu, bo);
      out.chrf.score = chrf_from_stats(chrf, co);
      out.chrf.stats = chrf;
    }
    return out;
  }
};

}  // namespace

LengthScores score_by_length(const std::vector<std::string>& sources,
                             const std::vector<std::string>& hyps,
                             const std::vector<std::vector<std::string>>& refs,
                             const std::vector<int64_t>& edges, LengthUnit unit,
                             const BleuOptions& bleu, const ChrfOptions& chrf) {
  if (refs.empty()) ROTOR_FAIL("BLEU by source length needs at least one reference");
  if (edges.empty() || edges.front() != 0 || !std::is_sorted(edges.begin(), edges.end()))
    ROTOR_FAIL("length buckets must start at 0 and increase");
  if (sources.size() != hyps.size())
    ROTOR_FAIL("the source has {} lines but the hypothesis has {}", sources.size(), hyps.size());
  for (size_t k = 0; k < refs.size(); ++k)
    if (refs[k].size() != hyps.size())
      ROTOR_FAIL("reference {} has {} lines but the hypothesis has {}", k + 1, refs[k].size(),
                 hyps.size());
  std::vector<Sums> sums(edges.size());
  Sums all;
  std::vector<std::vector<std::string>> ref_words(refs.size());
  std::vector<std::string> seg_refs(refs.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < refs.size(); ++k) {
      ref_words[k] = bleu_words(refs[k][i], bleu);
      seg_refs[k] = refs[k][i];
    }
    const BleuStats b = bleu_segment_stats(bleu_words(hyps[i], bleu), ref_words);
    const std::vector<int64_t> c = chrf_segment_stats(hyps[i], seg_refs, chrf);
    const int64_t length = source_length(sources[i], unit);
    // The last edge not above the length: edges[0] is 0, so there is one.
    const size_t bucket = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), length) -
                                              edges.begin() - 1);
    sums[bucket].add(length, b, c);
    all.add(length, b, c);
  }
  LengthScores out;
  for (size_t j = 0; j < edges.size(); ++j)
    out.buckets.push_back(
        sums[j].result(edges[j], j + 1 < edges.size() ? edges[j + 1] : -1, bleu, chrf));
  out.all = all.result(0, -1, bleu, chrf);
  return out;
}

}  // namespace rotor::eval
