// Task classification's model run over a whole data set, shared by the
// training task (validation, data.test) and `rotor predict`, and the GLUE
// scores of its predictions.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/classification.h"
#include "models/bert_classifier.h"
#include "train/task.h"

namespace rotor::train {

struct ClassificationOutputs {
  int64_t num_labels = 0;          // C (1 for regression)
  std::vector<float> logits;       // [N * C], in the set's order
  std::vector<int32_t> predicted;  // [N] argmax (classification); empty for regression
  TaskSums sums;                   // the loss over the examples (when the set has labels)
};

// Runs the model (inference: no dropout, fp32) over every example of `set`,
// `batch_size` at a time, in file order.
ClassificationOutputs classify(models::BertForSequenceClassification& model,
                               const data::ClassificationSet& set, int64_t batch_size,
                               Device device);

// GLUE's scores of the outputs against the set's labels, on GLUE's 0-100
// scale: f1 (two labels; of the second) and mcc for classes, pearson and
// spearman for regression. Accuracy is sums.correct / sums.tokens.
std::vector<std::pair<ValidMetric, double>> glue_scores(const ClassificationOutputs& outputs,
                                                        const data::ClassificationSet& set,
                                                        bool regression);

}  // namespace rotor::train
