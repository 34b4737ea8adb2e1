// The encoder classifier, tasks classification and multilabel: examples on the
// BERT/RoFormer encoder with the head of models/bert_classifier.h, usually
// initialized from a pretrained model (model.init_from), in one of four
// label modes (outputs.h ClassifierMode):
//   - classes and regression: GLUE-style TSV examples (single sentences or
//     pairs, data/classification.h); the loss is a mean over examples and
//     validation reports accuracy and GLUE's scores;
//   - choices: the right one of data.choices candidates, accuracy only;
//   - multi: a set of labels an example, from a TSV column of label lists
//     (data/tsv.h) or the patients of a labelled prepare-ehr directory
//     (next-visit or window labels; data/ehr.h, ehr_multilabel_set, with the
//     ages, segments and visit positions of the EHR masked LM, the labels
//     being the directory's codes); one logit per label, binary
//     cross-entropy; the label vocabulary is data.labels, or else the sorted
//     labels of data.train, and every checkpoint holds it (labels.txt), for
//     `rotor predict` and --resume. Validation reports the sample-averaged
//     AP and ROC AUC (ap, auroc) and their micro and macro averages.
#include "tasks/task.h"

#include <algorithm>
#include <cmath>

#include "checkpoint/checkpoint.h"
#include "core/logging.h"
#include "data/classification.h"
#include "models/bert_classifier.h"
#include "models/model_config.h"
#include "tasks/classifier/outputs.h"
#include "tasks/data.h"

namespace rotor::tasks {

namespace {

// Each label's log-odds log(p / (1 - p)) in `set`, p the share of its
// examples that have the label, clipped to [0.5 / N, 1 - 0.5 / N] so that a
// label never (or always) seen stays finite.
std::vector<float> label_log_odds(const data::ClassificationSet& set, int64_t num_labels) {
  std::vector<double> count(static_cast<size_t>(num_labels), 0.0);
  for (const auto& ex : set.examples)
    for (int32_t k : ex.label_set) count[static_cast<size_t>(k)] += 1;
  const double n = static_cast<double>(set.size()), lo = 0.5 / n;
  std::vector<float> bias;
  for (double c : count) {
    const double p = std::clamp(c / n, lo, 1.0 - lo);
    bias.push_back(static_cast<float>(std::log(p / (1.0 - p))));
  }
  return bias;
}

class EncoderClassifierTask : public TrainingTask {
 public:
  EncoderClassifierTask(const Config& c, Device device, int rank, int world_size)
      : config_(c), device_(device), mode_(classifier_mode(c)) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    if (c.data.format == DataFormat::Ehr) {
      open_ehr(rank);
    } else {
      open_tsv(rank);
    }
    models::BertClassifierOptions mo = models::bert_classifier_options(config_, vocab_size_);
    if (c.model.classifier_bias == ClassifierBias::Prior) {
      mo.output_bias = label_log_odds(*train_, mo.num_labels);
      if (rank == 0) {
        double mean = 0;
        for (float b : mo.output_bias) mean += b;
        log().info(
            "classifier bias: the training labels' log-odds (model.classifier_bias prior), "
            "mean {:.3f}, from {:.3f} to {:.3f}",
            mean / static_cast<double>(mo.output_bias.size()),
            *std::min_element(mo.output_bias.begin(), mo.output_bias.end()),
            *std::max_element(mo.output_bias.begin(), mo.output_bias.end()));
      }
    }
    model_ = std::make_unique<models::BertForSequenceClassification>(mo, store_);
    store_.allocate(device);
    auto bo = batcher_options<data::ClassificationBatcherOptions>(c, rank, world_size);
    // data.packing documents: each batch's examples share rows of data.seq_len.
    bo.pack_len = classifier_pack_len(c);
    batcher_ = std::make_unique<data::ClassificationBatcher>(
        train_, mode_ == ClassifierMode::Regression, bo);
  }

  void open_tsv(int rank) {
    const Config& c = config_;
    // The encoder's tokenizer; a byte tokenizer (data.tokenizer bytes) is
    // written, never trained.
    spm_path_ = fixed_tokenizer(c);
    tokenizer_ = data::Tokenizer::load(spm_path_);
    vocab_size_ = tokenizer_.vocab_size();
    const bool multi = mode_ == ClassifierMode::Multi;
    if (multi) {
      config_.data.labels = multilabel_vocabulary(c);
      if (rank == 0)
        log().info("{} labels ({})", config_.data.labels.size(),
                   c.data.labels.empty() ? "those of data.train" : "data.labels");
    }
    const data::TsvFormat format = tsv_format(config_);
    auto read = [&](const std::string& path) {
      auto set = std::make_shared<const data::ClassificationSet>(
          data::read_classification_tsv(path, format, tokenizer_, /*require_labels=*/true));
      if (rank == 0 && !multi) {
        log().info("{}: {} examples{}", path, set->size(),
                   set->truncated ? fmt::format(", {} cut to data.seq_len = {} tokens",
                                                set->truncated, c.data.seq_len)
                                  : "");
      } else if (rank == 0) {
        int64_t assigned = 0, empty = 0;
        for (const auto& ex : set->examples) {
          assigned += static_cast<int64_t>(ex.label_set.size());
          empty += ex.label_set.empty();
        }
        log().info("{}: {} examples, {:.2f} labels each, {} without a label{}", path, set->size(),
                   static_cast<double>(assigned) / static_cast<double>(set->size()), empty,
                   set->truncated ? fmt::format(", {} cut to data.seq_len = {} tokens",
                                                set->truncated, c.data.seq_len)
                                  : "");
      }
      return set;
    };
    train_ = read(c.data.train);
    if (!c.data.valid.empty()) valid_ = read(c.data.valid);
    if (!c.data.test.empty()) test_ = read(c.data.test);
  }

  // data.format ehr: the labelled splits, the directory's code vocabulary as
  // the model's and (its codes) as the labels.
  void open_ehr(int rank) {
    const Config& c = config_;
    std::shared_ptr<const data::EhrSplit> train_split;
    auto read = [&](const std::string& prefix) {
      const auto split = open_ehr_split(c, prefix, train_split.get());
      auto set = std::make_shared<const data::ClassificationSet>(
          data::ehr_multilabel_set(*split, c.data.seq_len));
      if (!train_split) train_split = split;
      if (rank == 0) {
        int64_t assigned = 0, empty = 0;
        for (const auto& ex : set->examples) {
          assigned += static_cast<int64_t>(ex.label_set.size());
          empty += ex.label_set.empty();
        }
        log().info(
            "{}: {} patients, {:.2f} label codes each, {} without one{}", prefix, set->size(),
            static_cast<double>(assigned) / static_cast<double>(set->size()), empty,
            set->truncated
                ? fmt::format(", {} cut to the newest {} tokens", set->truncated, c.data.seq_len)
                : "");
      }
      return set;
    };
    train_ = read(c.data.train);
    if (!c.data.valid.empty()) valid_ = read(c.data.valid);
    if (!c.data.test.empty()) test_ = read(c.data.test);
    vocab_size_ = train_split->meta().vocab_size;
    ehr_files_ = ehr_checkpoint_files(c);
    config_.data.labels = data::ehr_label_names(data::ehr_dir_of(c.data.train));
    if (rank == 0)
      log().info("{} labels (the codes of {}/vocab.txt)", config_.data.labels.size(),
                 data::ehr_dir_of(c.data.train));
  }

  nn::ParameterStore& params() override { return store_; }
  std::string tokenizer_path() const override { return spm_path_; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::vector<std::pair<std::string, std::string>> checkpoint_files() const override {
    auto files = ehr_files_;
    if (mode_ == ClassifierMode::Multi)
      files.emplace_back(checkpoint::kLabelsFile,
                         checkpoint::labels_file_text(config_.data.labels));
    return files;
  }
  std::vector<std::string> label_names() const override {
    if (mode_ == ClassifierMode::Multi || mode_ == ClassifierMode::Classes)
      return config_.data.labels;
    return {};
  }

  TaskSums train_micro_batch(const nn::Context& ctx) override {
    const data::ClassificationHostBatch db = batcher_->next();
    const models::ClassificationBatch b = to_model_batch(db, device_);
    if (ctx.phase_hook) ctx.phase_hook->forward_begins(b.input_ids.size(0), b.input_ids.size(1), 0);
    const models::ClassificationSums s = model_->forward_loss(b, ctx);
    if (ctx.phase_hook) ctx.phase_hook->backward_begins();
    model_->backward(ctx.loss_scale);  // the fp16 loss scale, else 1
    TaskSums t;
    t.loss = t.nll = s.loss;
    t.tokens = s.examples;  // the loss is a mean over examples
    t.all_tokens = db.tokens;
    t.correct = s.correct;
    t.has_correct = s.has_correct;
    return t;
  }

  bool has_split(EvalSplit split) const override { return set(split) != nullptr; }

  ValidationResult evaluate(EvalSplit split, Device device) override {
    const auto data = set(split);
    ROTOR_CHECK(data != nullptr, "evaluate: no such data set");
    const ClassificationOutputs out =
        classify(*model_, *data, config_.train.batch_size, nn::inference_context(device),
                 classifier_pack_len(config_));
    ValidationResult r;
    r.sums = out.sums;
    score_classifier(config_, out, *data, r);
    return r;
  }

  data::BatchPosition position() const override { return batcher_->position(); }
  void set_position(data::BatchPosition p) override { batcher_->set_position(p); }

 private:
  std::shared_ptr<const data::ClassificationSet> set(EvalSplit split) const {
    return split == EvalSplit::Valid ? valid_ : test_;
  }

  Config config_;  // data.labels: the label vocabulary
  Device device_;
  ClassifierMode mode_;
  std::string spm_path_;  // "" for EHR data (its vocabulary is the directory's)
  data::Tokenizer tokenizer_;
  int64_t vocab_size_ = 0;
  std::vector<std::pair<std::string, std::string>> ehr_files_;  // EHR: vocab.txt
  std::shared_ptr<const data::ClassificationSet> train_, valid_, test_;
  nn::ParameterStore store_;
  std::unique_ptr<models::BertForSequenceClassification> model_;
  std::unique_ptr<data::ClassificationBatcher> batcher_;
};

// --resume: the TSV files are read as they are; a multi-label run's label
// vocabulary is the one the checkpoint was trained with.
void check_resumable(const Config& c, const std::string& checkpoint_dir) {
  if (classifier_mode(c) != ClassifierMode::Multi) return;
  const std::string saved = checkpoint_dir + "/" + checkpoint::kLabelsFile;
  const std::vector<std::string> was = checkpoint::read_labels_file(saved),
                                 now = multilabel_vocabulary(c);
  if (was != now)
    ROTOR_FAIL(
        "--resume: the label vocabulary ({} labels, from {}) differs from {} ({} labels), "
        "the one {} was trained with",
        now.size(), c.data.labels.empty() ? "data.train " + c.data.train : "data.labels", saved,
        was.size(), checkpoint_dir);
}

}  // namespace

// Both spellings (task classification, task multilabel) train this task.
const TaskSlice kClassifierSlice{
    .make = make_training_task<EncoderClassifierTask>,
    .check_resumable = check_resumable,
};

}  // namespace rotor::tasks
