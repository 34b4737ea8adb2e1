#include "eval/glue_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace rotor::eval {

namespace {

void check_sizes(size_t a, size_t b, const char* what) {
  ROTOR_CHECK(a == b, "{}: {} predictions but {} references", what, a, b);
}

// 1-based ranks, tied values sharing the mean of their ranks.
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) r[order[k]] = mean_rank;
    i = j + 1;
  }
  return r;
}

}  // namespace

double accuracy(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold) {
  check_sizes(predicted.size(), gold.size(), "accuracy");
  if (gold.empty()) return 0.0;
  int64_t right = 0;
  for (size_t i = 0; i < gold.size(); ++i) right += predicted[i] == gold[i];
  return static_cast<double>(right) / static_cast<double>(gold.size());
}

double f1_score(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold,
                int32_t positive) {
  check_sizes(predicted.size(), gold.size(), "f1");
  int64_t tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    const bool p = predicted[i] == positive, g = gold[i] == positive;
    tp += p && g;
    fp += p && !g;
    fn += !p && g;
  }
  const int64_t denom = 2 * tp + fp + fn;
  return denom == 0 ? 0.0 : 2.0 * static_cast<double>(tp) / static_cast<double>(denom);
}

double matthews_corrcoef(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold,
                         int32_t num_classes) {
  check_sizes(predicted.size(), gold.size(), "mcc");
  ROTOR_CHECK(num_classes > 0, "mcc: {} classes", num_classes);
  const size_t K = static_cast<size_t>(num_classes);
  // With the confusion counts: c = correct, s = samples, p_k = predicted k,
  // t_k = truly k: MCC = (c s - sum p_k t_k) / sqrt((s^2 - sum p_k^2)(s^2 - sum t_k^2)).
  std::vector<double> p(K, 0.0), t(K, 0.0);
  double c = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    ROTOR_CHECK(predicted[i] >= 0 && static_cast<size_t>(predicted[i]) < K && gold[i] >= 0 &&
                    static_cast<size_t>(gold[i]) < K,
                "mcc: a class outside [0, {})", K);
    p[static_cast<size_t>(predicted[i])] += 1;
    t[static_cast<size_t>(gold[i])] += 1;
    c += predicted[i] == gold[i];
  }
  const double s = static_cast<double>(gold.size());
  double pt = 0, pp = 0, tt = 0;
  for (size_t k = 0; k < K; ++k) pt += p[k] * t[k], pp += p[k] * p[k], tt += t[k] * t[k];
  const double denom = std::sqrt((s * s - pp) * (s * s - tt));
  return denom == 0 ? 0.0 : (c * s - pt) / denom;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x.size(), y.size(), "pearson");
  if (x.empty()) return 0.0;
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  const double denom = std::sqrt(sxx * syy);
  return denom == 0 ? 0.0 : std::clamp(sxy / denom, -1.0, 1.0);
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_sizes(x.size(), y.size(), "spearman");
  return pearson(ranks(x), ranks(y));
}

}  // namespace rotor::eval
