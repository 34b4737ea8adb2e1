// The scores GLUE reports for its classification and regression tasks, as
// scikit-learn and SciPy compute them for the GLUE benchmark's own scorer:
// accuracy, F1 of the positive class, Matthews correlation (multi-class as
// sklearn.metrics.matthews_corrcoef), Pearson and Spearman correlation (ties
// get their average rank, as scipy.stats.spearmanr). Each returns a value in
// [0, 1] or [-1, 1]; degenerate inputs (no positive prediction or label, a
// constant column) give 0, as scikit-learn does, rather than NaN.
#pragma once

#include <cstdint>
#include <vector>

namespace rotor::eval {

// Fraction of predicted[i] == gold[i]. Empty inputs give 0.
double accuracy(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold);

// F1 of class `positive` (binary GLUE tasks: class 1): 2 tp / (2 tp + fp + fn).
double f1_score(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold,
                int32_t positive = 1);

// Matthews correlation coefficient over `num_classes` classes (the R_K
// statistic of Gorodkin 2004, which is the usual MCC for two classes).
double matthews_corrcoef(const std::vector<int32_t>& predicted, const std::vector<int32_t>& gold,
                         int32_t num_classes);

// Pearson's r of two equally long series.
double pearson(const std::vector<double>& x, const std::vector<double>& y);

// Spearman's rho: Pearson's r of the ranks (ties averaged).
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace rotor::eval
