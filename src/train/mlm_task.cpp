// The masked-LM task: a monolingual corpus packed into blocks of seq_len
// tokens, masked anew every epoch from Philox, the BERT/RoFormer encoder with
// its MLM head, the loss over masked tokens. Validation uses fixed masks so
// that runs compare (train/scoring.h, shared with `rotor eval`).
#include "core/logging.h"
#include "data/mlm.h"
#include "data/sentencepiece.h"
#include "models/bert.h"
#include "models/model_config.h"
#include "train/scoring.h"
#include "train/task.h"
#include "train/task_data.h"

namespace rotor::train {

namespace {

class MlmTask : public TrainingTask {
 public:
  MlmTask(const Config& c, Device device, int rank, int world_size) : config_(c), device_(device) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    spm_path_ = ensure_tokenizer(c);
    tokenizer_ = data::Tokenizer::load(spm_path_);
    masking_ = mlm_masking(c, tokenizer_);
    const data::MlmSpecialIds& special = masking_.special;
    auto open = [&](const std::string& key) {
      auto corpus = open_corpus(prepared_prefix(c, key, spm_path_), tokenizer_);
      return std::make_shared<const data::PackedBlocks>(corpus, c.data.seq_len, special.cls,
                                                        special.sep);
    };
    train_blocks_ = open("train");
    if (!c.data.valid.empty()) valid_blocks_ = open("valid");
    if (!c.data.test.empty()) test_blocks_ = open("test");
    model_ = std::make_unique<models::BertForMaskedLM>(
        models::bert_options(c, tokenizer_.vocab_size()), store_);
    store_.allocate(device);
    data::MlmBatcherOptions bo;
    bo.batch_size = c.train.batch_size;
    bo.seed = static_cast<uint64_t>(c.seed);
    bo.rank = rank;
    bo.world_size = world_size;
    batcher_ = std::make_unique<data::MlmBatcher>(train_blocks_, data::Masker(masking_), bo);
    if (batcher_->batches_in_epoch() == 0)
      ROTOR_FAIL("data.train {}: {} blocks of {} tokens, fewer than one batch of {}", c.data.train,
                 train_blocks_->size(), c.data.seq_len, c.train.batch_size);
  }

  nn::ParameterStore& params() override { return store_; }
  std::string tokenizer_path() const override { return spm_path_; }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }

  TaskSums train_micro_batch(const nn::Context& ctx) override {
    models::MlmBatch b = to_model_batch(batcher_->next(), device_);
    if (ctx.phase_hook) ctx.phase_hook->forward_begins(b.input_ids.size(0), b.input_ids.size(1), 0);
    models::MlmSums s = model_->forward_loss(b, ctx);
    if (ctx.phase_hook) ctx.phase_hook->backward_begins();
    model_->backward(ctx.loss_scale);  // the fp16 loss scale, else 1
    return to_sums(s, b);
  }

  bool has_split(EvalSplit split) const override { return blocks(split) != nullptr; }

  ValidationResult evaluate(EvalSplit split, Device device) override {
    ROTOR_CHECK(blocks(split) != nullptr, "evaluate: no such data set");
    nn::Context ctx;
    ctx.training = false;
    ctx.device = device;
    return score_mlm(*model_, blocks(split), masking_, config_.train.batch_size, ctx);
  }

  data::BatchPosition position() const override { return batcher_->position(); }
  void set_position(data::BatchPosition p) override { batcher_->set_position(p); }

 private:
  Config config_;
  Device device_;
  std::string spm_path_;
  data::Tokenizer tokenizer_;
  data::MaskingOptions masking_;
  std::shared_ptr<const data::PackedBlocks> blocks(EvalSplit split) const {
    return split == EvalSplit::Valid ? valid_blocks_ : test_blocks_;
  }

  std::shared_ptr<const data::PackedBlocks> train_blocks_, valid_blocks_, test_blocks_;
  nn::ParameterStore store_;
  std::unique_ptr<models::BertForMaskedLM> model_;
  std::unique_ptr<data::MlmBatcher> batcher_;
};

}  // namespace

std::unique_ptr<TrainingTask> make_mlm_task(const Config& config, Device device, int rank,
                                            int world_size) {
  return std::make_unique<MlmTask>(config, device, rank, world_size);
}

}  // namespace rotor::train
