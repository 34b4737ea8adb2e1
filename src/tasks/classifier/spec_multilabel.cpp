// Task multilabel's config row (config/tasks.h TaskSpec): a set of labels an
// example, from a TSV column of label lists or from prepare-ehr splits.
#include <fmt/format.h>

#include "config/tasks.h"
#include "tasks/classifier/tsv_rules.h"
#include "tasks/specs.h"

namespace rotor::tasks {
namespace {

// The TSV columns, the label lists' separator and the label vocabulary
// (data/tsv.h reads them).
// The best checkpoint by validation AP (BEHRT's measure), not the loss.
void multilabel_defaults(Config& c, const KeyOrigins& written) {
  if (!written.written("train.best_metric") && !c.data.valid.empty())
    c.train.best_metric = ValidMetric::Ap;
}

std::optional<ConfigProblem> multilabel_rules(const Config& c) {
  if (auto problem = tsv_rules(c)) return problem;
  const DataConfig& d = c.data;
  if (d.regression)
    return ConfigProblem{"data.regression",
                         "task multilabel reads lists of labels, not numbers; set it false",
                         {"task"}};
  const std::string& s = d.label_separator;
  if (s.size() != 1 || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' ||
      static_cast<unsigned char>(s[0]) >= 0x80)
    return ConfigProblem{"data.label_separator",
                         fmt::format("\"{}\" is not one ASCII character other than a tab or a "
                                     "line break (e.g. \",\" or \" \")",
                                     s)};
  if (auto problem = distinct_labels(d)) return problem;
  for (const auto& label : d.labels)
    if (label.find(s[0]) != std::string::npos || label.front() == ' ' || label.back() == ' ')
      return ConfigProblem{
          "data.labels",
          fmt::format("\"{}\" holds the separator \"{}\" or starts or ends with a space", label, s),
          {"data.label_separator"}};
  return std::nullopt;
}

}  // namespace

const TaskSpec kMultilabelSpec{
    .name = "multilabel",
    .model = ModelFamily::BertEncoder,
    .metrics = {{ValidMetric::Loss}, {ValidMetric::Ap, true}, {ValidMetric::Auroc, true}},
    .required_data = {{"data.train", &DataConfig::train,
                       "a TSV file with a column of label lists"}},
    .rules = multilabel_rules,
    .defaults = multilabel_defaults,
    .trains_tokenizer = false,
    .reads_ehr = true,
    .packs_documents = true,
    .labels = LabelMode::Multi,
    .hf_export = HfExport::SequenceClassification,
    .commands = {"predict"},
};

}  // namespace rotor::tasks
