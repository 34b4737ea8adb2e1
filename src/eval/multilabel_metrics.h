// The scores of multi-label predictions (task multilabel): average precision
// and the area under the ROC curve, as scikit-learn's
// average_precision_score and roc_auc_score compute them for one binary
// problem, and averaged over a [N, C] matrix of N examples by C labels three
// ways:
//
//   samples  each example's labels ranked by its scores, then the mean over
//            examples (BEHRT's metric: sklearn average='samples')
//   macro    each label's examples ranked, then the mean over labels
//   micro    all N * C (example, label) pairs ranked as one problem
//
// A problem without a positive has no average precision, and one without
// both a positive and a negative no ROC AUC: such examples (or labels) are
// left out of the mean, which is NaN when none is left. scikit-learn raises
// an error for the ROC AUC of such rows and, for average precision, scores
// them 0 with a warning; on inputs where every row is defined, the values
// are scikit-learn's exactly (tests/cpu/test_multilabel_metrics.cpp).
//
// Ties: AP steps through the distinct scores (all examples of a tied score
// enter the ranking together, as sklearn's precision_recall_curve); ROC AUC
// is the trapezoid rule over the distinct thresholds, which counts a tied
// positive-negative pair as half right.
#pragma once

#include <cstdint>
#include <vector>

namespace rotor::eval {

// AP of one binary problem: sum over distinct thresholds t (descending) of
// (R(t) - R(t_prev)) * P(t). NaN without a positive.
double average_precision(const std::vector<double>& scores, const std::vector<uint8_t>& truth);

// ROC AUC of one binary problem; NaN without both a positive and a negative.
double roc_auc(const std::vector<double>& scores, const std::vector<uint8_t>& truth);

struct MultilabelScores {
  double ap = 0, auroc = 0;                   // averaged over samples
  double ap_micro = 0, auroc_micro = 0;       // all pairs as one problem
  double ap_macro = 0, auroc_macro = 0;       // averaged over labels
  int64_t ap_samples = 0, auroc_samples = 0;  // the examples the sample means count
  int64_t ap_labels = 0, auroc_labels = 0;    // the labels the macro means count
};

// `scores` and `truth` are [N, C] row-major (truth 0 or 1).
MultilabelScores multilabel_scores(const std::vector<double>& scores,
                                   const std::vector<uint8_t>& truth, int64_t num_labels);

}  // namespace rotor::eval
