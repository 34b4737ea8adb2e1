#include "tasks/classifier/outputs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "config/tasks.h"
#include "core/error.h"
#include "core/io.h"
#include "eval/glue_metrics.h"
#include "eval/multilabel_metrics.h"
#include "tasks/data.h"

namespace rotor::tasks {

ClassificationOutputs classify(models::BertForSequenceClassification& model,
                               const data::ClassificationSet& set, int64_t batch_size,
                               const nn::Context& ctx, int64_t pack_len) {
  const Device device = ctx.device;
  const bool regression = model.options().regression;
  ClassificationOutputs out;
  out.num_labels = model.options().outputs();
  out.logits.reserve(static_cast<size_t>(set.size() * out.num_labels));
  std::vector<float> lg;
  for (int64_t first = 0; first < set.size(); first += batch_size) {
    std::vector<int64_t> ids(static_cast<size_t>(std::min(batch_size, set.size() - first)));
    std::iota(ids.begin(), ids.end(), first);
    const data::ClassificationHostBatch b =
        data::make_classification_batch(set, ids, regression, pack_len);
    const models::ClassificationSums s = model.forward_loss(to_model_batch(b, device), ctx, &lg);
    out.logits.insert(out.logits.end(), lg.begin(), lg.end());
    TaskSums t;
    t.loss = t.nll = s.loss;
    t.tokens = s.examples;
    t.all_tokens = b.tokens;
    t.correct = s.correct;
    t.has_correct = s.has_correct;
    out.sums.add(t);
  }
  if (!regression && !model.options().multilabel) {
    const size_t C = static_cast<size_t>(out.num_labels);
    for (size_t i = 0; i < out.logits.size(); i += C)
      out.predicted.push_back(static_cast<int32_t>(
          std::max_element(out.logits.begin() + static_cast<std::ptrdiff_t>(i),
                           out.logits.begin() + static_cast<std::ptrdiff_t>(i + C)) -
          (out.logits.begin() + static_cast<std::ptrdiff_t>(i))));
  }
  return out;
}

int64_t classifier_pack_len(const Config& c) {
  return c.data.packing == Packing::Documents ? c.data.seq_len : 0;
}

double sigmoid(double z) {
  const double e = std::exp(-std::abs(z));
  return z >= 0 ? 1 / (1 + e) : e / (1 + e);
}

ClassifierMode classifier_mode(const Config& c) {
  if (c.task->labels == LabelMode::Multi) return ClassifierMode::Multi;
  if (c.data.choices > 0) return ClassifierMode::Choices;
  return c.data.regression ? ClassifierMode::Regression : ClassifierMode::Classes;
}

std::string_view to_string(ClassifierMode mode) {
  // In the order of the enum.
  constexpr std::string_view kNames[] = {"classes", "regression", "choices", "multi-label"};
  return kNames[static_cast<size_t>(mode)];
}

namespace {

std::vector<int32_t> gold_labels(const data::ClassificationSet& set) {
  std::vector<int32_t> gold;
  for (const auto& ex : set.examples) gold.push_back(ex.label);
  return gold;
}

std::vector<double> gold_targets(const data::ClassificationSet& set) {
  std::vector<double> y;
  for (const auto& ex : set.examples) y.push_back(ex.target);
  return y;
}

void f1(const ClassifierScoring& s, ValidationResult& r) {
  const ClassificationOutputs& o = s.outputs;
  if (o.num_labels != 2) return;  // the F1 of the second of two labels
  r.scores.emplace_back(ValidMetric::F1, 100.0 * eval::f1_score(o.predicted, gold_labels(s.set)));
}

void mcc(const ClassifierScoring& s, ValidationResult& r) {
  const ClassificationOutputs& o = s.outputs;
  r.scores.emplace_back(ValidMetric::Mcc,
                        100.0 * eval::matthews_corrcoef(o.predicted, gold_labels(s.set),
                                                        static_cast<int32_t>(o.num_labels)));
}

template <ValidMetric M,
          double (*Correlation)(const std::vector<double>&, const std::vector<double>&)>
void correlation(const ClassifierScoring& s, ValidationResult& r) {
  const std::vector<double> x(s.outputs.logits.begin(), s.outputs.logits.end());
  r.scores.emplace_back(M, 100.0 * Correlation(x, gold_targets(s.set)));
}

void ap(const ClassifierScoring& s, ValidationResult& r) {
  const eval::MultilabelScores& m = s.multilabel();
  r.scores.emplace_back(ValidMetric::Ap, m.ap);
  r.measures.emplace_back("ap_micro", m.ap_micro);
  r.measures.emplace_back("ap_macro", m.ap_macro);
}

void auroc(const ClassifierScoring& s, ValidationResult& r) {
  const eval::MultilabelScores& m = s.multilabel();
  r.scores.emplace_back(ValidMetric::Auroc, m.auroc);
  r.measures.emplace_back("auroc_micro", m.auroc_micro);
  r.measures.emplace_back("auroc_macro", m.auroc_macro);
}

constexpr ClassifierValidator kValidators[] = {
    {ValidMetric::F1, ClassifierMode::Classes, f1},
    {ValidMetric::Mcc, ClassifierMode::Classes, mcc},
    {ValidMetric::Pearson, ClassifierMode::Regression,
     correlation<ValidMetric::Pearson, eval::pearson>},
    {ValidMetric::Spearman, ClassifierMode::Regression,
     correlation<ValidMetric::Spearman, eval::spearman>},
    {ValidMetric::Ap, ClassifierMode::Multi, ap},
    {ValidMetric::Auroc, ClassifierMode::Multi, auroc},
};

}  // namespace

// The sigmoid of the logits against the label sets.
const eval::MultilabelScores& ClassifierScoring::multilabel() const {
  if (!multilabel_) {
    const size_t C = static_cast<size_t>(outputs.num_labels);
    std::vector<double> p(outputs.logits.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = sigmoid(outputs.logits[i]);
    std::vector<uint8_t> truth(p.size(), 0);
    for (size_t n = 0; n < set.examples.size(); ++n)
      for (int32_t k : set.examples[n].label_set) truth[n * C + static_cast<size_t>(k)] = 1;
    multilabel_ = eval::multilabel_scores(p, truth, outputs.num_labels);
  }
  return *multilabel_;
}

std::span<const ClassifierValidator> classifier_validators() {
  return kValidators;
}

void score_classifier(const Config& c, const ClassificationOutputs& o,
                      const data::ClassificationSet& set, ValidationResult& r) {
  if (!set.has_labels || set.size() == 0) return;
  const ClassifierMode mode = classifier_mode(c);
  const auto& listed = c.train.valid_metrics;
  const ClassifierScoring scoring{o, set};
  for (const ClassifierValidator& v : kValidators)
    if (v.mode == mode && (metric_always_reported(c, v.metric) ||
                           std::find(listed.begin(), listed.end(), v.metric) != listed.end()))
      v.score(scoring, r);
}

data::TsvFormat tsv_format(const Config& c) {
  data::TsvFormat f;
  f.sentence1 = c.data.sentence1_column;
  f.sentence2 = c.data.sentence2_column;
  f.label = c.data.label_column;
  f.header = c.data.header;
  f.labels = c.data.labels;
  f.regression = c.data.regression;
  f.multilabel = c.task->labels == LabelMode::Multi;
  if (c.data.label_separator.size() == 1) f.label_separator = c.data.label_separator[0];
  f.max_len = c.data.seq_len;
  f.choices = c.data.choices;
  return f;
}

std::vector<std::string> multilabel_vocabulary(const Config& c) {
  if (!c.data.labels.empty()) return c.data.labels;
  const std::string text = read_file(c.data.train, kMaxTsvBytes);
  std::vector<std::string> labels = data::label_vocabulary(text, c.data.train, tsv_format(c));
  if (labels.empty())
    ROTOR_FAIL(
        "data.train {}: no example has a label in column {} (data.label_column); task "
        "multilabel builds its label vocabulary from them (or set data.labels)",
        c.data.train, c.data.label_column);
  return labels;
}

models::ClassificationBatch to_model_batch(const data::ClassificationHostBatch& b, Device device) {
  models::ClassificationBatch m;
  m.input_ids = b.input_ids;
  m.token_type_ids = b.token_type_ids;
  m.lengths = b.lengths;
  m.age_ids = b.age_ids;
  m.position_ids = b.position_ids;
  m.labels = b.labels;
  m.targets = b.targets;
  m.tokens = b.tokens;
  m.documents = b.documents;
  m.cls_positions = b.cls_positions;
  return m.to(device);
}

}  // namespace rotor::tasks
