// Corpus BLEU as sacreBLEU computes it (see bleu.h). The arithmetic follows
// sacreBLEU's order of operations so that scores agree to the last digits.
#include "eval/bleu.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "core/error.h"
#include "eval/unicode.h"

namespace rotor::eval {
namespace {

using NgramCounts = std::unordered_map<std::string, int64_t>;

// n-grams of orders 1..kBleuMaxOrder, keyed by their words joined with ' '
// (words never contain whitespace).
NgramCounts count_ngrams(const std::vector<std::string>& words) {
  NgramCounts counts;
  counts.reserve(words.size() * kBleuMaxOrder);
  std::string key;
  for (size_t i = 0; i < words.size(); ++i) {
    // The key starts with the order's digit: the order is read back from it.
    key.assign(1, '0');
    for (size_t n = 0; n < static_cast<size_t>(kBleuMaxOrder) && i + n < words.size(); ++n) {
      key[0] = static_cast<char>('0' + n);
      if (n) key.push_back(' ');
      key.append(words[i + n]);
      ++counts[key];
    }
  }
  return counts;
}

int64_t closest_ref_len(int64_t hyp_len, const std::vector<std::vector<std::string>>& refs) {
  int64_t best_diff = -1, best_len = -1;
  for (const auto& r : refs) {
    const auto len = static_cast<int64_t>(r.size());
    const int64_t diff = std::llabs(hyp_len - len);
    if (best_diff == -1 || diff < best_diff) {
      best_diff = diff;
      best_len = len;
    } else if (diff == best_diff && len < best_len) {
      best_len = len;
    }
  }
  return best_len;
}

double default_smooth_value(BleuSmooth s) {
  switch (s) {
    case BleuSmooth::kFloor:
      return 0.1;
    case BleuSmooth::kAddK:
      return 1.0;
    default:
      return 0.0;
  }
}

}  // namespace

BleuSmooth parse_bleu_smooth(const std::string& name) {
  if (name == "none") return BleuSmooth::kNone;
  if (name == "floor") return BleuSmooth::kFloor;
  if (name == "add-k") return BleuSmooth::kAddK;
  if (name == "exp") return BleuSmooth::kExp;
  ROTOR_FAIL("unknown BLEU smoothing '{}' (choose exp, floor, add-k or none)", name);
}

const char* bleu_smooth_name(BleuSmooth s) {
  switch (s) {
    case BleuSmooth::kNone:
      return "none";
    case BleuSmooth::kFloor:
      return "floor";
    case BleuSmooth::kAddK:
      return "add-k";
    case BleuSmooth::kExp:
      return "exp";
  }
  return "?";
}

std::vector<std::string> bleu_words(const std::string& segment, const BleuOptions& opts) {
  // sacreBLEU: lowercase first, then rstrip, then tokenize, then str.split().
  std::string s = opts.lowercase ? unicode_lower(segment) : segment;
  s = rstrip_whitespace(s);
  s = tokenize(s, opts.tokenize, opts.lang);
  if (opts.compound_split) s = compound_split(s);
  return split_whitespace(s);
}

BleuStats bleu_segment_stats(const std::vector<std::string>& hyp,
                             const std::vector<std::vector<std::string>>& refs) {
  BleuStats st;
  st.hyp_len = static_cast<int64_t>(hyp.size());
  st.ref_len = closest_ref_len(st.hyp_len, refs);
  if (st.ref_len < 0) st.ref_len = 0;
  // Clip against the largest count of each n-gram in any one reference.
  NgramCounts ref_max;
  for (const auto& r : refs) {
    for (const auto& [g, c] : count_ngrams(r)) {
      auto& m = ref_max[g];
      if (c > m) m = c;
    }
  }
  for (const auto& [g, c] : count_ngrams(hyp)) {
    const int n = g[0] - '0';
    st.totals[n] += c;
    auto it = ref_max.find(g);
    if (it != ref_max.end()) st.counts[n] += std::min(c, it->second);
  }
  return st;
}

BleuResult bleu_from_stats(const BleuStats& stats, const BleuOptions& opts) {
  BleuResult r;
  r.hyp_len = stats.hyp_len;
  r.ref_len = stats.ref_len;
  r.counts = stats.counts;
  r.totals = stats.totals;
  r.ratio = r.ref_len > 0 ? static_cast<double>(r.hyp_len) / static_cast<double>(r.ref_len) : 0.0;
  if (r.hyp_len < r.ref_len)
    r.bp = r.hyp_len > 0
               ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.hyp_len))
               : 0.0;
  else
    r.bp = 1.0;

  bool any_match = false;
  for (auto c : stats.counts) any_match = any_match || c != 0;
  if (!any_match) return r;  // no match at all: BLEU 0, precisions 0 (sacreBLEU #141)

  const double smooth_value =
      opts.smooth_value >= 0 ? opts.smooth_value : default_smooth_value(opts.smooth);
  std::array<double, kBleuMaxOrder> correct{}, total{};
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    correct[n] = static_cast<double>(stats.counts[n]);
    total[n] = static_cast<double>(stats.totals[n]);
  }
  double smooth_mteval = 1.0;
  int eff_order = kBleuMaxOrder;
  for (int n = 1; n <= kBleuMaxOrder; ++n) {
    if (opts.smooth == BleuSmooth::kAddK && n > 1) {
      correct[n - 1] += smooth_value;
      total[n - 1] += smooth_value;
    }
    if (total[n - 1] == 0) break;
    if (opts.effective_order) eff_order = n;
    if (correct[n - 1] == 0) {
      if (opts.smooth == BleuSmooth::kExp) {
        smooth_mteval *= 2;
        r.precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1]);
      } else if (opts.smooth == BleuSmooth::kFloor) {
        r.precisions[n - 1] = 100.0 * smooth_value / total[n - 1];
      }
    } else {
      r.precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1];
    }
  }
  // log(0) counts as a huge negative number, as sacreBLEU's my_log.
  double log_sum = 0.0;
  for (int n = 0; n < eff_order; ++n)
    log_sum += r.precisions[n] == 0.0 ? -9999999999.0 : std::log(r.precisions[n]);
  r.score = r.bp * std::exp(log_sum / eff_order);
  return r;
}

BleuResult corpus_bleu(const std::vector<std::string>& hyps,
                       const std::vector<std::vector<std::string>>& refs, const BleuOptions& opts) {
  if (refs.empty()) ROTOR_FAIL("BLEU needs at least one reference");
  for (size_t k = 0; k < refs.size(); ++k)
    if (refs[k].size() != hyps.size())
      ROTOR_FAIL("reference {} has {} lines but the hypothesis has {}", k + 1, refs[k].size(),
                 hyps.size());
  BleuStats total;
  std::vector<std::vector<std::string>> ref_words(refs.size());
  for (size_t i = 0; i < hyps.size(); ++i) {
    for (size_t k = 0; k < refs.size(); ++k) ref_words[k] = bleu_words(refs[k][i], opts);
    const BleuStats s = bleu_segment_stats(bleu_words(hyps[i], opts), ref_words);
    for (int n = 0; n < kBleuMaxOrder; ++n) {
      total.counts[n] += s.counts[n];
      total.totals[n] += s.totals[n];
    }
    total.hyp_len += s.hyp_len;
    total.ref_len += s.ref_len;
  }
  return bleu_from_stats(total, opts);
}

std::string format_bleu(const BleuResult& r, int width) {
  return fmt::format(
      "BLEU = {:.{}f} {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP = {:.3f} ratio = {:.3f} "
      "hyp_len = {} ref_len = {})",
      r.score, width, r.precisions[0], r.precisions[1], r.precisions[2], r.precisions[3], r.bp,
      r.ratio, r.hyp_len, r.ref_len);
}

std::string bleu_signature(const BleuOptions& opts, int nrefs) {
  std::string tok = tokenizer_name(opts.tokenize);
  if (opts.tokenize == BleuTokenizer::kMoses) tok += "-" + opts.lang;
  if (opts.compound_split) tok += "+atat";
  return fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:rotor-{}", nrefs,
                     opts.lowercase ? "lc" : "mixed", opts.effective_order ? "yes" : "no", tok,
                     bleu_smooth_name(opts.smooth), ROTOR_VERSION);
}

}  // namespace rotor::eval
