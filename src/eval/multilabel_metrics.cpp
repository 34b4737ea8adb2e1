#include "eval/multilabel_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace rotor::eval {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The cumulative true and false positives at each distinct score, highest
// score first: the points of the ROC and precision-recall curves.
struct Curve {
  std::vector<double> tp, fp;
  double positives = 0, negatives = 0;
};

Curve curve(const std::vector<double>& scores, const std::vector<uint8_t>& truth) {
  ROTOR_CHECK(scores.size() == truth.size(), "multilabel metrics: {} scores but {} labels",
              scores.size(), truth.size());
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  Curve c;
  for (size_t i = 0; i < order.size(); ++i) {
    (truth[order[i]] ? c.positives : c.negatives) += 1;
    const bool last_of_tie = i + 1 == order.size() || scores[order[i + 1]] != scores[order[i]];
    if (last_of_tie) {
      c.tp.push_back(c.positives);
      c.fp.push_back(c.negatives);
    }
  }
  return c;
}

double ap_of(const Curve& c) {
  if (c.positives == 0) return kNaN;
  double ap = 0, recall_before = 0;
  for (size_t k = 0; k < c.tp.size(); ++k) {
    const double recall = c.tp[k] / c.positives;
    ap += (recall - recall_before) * (c.tp[k] / (c.tp[k] + c.fp[k]));
    recall_before = recall;
  }
  return ap;
}

double auc_of(const Curve& c) {
  if (c.positives == 0 || c.negatives == 0) return kNaN;
  double area = 0, tp_before = 0, fp_before = 0;
  for (size_t k = 0; k < c.tp.size(); ++k) {
    area += (c.fp[k] - fp_before) * (c.tp[k] + tp_before) / 2;
    tp_before = c.tp[k];
    fp_before = c.fp[k];
  }
  return area / (c.positives * c.negatives);
}

// The mean of the defined (non-NaN) values, NaN when none; `count` gets how many.
double mean_defined(const std::vector<double>& v, int64_t& count) {
  double sum = 0;
  count = 0;
  for (double x : v)
    if (!std::isnan(x)) {
      sum += x;
      ++count;
    }
  return count ? sum / static_cast<double>(count) : kNaN;
}

}  // namespace

double average_precision(const std::vector<double>& scores, const std::vector<uint8_t>& truth) {
  return ap_of(curve(scores, truth));
}

double roc_auc(const std::vector<double>& scores, const std::vector<uint8_t>& truth) {
  return auc_of(curve(scores, truth));
}

MultilabelScores multilabel_scores(const std::vector<double>& scores,
                                   const std::vector<uint8_t>& truth, int64_t num_labels) {
  ROTOR_CHECK(num_labels > 0 && scores.size() == truth.size() &&
                  scores.size() % static_cast<size_t>(num_labels) == 0,
              "multilabel metrics: {} scores and {} labels for {} labels per example",
              scores.size(), truth.size(), num_labels);
  const size_t C = static_cast<size_t>(num_labels), N = scores.size() / C;
  MultilabelScores m;
  std::vector<double> aps, aucs, s;
  std::vector<uint8_t> t;
  for (size_t i = 0; i < N; ++i) {  // samples: a row each
    s.assign(scores.begin() + static_cast<std::ptrdiff_t>(i * C),
             scores.begin() + static_cast<std::ptrdiff_t>((i + 1) * C));
    t.assign(truth.begin() + static_cast<std::ptrdiff_t>(i * C),
             truth.begin() + static_cast<std::ptrdiff_t>((i + 1) * C));
    const Curve c = curve(s, t);
    aps.push_back(ap_of(c));
    aucs.push_back(auc_of(c));
  }
  m.ap = mean_defined(aps, m.ap_samples);
  m.auroc = mean_defined(aucs, m.auroc_samples);
  aps.clear();
  aucs.clear();
  for (size_t k = 0; k < C; ++k) {  // macro: a column each
    s.clear();
    t.clear();
    for (size_t i = 0; i < N; ++i) {
      s.push_back(scores[i * C + k]);
      t.push_back(truth[i * C + k]);
    }
    const Curve c = curve(s, t);
    aps.push_back(ap_of(c));
    aucs.push_back(auc_of(c));
  }
  m.ap_macro = mean_defined(aps, m.ap_labels);
  m.auroc_macro = mean_defined(aucs, m.auroc_labels);
  const Curve all = curve(scores, truth);  // micro
  m.ap_micro = ap_of(all);
  m.auroc_micro = auc_of(all);
  return m;
}

}  // namespace rotor::eval
