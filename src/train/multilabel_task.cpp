// The multi-label task: TSV examples whose label column lists any number of
// labels (data/tsv.h), on the BERT/RoFormer encoder with the classification
// head of models/bert_classifier.h giving one logit per label, trained with
// binary cross-entropy. The label vocabulary is data.labels, or else the
// sorted labels of data.train; every checkpoint holds it (labels.txt), for
// `rotor predict` and --resume. Validation reports the sample-averaged
// average precision and ROC AUC (ap, auroc) and their micro and macro
// averages (eval/multilabel_metrics.h). With data.format ehr the examples are
// the patients of a labelled prepare-ehr directory (next-visit or window
// labels; data/ehr.h, ehr_multilabel_set), with the ages, segments and visit
// positions of the EHR masked LM, and the labels are the directory's codes.
#include <algorithm>
#include <cmath>

#include "checkpoint/checkpoint.h"
#include "core/logging.h"
#include "data/classification.h"
#include "models/bert_classifier.h"
#include "models/model_config.h"
#include "train/classification.h"
#include "train/task.h"
#include "train/task_data.h"

namespace rotor::train {

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

class MultilabelTask : public TrainingTask {
 public:
  MultilabelTask(const Config& c, Device device, int rank, int world_size)
      : config_(c), device_(device) {
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
    data::ClassificationBatcherOptions bo;
    bo.batch_size = c.train.batch_size;
    bo.seed = static_cast<uint64_t>(c.seed);
    bo.rank = rank;
    bo.world_size = world_size;
    batcher_ = std::make_unique<data::ClassificationBatcher>(train_, false, bo);
  }

  void open_tsv(int rank) {
    const Config& c = config_;
    // The byte tokenizer (data.tokenizer bytes) is written, never trained,
    // as for classification.
    spm_path_ = train::fixed_tokenizer(c);
    tokenizer_ = data::Tokenizer::load(spm_path_);
    vocab_size_ = tokenizer_.vocab_size();
    config_.data.labels = multilabel_vocabulary(c);
    if (rank == 0)
      log().info("{} labels ({})", config_.data.labels.size(),
                 c.data.labels.empty() ? "those of data.train" : "data.labels");
    const data::TsvFormat format = tsv_format(config_);
    auto read = [&](const std::string& path) {
      auto set = std::make_shared<const data::ClassificationSet>(
          data::read_classification_tsv(path, format, tokenizer_, /*require_labels=*/true));
      if (rank == 0) {
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
    files.emplace_back(checkpoint::kLabelsFile, labels_file_text(config_.data.labels));
    return files;
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
    return t;
  }

  bool has_split(EvalSplit split) const override { return set(split) != nullptr; }

  ValidationResult evaluate(EvalSplit split, Device device) override {
    const auto data = set(split);
    ROTOR_CHECK(data != nullptr, "evaluate: no such data set");
    const ClassificationOutputs out =
        classify(*model_, *data, config_.train.batch_size, nn::inference_context(device));
    ValidationResult r;
    r.sums = out.sums;
    multilabel_scores(out, *data, r.scores, r.measures);
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
  std::string spm_path_;  // "" for EHR data (its vocabulary is the directory's)
  data::Tokenizer tokenizer_;
  int64_t vocab_size_ = 0;
  std::vector<std::pair<std::string, std::string>> ehr_files_;  // EHR: vocab.txt
  std::shared_ptr<const data::ClassificationSet> train_, valid_, test_;
  nn::ParameterStore store_;
  std::unique_ptr<models::BertForSequenceClassification> model_;
  std::unique_ptr<data::ClassificationBatcher> batcher_;
};

}  // namespace

std::unique_ptr<TrainingTask> make_multilabel_task(const Config& config, Device device, int rank,
                                                   int world_size) {
  return std::make_unique<MultilabelTask>(config, device, rank, world_size);
}

}  // namespace rotor::train
