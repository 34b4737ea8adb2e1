// The classification task: GLUE-style TSV examples (single sentences or
// pairs, data/classification.h) on the BERT/RoFormer encoder with a
// classification or regression head (models/bert_classifier.h), usually
// initialized from a pretrained model (model.init_from). The loss is
// normalized per example; validation reports accuracy and GLUE's scores.
#include "core/logging.h"
#include "data/classification.h"
#include "models/bert_classifier.h"
#include "models/model_config.h"
#include "train/classification.h"
#include "train/task.h"
#include "train/task_data.h"

namespace rotor::train {

namespace {

class ClassificationTask : public TrainingTask {
 public:
  ClassificationTask(const Config& c, Device device, int rank, int world_size)
      : config_(c), device_(device) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    spm_path_ = train::fixed_tokenizer(c);
    tokenizer_ = data::Tokenizer::load(spm_path_);
    const data::TsvFormat format = tsv_format(c);
    auto read = [&](const std::string& path) {
      auto set = std::make_shared<const data::ClassificationSet>(
          data::read_classification_tsv(path, format, tokenizer_, /*require_labels=*/true));
      if (rank == 0)
        log().info("{}: {} examples{}", path, set->size(),
                   set->truncated ? fmt::format(", {} cut to data.seq_len = {} tokens",
                                                set->truncated, c.data.seq_len)
                                  : "");
      return set;
    };
    train_ = read(c.data.train);
    if (!c.data.valid.empty()) valid_ = read(c.data.valid);
    if (!c.data.test.empty()) test_ = read(c.data.test);
    model_ = std::make_unique<models::BertForSequenceClassification>(
        models::bert_classifier_options(c, tokenizer_.vocab_size()), store_);
    store_.allocate(device);
    data::ClassificationBatcherOptions bo;
    bo.batch_size = c.train.batch_size;
    bo.seed = static_cast<uint64_t>(c.seed);
    bo.rank = rank;
    bo.world_size = world_size;
    batcher_ = std::make_unique<data::ClassificationBatcher>(train_, c.data.regression, bo);
  }

  nn::ParameterStore& params() override { return store_; }
  std::string tokenizer_path() const override { return spm_path_; }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }

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
        classify(*model_, *data, config_.train.batch_size, nn::inference_context(device));
    ValidationResult r;
    r.sums = out.sums;
    r.scores = glue_scores(out, *data, config_.data.regression);
    return r;
  }

  data::BatchPosition position() const override { return batcher_->position(); }
  void set_position(data::BatchPosition p) override { batcher_->set_position(p); }

 private:
  std::shared_ptr<const data::ClassificationSet> set(EvalSplit split) const {
    return split == EvalSplit::Valid ? valid_ : test_;
  }

  Config config_;
  Device device_;
  std::string spm_path_;
  data::Tokenizer tokenizer_;
  std::shared_ptr<const data::ClassificationSet> train_, valid_, test_;
  nn::ParameterStore store_;
  std::unique_ptr<models::BertForSequenceClassification> model_;
  std::unique_ptr<data::ClassificationBatcher> batcher_;
};

}  // namespace

std::unique_ptr<TrainingTask> make_classification_task(const Config& config, Device device,
                                                       int rank, int world_size) {
  return std::make_unique<ClassificationTask>(config, device, rank, world_size);
}

}  // namespace rotor::train
