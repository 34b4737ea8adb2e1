// The encoder classifier's model run over a whole data set, shared by its
// training task (validation, data.test; tasks/classifier/task.cpp) and
// `rotor predict`; its label modes and the validators that score them (GLUE's
// scores, the multi-label AP and AUROC); the TSV layout and label files.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/classification.h"
#include "eval/multilabel_metrics.h"
#include "models/bert_classifier.h"
#include "nn/context.h"
#include "tasks/task.h"

namespace rotor::tasks {

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
// pack_len > 0 (data.packing documents): each batch's examples share rows
// of that many tokens (data::make_classification_batch); the outputs are
// the same, within round-off, on fewer rows.
ClassificationOutputs classify(models::BertForSequenceClassification& model,
                               const data::ClassificationSet& set, int64_t batch_size,
                               const nn::Context& ctx, int64_t pack_len = 0);
// The pack_len of a config's batches: data.seq_len with data.packing
// documents, else 0.
int64_t classifier_pack_len(const Config& c);

// The label mode of an encoder-classifier config: its task row's
// (LabelMode::Single: task classification; Multi: task multilabel), the
// single-label one refined by data.regression and data.choices. The model
// (models/bert_classifier.h), the batches and the validators follow it.
enum class ClassifierMode {
  Classes,     // one of data.labels an example; cross-entropy
  Regression,  // a number an example (data.regression); squared error
  Choices,     // the right one of data.choices candidates; cross-entropy over them
  Multi,       // a set of labels an example; binary cross-entropy per label
};
ClassifierMode classifier_mode(const Config& config);
std::string_view to_string(ClassifierMode mode);

// A score of the classifier's outputs against a labelled set, keyed by its
// metric, as Marian's validators are: on GLUE's 0-100 scale f1 (two labels;
// of the second) and mcc for classes, pearson and spearman for regression;
// in [0, 1] the multi-label ap and auroc averaged over examples (the sigmoid
// of the logits, eval/multilabel_metrics.h), each adding its micro and macro
// averages as named measures (ap_micro, ...). NaN where no example (or label)
// defines one. Multiple choice has accuracy (sums.correct / sums.tokens)
// only.
// What the validators of one evaluation score: the outputs against the set,
// and the multi-label scores, computed once on first use for both ap and
// auroc.
struct ClassifierScoring {
  ClassifierScoring(const ClassificationOutputs& o, const data::ClassificationSet& s)
      : outputs(o), set(s) {}
  const ClassificationOutputs& outputs;
  const data::ClassificationSet& set;
  const eval::MultilabelScores& multilabel() const;

 private:
  mutable std::optional<eval::MultilabelScores> multilabel_;
};
struct ClassifierValidator {
  ValidMetric metric;
  ClassifierMode mode;
  void (*score)(const ClassifierScoring& scoring, ValidationResult& result);
};
std::span<const ClassifierValidator> classifier_validators();

// Runs the validators of `config`'s mode whose metric it reports (listed in
// train.valid_metrics, or always reported: config/tasks.h), in the table's
// order, into result.scores and result.measures. Nothing when the set has no
// labels.
void score_classifier(const Config& config, const ClassificationOutputs& outputs,
                      const data::ClassificationSet& set, ValidationResult& result);

// The sigmoid of a logit, computed without overflow.
double sigmoid(double logit);

// The TSV layout of tasks classification and multilabel
// (data.sentence1_column, ...), its examples at most data.seq_len tokens.
// Task multilabel's labels are its label vocabulary (multilabel_vocabulary).
data::TsvFormat tsv_format(const Config& config);

// Task multilabel's label vocabulary: data.labels, or else the sorted
// labels of data.train (an error when it has none).
std::vector<std::string> multilabel_vocabulary(const Config& config);

models::ClassificationBatch to_model_batch(const data::ClassificationHostBatch& batch,
                                           Device device);

}  // namespace rotor::tasks
