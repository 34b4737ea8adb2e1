// `rotor predict --checkpoint RUN[:best] --input F.tsv [--output preds.tsv]
//  [--scores] [--batch-size 32] [--device auto]`
// Predictions of a task-classification checkpoint for a TSV file laid out as
// its config says (data.sentence1_column, ...; the label column may be
// absent, as in GLUE's test sets). Writes GLUE's submission layout:
//
//   index<TAB>prediction          the example's 0-based index, its label
//   0<TAB>equivalent              (or the predicted value, for regression)
//
// --scores adds the raw outputs (logit_<label> columns). When the input has
// labels, the scores (accuracy and GLUE's, 0-100) go to standard error.
//
// A task-multilabel checkpoint (its label vocabulary in labels.txt) writes
// each label's probability, the sigmoid of its logit, and as the prediction
// the labels of probability >= 0.5 joined by data.label_separator (empty
// when none):
//
//   index<TAB>prediction<TAB>p_<label 1><TAB>p_<label 2>...
//   0<TAB>asthma,copd<TAB>0.913<TAB>0.0412...
//
// A multiple-choice checkpoint (data.choices N) reads label, context and N
// choices a line (or context and choices only), and writes the index of the
// choice it picks and each choice's probability, the softmax of the scores:
//
//   index<TAB>prediction<TAB>p_0<TAB>...<TAB>p_<N-1>
//   0<TAB>1<TAB>0.127<TAB>0.873
//
// with --scores, the raw scores as logit_0 ... logit_<N-1>; accuracy and
// loss to standard error when the input has labels.
//
// With labels in the input, ap, auroc and their micro and macro averages
// ([0, 1]) go to standard error. A multilabel checkpoint trained on EHR data
// (data.format ehr) reads a split of a prepare-ehr directory of the same
// vocabulary as --input (DIR/test; labels optional), its labels the codes.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/errors.h"
#include "cli/inference_session.h"
#include "config/config.h"
#include "config/tasks.h"
#include "core/device.h"
#include "core/error.h"
#include "core/io.h"
#include "data/classification.h"
#include "data/ehr.h"
#include "data/sentencepiece.h"
#include "models/model_config.h"
#include "nn/parameters.h"
#include "tasks/classifier/outputs.h"
#include "tasks/data.h"

namespace {

constexpr const char* kCmd = "predict";

struct PredictArgs {
  std::string checkpoint, input, device = "auto";
  std::optional<std::string> output;  // unset or "-": standard output
  bool scores = false;
  int64_t batch_size = 32;
};

// A prepare-ehr split as the examples of an EHR multilabel checkpoint, whose
// vocab.txt it must share; `vocab_size` gets the model's vocabulary size.
rotor::data::ClassificationSet ehr_input(const rotor::Config& cfg, const std::string& dir,
                                         const std::string& input, int64_t& vocab_size) {
  using namespace rotor;
  if (!data::is_ehr_split(input) || !std::filesystem::exists(input + ".idx"))
    ROTOR_FAIL(
        "{}: --input {} is not a split of a rotor prepare-ehr directory (DIR/test with "
        "DIR/ehr.json); {} was trained on EHR data",
        kCmd, input, dir);
  const data::EhrSplit split = data::EhrSplit::open(input);
  if (data::read_ehr_vocab(data::ehr_dir_of(input)) != data::read_ehr_vocab(dir))
    ROTOR_FAIL("{}: --input {} numbers its codes differently from {}/vocab.txt", kCmd, input, dir);
  if (cfg.model.age_vocab_size > 0 && split.meta().age_vocab_size > cfg.model.age_vocab_size)
    ROTOR_FAIL("{}: --input {} has age ids up to {}, the model's table holds {}", kCmd, input,
               split.meta().age_vocab_size - 1, cfg.model.age_vocab_size);
  vocab_size = split.meta().vocab_size;
  return data::ehr_multilabel_set(split, cfg.data.seq_len, /*require_labels=*/false);
}

int run_predict(const PredictArgs& a) {
  using namespace rotor;
  cli::check_nonempty(kCmd, "--checkpoint", a.checkpoint);
  // EHR checkpoints read a prepare-ehr split (DIR/test), the others a TSV file.
  if (!data::is_ehr_split(a.input)) cli::check_input_file(kCmd, "--input", a.input);
  const bool to_stdout = !a.output || *a.output == "-";
  if (!to_stdout) cli::check_output_file(kCmd, "--output", *a.output, {a.input});
  cli::check_int(kCmd, "--batch-size", a.batch_size, 1, 100'000);
  cli::InferenceSession session(kCmd, a.checkpoint, {}, a.device);
  const std::string& dir = session.dir();
  Config& cfg = session.config();
  const bool multilabel = cfg.task->labels == LabelMode::Multi;
  if (multilabel)
    cfg.data.labels = checkpoint::read_labels_file(dir + "/" + checkpoint::kLabelsFile);
  const bool ehr = cfg.data.format == DataFormat::Ehr;
  int64_t vocab_size = 0;
  data::ClassificationSet set;
  if (ehr) {
    set = ehr_input(cfg, dir, a.input, vocab_size);
  } else {
    const data::Tokenizer& tok = session.tokenizer();
    vocab_size = tok.vocab_size();
    set = data::read_classification_tsv(a.input, tasks::tsv_format(cfg), tok,
                                        /*require_labels=*/false);
  }

  models::BertForSequenceClassification* model = nullptr;
  {
    cli::Activity activity(fmt::format("{}: loading the checkpoint {}", kCmd, dir));
    model =
        &session.load_model<models::BertForSequenceClassification>([&](nn::ParameterStore& store) {
          return std::make_unique<models::BertForSequenceClassification>(
              models::bert_classifier_options(cfg, vocab_size), store);
        });
  }
  tasks::ClassificationOutputs out;
  {
    cli::Activity activity(fmt::format("{}: classifying {}", kCmd, a.input));
    out = tasks::classify(*model, set, a.batch_size, session.context(),
                          tasks::classifier_pack_len(cfg));
  }

  const bool regression = cfg.data.regression;
  const bool choices = cfg.data.choices > 0;
  const size_t C = static_cast<size_t>(out.num_labels);
  // A column's name for output k: the label, or the choice's index.
  auto name = [&](size_t k) {
    return choices ? std::to_string(k) : regression ? std::string("value") : cfg.data.labels[k];
  };
  std::string text = "index\tprediction";
  if (multilabel || choices)
    for (size_t k = 0; k < C; ++k) text += "\tp_" + name(k);
  if (a.scores)
    for (size_t k = 0; k < C; ++k) text += "\tlogit_" + name(k);
  text += "\n";
  for (int64_t i = 0; i < set.size(); ++i) {
    const size_t n = static_cast<size_t>(i);
    if (choices) {  // the softmax of the scores, the largest subtracted
      const float* z = out.logits.data() + n * C;
      const double top = *std::max_element(z, z + C);
      double total = 0;
      for (size_t k = 0; k < C; ++k) total += std::exp(static_cast<double>(z[k]) - top);
      text += std::to_string(i) + "\t" + std::to_string(out.predicted[n]);
      for (size_t k = 0; k < C; ++k)
        text += fmt::format("\t{:.6g}", std::exp(static_cast<double>(z[k]) - top) / total);
    } else if (multilabel) {
      std::string predicted, probabilities;
      for (size_t k = 0; k < C; ++k) {
        const double p = tasks::sigmoid(out.logits[n * C + k]);
        if (p >= 0.5)
          predicted += (predicted.empty() ? "" : cfg.data.label_separator) + cfg.data.labels[k];
        probabilities += fmt::format("\t{:.6g}", p);
      }
      text += std::to_string(i) + "\t" + predicted + probabilities;
    } else {
      text += std::to_string(i) + "\t" +
              (regression ? fmt::format("{:.6g}", out.logits[n])
                          : cfg.data.labels[static_cast<size_t>(out.predicted[n])]);
    }
    if (a.scores)
      for (size_t k = 0; k < C; ++k) text += fmt::format("\t{:.9g}", out.logits[n * C + k]);
    text += "\n";
  }
  if (to_stdout) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      ROTOR_FAIL("cannot write standard output: {}", std::strerror(errno));
  } else {
    atomic_write_file(*a.output, text);
  }

  std::string summary = fmt::format("{}: {} examples", kCmd, set.size());
  if (set.truncated > 0)
    summary += fmt::format(" ({} cut to {} tokens)", set.truncated, cfg.data.seq_len);
  if (set.has_labels) {
    const tasks::TaskSums& s = out.sums;
    summary +=
        fmt::format(" | loss {:.4f}", s.loss / static_cast<double>(std::max<int64_t>(s.tokens, 1)));
    if (s.has_correct)
      summary += fmt::format(" | accuracy {:.2f}",
                             100.0 * static_cast<double>(s.correct) /
                                 static_cast<double>(std::max<int64_t>(s.tokens, 1)));
    tasks::ValidationResult scored;
    tasks::score_classifier(cfg, out, set, scored);
    // GLUE's scores on their 0-100 scale, the multi-label ones in [0, 1].
    const char* format = multilabel ? " | {} {:.4f}" : " | {} {:.2f}";
    for (const auto& [metric, value] : scored.scores)
      summary += fmt::format(fmt::runtime(format), to_string(metric), value);
    for (const auto& [name, value] : scored.measures)
      summary += fmt::format(fmt::runtime(format), name, value);
  }
  std::fprintf(stderr, "%s\n", summary.c_str());
  return 0;
}

}  // namespace

ROTOR_COMMAND("predict",
              "Classify a TSV file with a task-classification or task-multilabel checkpoint", 14,
              [](CLI::App& app) {
                auto a = std::make_shared<PredictArgs>();
                app.add_option("--checkpoint", a->checkpoint,
                               "Checkpoint or run directory (RUN:best for its best checkpoint)")
                    ->required();
                app.add_option("--input", a->input,
                               "TSV file with the columns of the checkpoint's config (labels "
                               "optional)")
                    ->required();
                app.add_option_function<std::string>(
                    "--output", [a](const std::string& v) { a->output = v; },
                    "Predictions, index<TAB>prediction lines (multilabel: and p_<label> "
                    "columns; multiple choice: p_<choice> columns; default or -: standard "
                    "output)");
                app.add_flag("--scores", a->scores, "Add the raw outputs (logit_<label> columns)");
                app.add_option("--batch-size", a->batch_size, "Examples per batch (default 32)");
                app.add_option("--device", a->device, "auto | cpu | cuda | cuda:N");
                return [a] { return run_predict(*a); };
              });
