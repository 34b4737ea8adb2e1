#include "config/tasks.h"

#include <charconv>

#include "core/error.h"

namespace rotor {
namespace {

// ---- the metrics of task classification ----------------------------------------

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

// ---- the rules of each task ------------------------------------------------------

std::optional<ConfigProblem> mlm_rules(const Config& c) {
  const DataConfig& d = c.data;
  if (d.mask_token_prob + d.random_token_prob > 1.0 + 1e-12)
    return ConfigProblem{"data.random_token_prob",
                         fmt::format("data.mask_token_prob + data.random_token_prob = {} + {} "
                                     "exceeds 1",
                                     d.mask_token_prob, d.random_token_prob),
                         {"data.mask_token_prob"}};
  if (d.seq_len < 2)  // a block is [CLS] and at least one token (data/mlm.h)
    return ConfigProblem{"data.seq_len",
                         fmt::format("{} is too short for [CLS] + tokens; at least 2", d.seq_len)};
  return std::nullopt;
}

std::optional<ConfigProblem> lm_rules(const Config& c) {
  if (c.model.decoder_layers < 1)
    return ConfigProblem{"model.decoder_layers",
                         fmt::format("task lm counts its causal layers here; got {}, at least 1",
                                     c.model.decoder_layers),
                         {"task"}};
  return std::nullopt;
}

// Pre-LN, as GPT-2, GPT-NeoX and fairseq's transformer_lm train.
void lm_defaults(Config& c, const KeyOrigins& written) {
  if (!written.written("model.norm")) c.model.norm = NormPlacement::Pre;
}

bool is_column_index(const std::string& s) {
  int64_t i = -1;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), i);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && i >= 0;
}

// The TSV columns (data/tsv.h reads them), tasks classification and multilabel.
std::optional<ConfigProblem> tsv_rules(const Config& c) {
  const DataConfig& d = c.data;
  if (d.sentence1_column.empty())
    return ConfigProblem{"data.sentence1_column", "empty; name the column of the (first) sentence"};
  if (d.label_column.empty())
    return ConfigProblem{"data.label_column", "empty; name the column of the labels"};
  if (d.label_column == d.sentence1_column || d.label_column == d.sentence2_column ||
      d.sentence2_column == d.sentence1_column)
    return ConfigProblem{"data.label_column",
                         "data.sentence1_column, data.sentence2_column and data.label_column "
                         "must name different columns",
                         {"data.sentence2_column", "data.sentence1_column"}};
  if (!d.header) {
    const std::pair<const char*, const std::string*> columns[] = {
        {"data.sentence1_column", &d.sentence1_column},
        {"data.sentence2_column", &d.sentence2_column},
        {"data.label_column", &d.label_column}};
    for (const auto& [key, name] : columns)
      if (!name->empty() && !is_column_index(*name))
        return ConfigProblem{key,
                             fmt::format("\"{}\" is not a column index (0, 1, ...), and "
                                         "data.header is false: the columns have no names",
                                         *name),
                             {"data.header"}};
  }
  const int need = d.sentence2_column.empty() ? 3 : 5;  // [CLS] a [SEP] (b [SEP])
  if (d.seq_len < need)
    return ConfigProblem{
        "data.seq_len",
        fmt::format("{} tokens cannot hold [CLS] a [SEP]{} with a token of each sentence; at "
                    "least {}",
                    d.seq_len, d.sentence2_column.empty() ? "" : " b [SEP]", need)};
  return std::nullopt;
}

std::optional<ConfigProblem> distinct_labels(const DataConfig& d) {
  for (size_t i = 0; i < d.labels.size(); ++i) {
    if (d.labels[i].empty()) return ConfigProblem{"data.labels", "an empty label"};
    for (size_t j = 0; j < i; ++j)
      if (d.labels[j] == d.labels[i])
        return ConfigProblem{"data.labels", fmt::format("\"{}\" is listed twice", d.labels[i])};
  }
  return std::nullopt;
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

const std::vector<TaskSpec> kTasks = {
    {Task::Translation,
     ModelFamily::EncoderDecoder,
     "data.max_len",
     &DataConfig::max_len,
     {{ValidMetric::Loss}, {ValidMetric::Bleu}, {ValidMetric::Chrf}},
     {{"data.train", &DataConfig::train,
       "a text prefix (PREFIX.SRC_LANG, PREFIX.TGT_LANG), or a prefix prepared by `rotor "
       "prepare`"}},
     nullptr},
    {Task::Mlm,
     ModelFamily::BertEncoder,
     "data.seq_len",
     &DataConfig::seq_len,
     {{ValidMetric::Loss}, {ValidMetric::Accuracy, true}},
     {{"data.train", &DataConfig::train, "a text file, or a prefix prepared by `rotor prepare`"}},
     mlm_rules},
    {Task::Classification,
     ModelFamily::BertEncoder,
     "data.seq_len",
     &DataConfig::seq_len,
     {{ValidMetric::Loss},
      {ValidMetric::Accuracy, true, accuracy_unavailable},
      {ValidMetric::F1, true, f1_unavailable},
      {ValidMetric::Mcc, true, mcc_unavailable},
      {ValidMetric::Pearson, true, needs_regression<ValidMetric::Pearson>},
      {ValidMetric::Spearman, true, needs_regression<ValidMetric::Spearman>}},
     {{"data.train", &DataConfig::train, "a GLUE-style TSV file"}},
     classification_rules},
    {Task::Lm,
     ModelFamily::Decoder,
     "data.seq_len",
     &DataConfig::seq_len,
     {{ValidMetric::Loss}, {ValidMetric::Accuracy, true}},
     {{"data.train", &DataConfig::train, "a text file, or a prefix prepared by `rotor prepare`"}},
     lm_rules,
     lm_defaults},
    {Task::Multilabel,
     ModelFamily::BertEncoder,
     "data.seq_len",
     &DataConfig::seq_len,
     {{ValidMetric::Loss}, {ValidMetric::Ap, true}, {ValidMetric::Auroc, true}},
     {{"data.train", &DataConfig::train, "a TSV file with a column of label lists"}},
     multilabel_rules,
     multilabel_defaults},
};

const TaskMetric* find_metric(const TaskSpec& spec, ValidMetric metric) {
  for (const auto& m : spec.metrics)
    if (m.metric == metric) return &m;
  return nullptr;
}

}  // namespace

const char* hf_init_target(ModelFamily family) {
  switch (family) {
    case ModelFamily::BertEncoder:
      return "a BERT/RoFormer encoder";
    case ModelFamily::Decoder:
      return "a GPT-NeoX/GPT-2 causal LM";
    case ModelFamily::EncoderDecoder:
      break;
  }
  return nullptr;
}

void apply_task_defaults(Config& config) {
  const TaskSpec& spec = task_spec(config.task);
  if (spec.defaults) spec.defaults(config, config.origins);
}

const std::vector<TaskSpec>& task_table() {
  return kTasks;
}

const TaskSpec& task_spec(Task task) {
  for (const auto& spec : kTasks)
    if (spec.task == task) return spec;
  ROTOR_CHECK(false, "task {} has no row in config/tasks.cpp", to_string(task));
  return kTasks.front();
}

std::string metric_unavailable(const Config& c, ValidMetric metric) {
  if (const TaskMetric* m = find_metric(task_spec(c.task), metric))
    return m->unavailable ? m->unavailable(c) : "";
  std::string tasks;
  for (const auto& spec : kTasks)
    if (find_metric(spec, metric))
      tasks += (tasks.empty() ? "" : " or ") + std::string(to_string(spec.task));
  return fmt::format("{} is a score of task {}; task {} has none", to_string(metric), tasks,
                     to_string(c.task));
}

bool metric_always_reported(const Config& c, ValidMetric metric) {
  const TaskMetric* m = find_metric(task_spec(c.task), metric);
  return m && m->always && (!m->unavailable || m->unavailable(c).empty());
}

}  // namespace rotor
