#include "train/classification.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eval/glue_metrics.h"
#include "eval/multilabel_metrics.h"
#include "train/task_data.h"

namespace rotor::train {

ClassificationOutputs classify(models::BertForSequenceClassification& model,
                               const data::ClassificationSet& set, int64_t batch_size,
                               const nn::Context& ctx) {
  const Device device = ctx.device;
  const bool regression = model.options().regression;
  ClassificationOutputs out;
  out.num_labels = model.options().outputs();
  out.logits.reserve(static_cast<size_t>(set.size() * out.num_labels));
  std::vector<float> lg;
  for (int64_t first = 0; first < set.size(); first += batch_size) {
    std::vector<int64_t> ids(static_cast<size_t>(std::min(batch_size, set.size() - first)));
    std::iota(ids.begin(), ids.end(), first);
    const data::ClassificationHostBatch b = data::make_classification_batch(set, ids, regression);
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

std::vector<std::pair<ValidMetric, double>> glue_scores(const ClassificationOutputs& o,
                                                        const data::ClassificationSet& set,
                                                        bool regression) {
  std::vector<std::pair<ValidMetric, double>> scores;
  if (!set.has_labels || set.choices > 0) return scores;  // multiple choice: accuracy only
  if (regression) {
    std::vector<double> x(o.logits.begin(), o.logits.end()), y;
    for (const auto& ex : set.examples) y.push_back(ex.target);
    scores.emplace_back(ValidMetric::Pearson, 100.0 * eval::pearson(x, y));
    scores.emplace_back(ValidMetric::Spearman, 100.0 * eval::spearman(x, y));
    return scores;
  }
  std::vector<int32_t> gold;
  for (const auto& ex : set.examples) gold.push_back(ex.label);
  if (o.num_labels == 2)
    scores.emplace_back(ValidMetric::F1, 100.0 * eval::f1_score(o.predicted, gold));
  scores.emplace_back(
      ValidMetric::Mcc,
      100.0 * eval::matthews_corrcoef(o.predicted, gold, static_cast<int32_t>(o.num_labels)));
  return scores;
}

double sigmoid(double z) {
  const double e = std::exp(-std::abs(z));
  return z >= 0 ? 1 / (1 + e) : e / (1 + e);
}

void multilabel_scores(const ClassificationOutputs& o, const data::ClassificationSet& set,
                       std::vector<std::pair<ValidMetric, double>>& scores,
                       std::vector<std::pair<std::string, double>>& measures) {
  if (!set.has_labels || set.size() == 0) return;
  const size_t C = static_cast<size_t>(o.num_labels);
  std::vector<double> p(o.logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = sigmoid(o.logits[i]);
  std::vector<uint8_t> truth(p.size(), 0);
  for (size_t n = 0; n < set.examples.size(); ++n)
    for (int32_t k : set.examples[n].label_set) truth[n * C + static_cast<size_t>(k)] = 1;
  const eval::MultilabelScores m = eval::multilabel_scores(p, truth, o.num_labels);
  scores.emplace_back(ValidMetric::Ap, m.ap);
  scores.emplace_back(ValidMetric::Auroc, m.auroc);
  measures.emplace_back("ap_micro", m.ap_micro);
  measures.emplace_back("ap_macro", m.ap_macro);
  measures.emplace_back("auroc_micro", m.auroc_micro);
  measures.emplace_back("auroc_macro", m.auroc_macro);
}

}  // namespace rotor::train
