// Task classification's model run over a whole data set, shared by the
// training tasks classification and multilabel (validation, data.test) and
// `rotor predict`, and the GLUE and multi-label scores of its predictions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/classification.h"
#include "models/bert_classifier.h"
#include "nn/context.h"
#include "train/task.h"

namespace rotor::train {

struct ClassificationOutputs {
  int64_t num_labels = 0;          // C (1 for regression; the choices of multiple choice)
  std::vector<float> logits;       // [N * C], in the set's order
  std::vector<int32_t> predicted;  // [N] argmax (classification); empty for regression
  TaskSums sums;                   // the loss over the examples (when the set has labels)
};

// Runs the model over every example of `set`, `batch_size` at a time, in
// file order, under `ctx` (inference: training off, fp32; its update picks
// the random attention features of FAVOR+ where the layers have not drawn
// them in this process: rotor predict gives the checkpoint's own).
ClassificationOutputs classify(models::BertForSequenceClassification& model,
                               const data::ClassificationSet& set, int64_t batch_size,
                               const nn::Context& ctx);

// GLUE's scores of the outputs against the set's labels, on GLUE's 0-100
// scale: f1 (two labels; of the second) and mcc for classes, pearson and
// spearman for regression, none for multiple choice. Accuracy is
// sums.correct / sums.tokens.
std::vector<std::pair<ValidMetric, double>> glue_scores(const ClassificationOutputs& outputs,
                                                        const data::ClassificationSet& set,
                                                        bool regression);

// Task multilabel's scores of the outputs (sigmoid of the logits) against the
// set's label sets (eval/multilabel_metrics.h), in [0, 1]: ap and auroc
// averaged over examples into `scores`; ap_micro, ap_macro, auroc_micro and
// auroc_macro into `measures`. NaN where no example (or label) defines one.
// Nothing without labels.
void multilabel_scores(const ClassificationOutputs& outputs, const data::ClassificationSet& set,
                       std::vector<std::pair<ValidMetric, double>>& scores,
                       std::vector<std::pair<std::string, double>>& measures);

// The sigmoid of a logit, computed without overflow.
double sigmoid(double logit);

}  // namespace rotor::train
