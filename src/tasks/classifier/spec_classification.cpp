// Task classification's config row (config/tasks.h TaskSpec): GLUE-style
// sentence (pair) classification, regression and multiple choice.
#include <fmt/format.h>

#include "config/tasks.h"
#include "tasks/classifier/tsv_rules.h"
#include "tasks/specs.h"

namespace rotor::tasks {
namespace {

std::string needs_classes(const Config& c, ValidMetric m) {
  if (!c.data.regression) return "";
  if (m == ValidMetric::Accuracy) return "accuracy needs class labels; data.regression is true";
  return fmt::format("{} scores class labels; data.regression is true", to_string(m));
}

std::string accuracy_unavailable(const Config& c) {
  return needs_classes(c, ValidMetric::Accuracy);
}

// A multiple-choice task's classes are positions, not labels: accuracy only.
std::string not_for_choices(const Config& c, ValidMetric m) {
  if (c.data.choices == 0) return "";
  return fmt::format(
      "{} scores labels; a multiple-choice task (data.choices: {}) scores accuracy and loss",
      to_string(m), c.data.choices);
}

std::string mcc_unavailable(const Config& c) {
  if (std::string why = not_for_choices(c, ValidMetric::Mcc); !why.empty()) return why;
  return needs_classes(c, ValidMetric::Mcc);
}

std::string f1_unavailable(const Config& c) {
  if (std::string why = not_for_choices(c, ValidMetric::F1); !why.empty()) return why;
  if (std::string why = needs_classes(c, ValidMetric::F1); !why.empty()) return why;
  if (c.data.labels.size() == 2) return "";
  return fmt::format("f1 is the F1 of the second label of a two-label task; data.labels has {}",
                     c.data.labels.size());
}

template <ValidMetric M>
std::string needs_regression(const Config& c) {
  if (c.data.regression) return "";
  return fmt::format("{} correlates numbers; it needs data.regression: true", to_string(M));
}

// Multiple choice (data.choices): the layout is positional, the labels are
// the choices' indices.
std::optional<ConfigProblem> choices_rules(const Config& c) {
  const DataConfig& d = c.data;
  if (d.choices < 2)
    return ConfigProblem{
        "data.choices",
        fmt::format("{} candidates; a multiple-choice task needs at least 2 (0 = off)", d.choices)};
  if (d.regression)
    return ConfigProblem{"data.regression",
                         "a multiple-choice task (data.choices) picks a candidate; set it false",
                         {"data.choices"}};
  if (!d.labels.empty())
    return ConfigProblem{"data.labels",
                         fmt::format("with data.choices the label is the 0-based index of the "
                                     "right choice (0 to {}); leave data.labels out",
                                     d.choices - 1),
                         {"data.choices"}};
  // The layout is positional, so a column named here would be ignored: refused.
  const DataConfig defaults;
  const std::pair<const char*, bool> named[] = {
      {"data.sentence1_column", d.sentence1_column != defaults.sentence1_column},
      {"data.sentence2_column", !d.sentence2_column.empty()},
      {"data.label_column", d.label_column != defaults.label_column}};
  for (const auto& [key, set] : named)
    if (set)
      return ConfigProblem{key,
                           fmt::format("with data.choices the columns are label, context, "
                                       "choice_1 ... choice_N in this order; leave {} out",
                                       key),
                           {"data.choices"}};
  if (d.seq_len < 5)  // [CLS] context [SEP] choice [SEP]
    return ConfigProblem{
        "data.seq_len",
        fmt::format("{} tokens cannot hold [CLS] context [SEP] choice [SEP] with a token of "
                    "each; at least 5",
                    d.seq_len),
        {"data.choices"}};
  return std::nullopt;
}

// The TSV columns and class labels (data/classification.h reads them).
std::optional<ConfigProblem> classification_rules(const Config& c) {
  if (c.data.choices != 0) return choices_rules(c);
  if (auto problem = tsv_rules(c)) return problem;
  const DataConfig& d = c.data;
  if (d.regression && !d.labels.empty())
    return ConfigProblem{
        "data.labels",
        "data.regression reads the label column as numbers: leave data.labels empty",
        {"data.regression"}};
  if (!d.regression && d.labels.size() < 2)
    return ConfigProblem{
        "data.labels",
        fmt::format("task classification needs two or more class labels (the values of "
                    "column {}), or data.regression: true; got {}",
                    d.label_column, d.labels.size()),
        {"data.regression", "task"}};
  return distinct_labels(d);
}

}  // namespace

const TaskSpec kClassificationSpec{
    .name = "classification",
    .model = ModelFamily::BertEncoder,
    .metrics = {{ValidMetric::Loss},
                {ValidMetric::Accuracy, true, accuracy_unavailable},
                {ValidMetric::F1, true, f1_unavailable},
                {ValidMetric::Mcc, true, mcc_unavailable},
                {ValidMetric::Pearson, true, needs_regression<ValidMetric::Pearson>},
                {ValidMetric::Spearman, true, needs_regression<ValidMetric::Spearman>}},
    .required_data = {{"data.train", &DataConfig::train, "a GLUE-style TSV file"}},
    .rules = classification_rules,
    .trains_tokenizer = false,
    .packs_documents = true,
    .labels = LabelMode::Single,
    .hf_export = HfExport::SequenceClassification,
    .commands = {"predict"},
};

}  // namespace rotor::tasks
