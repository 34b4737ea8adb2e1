// chrF as sacreBLEU computes it (see chrf.h).
#include "eval/chrf.h"

#include <fmt/format.h>

#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "eval/unicode.h"

namespace rotor::eval {
namespace {

using Counts = std::unordered_map<std::string_view, int64_t>;

// What the n-grams of one segment are made of: the text they view into and
// one Counts per order.
struct SegmentNgrams {
  std::string text;                 // characters (whitespace removed unless kept)
  std::vector<std::string> words;   // words for chrF++
  std::vector<std::string> joined;  // word n-gram keys for chrF++
  std::vector<Counts> orders;
};

// chrF++ words: whitespace split, then one leading or trailing ASCII
// punctuation character of a word longer than one character is its own word
// (trailing checked first), as sacreBLEU does.
std::vector<std::string> chrf_words(const std::string& s) {
  static const std::string_view kPuncts = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  std::vector<std::string> out;
  for (auto& w : split_whitespace(s)) {
    const std::u32string cps = decode_utf8(w);
    if (cps.size() <= 1) {
      out.push_back(w);
    } else if (cps.back() < 0x80 &&
               kPuncts.find(static_cast<char>(cps.back())) != std::string_view::npos) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (cps.front() < 0x80 &&
               kPuncts.find(static_cast<char>(cps.front())) != std::string_view::npos) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(w);
    }
  }
  return out;
}

void extract(const std::string& segment, const ChrfOptions& opts, SegmentNgrams& ng) {
  std::string s = opts.lowercase ? unicode_lower(segment) : segment;
  if (opts.whitespace) {
    ng.text = s;
  } else {
    ng.text.clear();
    for (const auto& w : split_whitespace(s)) ng.text += w;
  }
  ng.orders.assign(static_cast<size_t>(opts.char_order + opts.word_order), Counts{});
  // Byte offset of every code point (and the end), so n-grams are code points.
  std::vector<size_t> starts;
  starts.reserve(ng.text.size() + 1);
  for (size_t i = 0; i < ng.text.size(); ++i)
    if ((static_cast<unsigned char>(ng.text[i]) & 0xC0) != 0x80) starts.push_back(i);
  const size_t ncp = starts.size();
  starts.push_back(ng.text.size());
  const std::string_view text(ng.text);
  for (int n = 1; n <= opts.char_order; ++n) {
    auto& c = ng.orders[static_cast<size_t>(n - 1)];
    for (size_t i = 0; i + static_cast<size_t>(n) <= ncp; ++i)
      ++c[text.substr(starts[i], starts[i + static_cast<size_t>(n)] - starts[i])];
  }
  if (opts.word_order > 0) {
    ng.words = chrf_words(s);
    ng.joined.clear();
    // Keys live in `joined`; reserve so views stay valid.
    size_t nkeys = 0;
    for (int n = 1; n <= opts.word_order; ++n)
      if (ng.words.size() >= static_cast<size_t>(n))
        nkeys += ng.words.size() - static_cast<size_t>(n) + 1;
    ng.joined.reserve(nkeys);
    for (int n = 1; n <= opts.word_order; ++n) {
      auto& c = ng.orders[static_cast<size_t>(opts.char_order + n - 1)];
      for (size_t i = 0; i + static_cast<size_t>(n) <= ng.words.size(); ++i) {
        std::string key = ng.words[i];
        for (int k = 1; k < n; ++k) {
          key.push_back(' ');
          key.append(ng.words[i + static_cast<size_t>(k)]);
        }
        ng.joined.push_back(std::move(key));
        ++c[ng.joined.back()];
      }
    }
  }
}

void match_stats(const SegmentNgrams& hyp, const SegmentNgrams& ref, std::vector<int64_t>& out) {
  out.clear();
  for (size_t o = 0; o < hyp.orders.size(); ++o) {
    int64_t nh = 0, nr = 0, nm = 0;
    for (const auto& [g, c] : hyp.orders[o]) {
      nh += c;
      auto it = ref.orders[o].find(g);
      if (it != ref.orders[o].end()) nm += std::min(c, it->second);
    }
    for (const auto& [g, c] : ref.orders[o]) nr += c;
    // An order the reference has no n-grams of (a reference shorter than n)
    // adds nothing to the hypothesis count either, as in sacreBLEU.
    out.push_back(nr > 0 ? nh : 0);
    out.push_back(nr);
    out.push_back(nm);
  }
}

}  // namespace

double chrf_from_stats(const std::vector<int64_t>& stats, const ChrfOptions& opts) {
  const double eps = 1e-16;
  const double factor = static_cast<double>(opts.beta) * static_cast<double>(opts.beta);
  const size_t order = static_cast<size_t>(opts.char_order + opts.word_order);
  double score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (size_t i = 0; i < order; ++i) {
    const auto n_hyp = static_cast<double>(stats[3 * i]);
    const auto n_ref = static_cast<double>(stats[3 * i + 1]);
    const auto n_match = static_cast<double>(stats[3 * i + 2]);
    const double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    const double rec = n_ref > 0 ? n_match / n_ref : eps;
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    // Precision and recall are averaged over the orders with n-grams on both
    // sides; the F-score is taken of those averages.
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opts.eps_smoothing) return 100.0 * score / static_cast<double>(order);
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0.0) return 0.0;
  double f = (1 + factor) * avg_prec * avg_rec;
  f /= factor * avg_prec + avg_rec;
  return 100.0 * f;
}

std::vector<int64_t> chrf_segment_stats(const std::string& hyp,
                                        const std::vector<std::string>& refs,
                                        const ChrfOptions& opts) {
  SegmentNgrams h, r;
  extract(hyp, opts, h);
  std::vector<int64_t> best, cur;
  double best_f = -1.0;
  for (const auto& ref : refs) {
    extract(ref, opts, r);
    match_stats(h, r, cur);
    const double f = chrf_from_stats(cur, opts);
    if (f > best_f) {
      best_f = f;
      best = cur;
    }
  }
  if (best.empty()) best.assign(3 * static_cast<size_t>(opts.char_order + opts.word_order), 0);
  return best;
}

ChrfResult corpus_chrf(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs, const ChrfOptions& opts) {
  if (refs.empty()) ROTOR_FAIL("chrF needs at least one reference");
  if (opts.char_order < 0 || opts.word_order < 0 || opts.char_order + opts.word_order == 0)
    ROTOR_FAIL("chrF needs a positive character or word n-gram order");
  for (size_t k = 0; k < refs.size(); ++k)
    if (refs[k].size() != hyps.size())
      ROTOR_FAIL("reference {} has {} lines but the hypothesis has {}", k + 1, refs[k].size(),
                 hyps.size());
  ChrfResult res;
  res.stats.assign(3 * static_cast<size_t>(opts.char_order + opts.word_order), 0);
  std::vector<std::string> seg_refs(refs.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < refs.size(); ++k) seg_refs[k] = refs[k][i];
    const auto s = chrf_segment_stats(hyps[i], seg_refs, opts);
    for (size_t j = 0; j < s.size(); ++j) res.stats[j] += s[j];
  }
  res.score = chrf_from_stats(res.stats, opts);
  return res;
}

std::string chrf_name(const ChrfOptions& opts) {
  return fmt::format("chrF{}{}", opts.beta, std::string(static_cast<size_t>(opts.word_order), '+'));
}

std::string format_chrf(const ChrfResult& r, const ChrfOptions& opts, int width) {
  return fmt::format("{} = {:.{}f}", chrf_name(opts), r.score, width);
}

std::string chrf_signature(const ChrfOptions& opts, int nrefs) {
  return fmt::format("nrefs:{}|case:{}|eff:{}|nc:{}|nw:{}|space:{}|version:rotor-{}", nrefs,
                     opts.lowercase ? "lc" : "mixed", opts.eps_smoothing ? "no" : "yes",
                     opts.char_order, opts.word_order, opts.whitespace ? "yes" : "no",
                     ROTOR_VERSION);
}

}  // namespace rotor::eval
