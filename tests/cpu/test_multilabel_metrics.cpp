// Average precision and ROC AUC (eval/multilabel_metrics.h) against
// scikit-learn. The reference numbers were printed by scikit-learn 1.9.1
// (numpy 2.4.6, Python 3) with average_precision_score and roc_auc_score on
// the very matrices below (average='samples', 'macro', 'micro'; the binary
// case with the defaults). Rows or labels where scikit-learn is undefined
// (no positive; for ROC AUC no positive or no negative: it raises, or for AP
// scores 0 with a warning) are left out of rotor's means, so their
// references were computed by scikit-learn on the matrix without them, as
// each comment says. tests/scripts/multilabel_metrics_reference.py prints
// them all again.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "eval/multilabel_metrics.h"

namespace rotor::eval {
namespace {

// 6 examples x 4 labels: ties within a row (rows 0 and 2) and across rows,
// rows with a single positive (1, 3), a row without a positive (5) and a
// label without a positive (3).
const std::vector<double> kScores = {0.9, 0.4, 0.4, 0.1, 0.2,  0.8,  0.5,  0.3,
                                     0.6, 0.6, 0.6, 0.2, 0.3,  0.7,  0.1,  0.05,
                                     0.5, 0.2, 0.9, 0.4, 0.35, 0.15, 0.25, 0.45};
const std::vector<uint8_t> kTruth = {1, 0, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0,
                                     0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0};

TEST(MultilabelMetrics, MatchScikitLearn) {
  const MultilabelScores m = multilabel_scores(kScores, kTruth, 4);
  // sklearn on rows 0-4 (row 5 has no positive).
  EXPECT_NEAR(m.ap, 0.7666666666666667, 1e-12);
  EXPECT_NEAR(m.auroc, 0.7916666666666667, 1e-12);
  EXPECT_EQ(m.ap_samples, 5);
  EXPECT_EQ(m.auroc_samples, 5);
  // sklearn on labels 0-2 (label 3 has no positive).
  EXPECT_NEAR(m.ap_macro, 0.8333333333333334, 1e-12);
  EXPECT_NEAR(m.auroc_macro, 0.7731481481481483, 1e-12);
  EXPECT_EQ(m.ap_labels, 3);
  EXPECT_EQ(m.auroc_labels, 3);
  // sklearn on the whole matrix.
  EXPECT_NEAR(m.ap_micro, 0.7476907150820195, 1e-12);
  EXPECT_NEAR(m.auroc_micro, 0.8046875, 1e-12);
}

TEST(MultilabelMetrics, AllPositiveRowCountsForApNotAuroc) {
  const std::vector<double> s = {0.1, 0.5, 0.3, 0.4, 0.4, 0.2, 0.7, 0.1, 0.9};
  const std::vector<uint8_t> t = {1, 1, 1, 0, 1, 0, 1, 0, 0};
  const MultilabelScores m = multilabel_scores(s, t, 3);
  EXPECT_NEAR(m.ap, 0.6666666666666666, 1e-12);  // sklearn, all rows
  EXPECT_EQ(m.ap_samples, 3);
  EXPECT_NEAR(m.auroc, 0.625, 1e-12);  // sklearn on rows 1-2 (row 0 is all positive)
  EXPECT_EQ(m.auroc_samples, 2);
  EXPECT_NEAR(m.ap_macro, 0.7777777777777777, 1e-12);  // sklearn, all labels
  EXPECT_NEAR(m.auroc_macro, 0.6666666666666666, 1e-12);
  EXPECT_NEAR(m.ap_micro, 0.5977777777777777, 1e-12);
  EXPECT_NEAR(m.auroc_micro, 0.55, 1e-12);
}

TEST(MultilabelMetrics, BinaryWithTies) {
  const std::vector<double> s = {0.8, 0.8, 0.5, 0.3, 0.3, 0.3, 0.1, 0.05};
  const std::vector<uint8_t> t = {1, 0, 1, 1, 0, 0, 1, 0};
  EXPECT_NEAR(average_precision(s, t), 0.5595238095238095, 1e-12);  // sklearn
  EXPECT_NEAR(roc_auc(s, t), 0.59375, 1e-12);                       // sklearn
  // The order of tied entries does not matter.
  const std::vector<double> s2 = {0.8, 0.8, 0.5, 0.3, 0.3, 0.3, 0.1, 0.05};
  const std::vector<uint8_t> t2 = {0, 1, 1, 0, 0, 1, 1, 0};
  EXPECT_DOUBLE_EQ(average_precision(s2, t2), average_precision(s, t));
  EXPECT_DOUBLE_EQ(roc_auc(s2, t2), roc_auc(s, t));
}

TEST(MultilabelMetrics, UndefinedIsNaN) {
  EXPECT_TRUE(std::isnan(average_precision({0.1, 0.2}, {0, 0})));
  EXPECT_TRUE(std::isnan(roc_auc({0.1, 0.2}, {1, 1})));
  EXPECT_DOUBLE_EQ(average_precision({0.1, 0.2}, {1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(roc_auc({0.9, 0.2}, {1, 0}), 1.0);
  EXPECT_DOUBLE_EQ(roc_auc({0.9, 0.2}, {0, 1}), 0.0);
  const MultilabelScores m = multilabel_scores({0.3, 0.6, 0.1, 0.2}, {0, 0, 0, 0}, 2);
  EXPECT_TRUE(std::isnan(m.ap) && std::isnan(m.auroc) && std::isnan(m.ap_macro) &&
              std::isnan(m.auroc_macro) && std::isnan(m.ap_micro) && std::isnan(m.auroc_micro));
  EXPECT_EQ(m.ap_samples, 0);
  EXPECT_EQ(m.auroc_labels, 0);
}

}  // namespace
}  // namespace rotor::eval
