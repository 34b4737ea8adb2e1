// The masked-LM task: a monolingual corpus packed into blocks of seq_len
// tokens, masked anew every epoch from Philox, the BERT/RoFormer encoder with
// its MLM head, the loss over masked tokens. Validation uses fixed masks so
// that runs compare (tasks/scoring.h, shared with `rotor eval`). With
// data.format ehr the rows are patients of a `rotor prepare-ehr` directory
// (data/ehr_mlm.h) with their segments, ages and visit positions; the
// vocabulary is the directory's vocab.txt.
#include "tasks/task.h"

#include "core/logging.h"
#include "data/ehr_mlm.h"
#include "data/mlm.h"
#include "data/sentencepiece.h"
#include "models/bert.h"
#include "models/model_config.h"
#include "tasks/data.h"
#include "tasks/scoring.h"

namespace rotor::tasks {

namespace {

class MlmTask : public TrainingTask {
 public:
  MlmTask(const Config& c, Device device, int rank, int world_size) : config_(c), device_(device) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    if (c.data.format == DataFormat::Ehr) {
      open_ehr(c, rank, world_size);
      return;
    }
    spm_path_ = ensure_tokenizer(c);
    tokenizer_ = data::Tokenizer::load(spm_path_);
    vocab_size_ = tokenizer_.vocab_size();
    masking_ = mlm_masking(c, tokenizer_);
    const data::MlmSpecialIds& special = masking_.special;
    auto open = [&](const std::string& key) {
      auto corpus = open_corpus(prepared_prefix(c, key, spm_path_), tokenizer_);
      const std::string name = "data." + key;
      auto blocks = std::make_shared<const data::PackedBlocks>(corpus, c.data.seq_len, special.cls,
                                                               special.sep, mlm_packing(c), name,
                                                               text_documents(c, tokenizer_));
      log_mlm_packing(*blocks, name);
      return blocks;
    };
    train_blocks_ = open("train");
    if (!c.data.valid.empty()) valid_blocks_ = open("valid");
    if (!c.data.test.empty()) test_blocks_ = open("test");
    model_ = std::make_unique<models::BertForMaskedLM>(
        models::bert_options(c, tokenizer_.vocab_size()), store_);
    store_.allocate(device);
    const auto bo = batcher_options<data::MlmBatcherOptions>(c, rank, world_size);
    batcher_ = std::make_unique<data::MlmBatcher>(train_blocks_, data::Masker(masking_), bo);
    if (batcher_->batches_in_epoch() == 0)
      ROTOR_FAIL("data.train {}: {} blocks of {} tokens, fewer than one batch of {}", c.data.train,
                 train_blocks_->size(), c.data.seq_len, c.train.batch_size);
  }

  nn::ParameterStore& params() override { return store_; }
  std::string tokenizer_path() const override { return spm_path_; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::vector<std::pair<std::string, std::string>> checkpoint_files() const override {
    return ehr_files_;
  }

  TaskSums train_micro_batch(const nn::Context& ctx) override {
    models::MlmBatch b =
        to_model_batch(ehr_batcher_ ? ehr_batcher_->next() : batcher_->next(), device_);
    if (ctx.phase_hook) ctx.phase_hook->forward_begins(b.input_ids.size(0), b.input_ids.size(1), 0);
    models::MlmSums s = model_->forward_loss(b, ctx);
    if (ctx.phase_hook) ctx.phase_hook->backward_begins();
    model_->backward(ctx.loss_scale);  // the fp16 loss scale, else 1
    return to_sums(s, b);
  }

  bool has_split(EvalSplit split) const override {
    return ehr_batcher_ ? ehr_split(split) != nullptr : blocks(split) != nullptr;
  }

  ValidationResult evaluate(EvalSplit split, Device device) override {
    ROTOR_CHECK(has_split(split), "evaluate: no such data set");
    nn::Context ctx;
    ctx.training = false;
    ctx.device = device;
    if (!ehr_batcher_)
      return score_mlm(*model_, blocks(split), masking_, config_.train.batch_size, ctx);
    return score_ehr_mlm(*model_, ehr_split(split), config_.data.seq_len, masking_,
                         config_.train.batch_size, ctx, pack_patients());
  }

  data::BatchPosition position() const override {
    return ehr_batcher_ ? ehr_batcher_->position() : batcher_->position();
  }
  void set_position(data::BatchPosition p) override {
    if (ehr_batcher_)
      ehr_batcher_->set_position(p);
    else
      batcher_->set_position(p);
  }

 private:
  Config config_;
  Device device_;
  std::string spm_path_;
  data::Tokenizer tokenizer_;
  data::MaskingOptions masking_;
  std::shared_ptr<const data::PackedBlocks> blocks(EvalSplit split) const {
    return split == EvalSplit::Valid ? valid_blocks_ : test_blocks_;
  }
  std::shared_ptr<const data::EhrSplit> ehr_split(EvalSplit split) const {
    return split == EvalSplit::Valid ? valid_ehr_ : test_ehr_;
  }

  // data.format ehr: the splits, the vocabulary of the prepared directory,
  // the model with its age and segment embeddings.
  void open_ehr(const Config& c, int rank, int world_size) {
    auto open = [&](const std::string& prefix) {
      return open_ehr_split(c, prefix, train_ehr_.get());
    };
    train_ehr_ = open(c.data.train);
    vocab_size_ = train_ehr_->meta().vocab_size;
    ehr_files_ = ehr_checkpoint_files(c);
    if (!c.data.valid.empty()) valid_ehr_ = open(c.data.valid);
    if (!c.data.test.empty()) test_ehr_ = open(c.data.test);
    masking_ = ehr_mlm_masking(c, vocab_size_);
    model_ =
        std::make_unique<models::BertForMaskedLM>(models::bert_options(c, vocab_size_), store_);
    store_.allocate(device_);
    const auto bo = batcher_options<data::MlmBatcherOptions>(c, rank, world_size);
    ehr_batcher_ = std::make_unique<data::EhrMlmBatcher>(
        train_ehr_, c.data.seq_len, data::Masker(masking_), bo, pack_patients());
    if (pack_patients())
      log().info("data.train: {} patients packed into {} rows of up to {} tokens ({:.2f} a row)",
                 train_ehr_->size(), ehr_batcher_->rows(), c.data.seq_len,
                 static_cast<double>(train_ehr_->size()) /
                     static_cast<double>(std::max<int64_t>(ehr_batcher_->rows(), 1)));
    if (ehr_batcher_->batches_in_epoch() == 0)
      ROTOR_FAIL("data.train {}: {} {}, fewer than one batch of {}", c.data.train,
                 pack_patients() ? ehr_batcher_->rows() : static_cast<int64_t>(train_ehr_->size()),
                 pack_patients() ? "rows of packed patients" : "patients", c.train.batch_size);
  }
  bool pack_patients() const { return config_.data.packing == Packing::Documents; }

  int64_t vocab_size_ = 0;
  std::vector<std::pair<std::string, std::string>> ehr_files_;  // EHR: vocab.txt
  std::shared_ptr<const data::PackedBlocks> train_blocks_, valid_blocks_, test_blocks_;
  std::shared_ptr<const data::EhrSplit> train_ehr_, valid_ehr_, test_ehr_;
  std::unique_ptr<data::EhrMlmBatcher> ehr_batcher_;
  nn::ParameterStore store_;
  std::unique_ptr<models::BertForMaskedLM> model_;
  std::unique_ptr<data::MlmBatcher> batcher_;
};

}  // namespace

const TaskSlice kMlmSlice{
    .make = make_training_task<MlmTask>,
};

}  // namespace rotor::tasks
