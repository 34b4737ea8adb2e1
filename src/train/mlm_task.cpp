// The masked-LM task: a monolingual corpus packed into blocks of seq_len
// tokens, masked anew every epoch from Philox, the BERT/RoFormer encoder with
// its MLM head, the loss over masked tokens. Validation uses fixed masks so
// that runs compare.
#include <filesystem>

#include "core/logging.h"
#include "data/mlm.h"
#include "data/prepare.h"
#include "data/sentencepiece.h"
#include "models/bert.h"
#include "train/task.h"
#include "train/translation_data.h"
#include "models/model_config.h"

namespace fs = std::filesystem;

namespace rotor::train {

namespace {

bool is_prepared(const std::string& prefix) {
  return fs::exists(prefix + ".idx") && fs::exists(prefix + ".bin");
}

// data.<key> is a prefix made by `rotor prepare` (PREFIX.idx) or a raw text
// file, binarized into OUTPUT_DIR/data/<key>.
std::string ensure_prepared(const Config& c, const std::string& key, const std::string& path,
                            const std::string& spm) {
  if (is_prepared(path)) return path;
  if (!fs::is_regular_file(path))
    ROTOR_FAIL("data.{}: found neither prepared data ({}.idx) nor a text file {}", key, path, path);
  const std::string out = (fs::path(c.output_dir) / "data" / key).string();
  if (is_prepared(out) && fs::last_write_time(out + ".idx") >= fs::last_write_time(path) &&
      fs::last_write_time(out + ".idx") >= fs::last_write_time(spm))
    return out;
  fs::create_directories(fs::path(out).parent_path());
  data::PrepareOptions o;
  o.spm_model = spm;
  o.src = path;
  o.output_prefix = out;
  o.max_len = 0;  // blocks are packed from the stream: keep every non-empty line
  o.max_len_ratio = 0;
  o.min_len = 1;
  data::PrepareStats stats = data::prepare_corpus(o);
  log().info("binarized {} -> {}: {}", path, out, stats.summary());
  return out;
}

std::string ensure_tokenizer(const Config& c) {
  const std::string spm = tokenizer_path(c);
  if (fs::exists(spm)) return spm;
  if (c.data.train.empty() || is_prepared(c.data.train) || !fs::is_regular_file(c.data.train))
    ROTOR_FAIL(
        "tokenizer {} not found (data.spm_model); it can only be trained from a raw text "
        "data.train",
        spm);
  fs::create_directories(fs::path(spm).parent_path());
  data::SpmTrainOptions o;
  o.inputs = {c.data.train};
  o.model_prefix = spm.size() > 6 && spm.substr(spm.size() - 6) == ".model"
                       ? spm.substr(0, spm.size() - 6)
                       : spm;
  o.vocab_size = c.data.vocab_size;
  o.model_type = std::string(to_string(c.data.spm_model_type));
  o.character_coverage = c.data.character_coverage;
  o.input_sentence_size = 2000000;
  o.user_defined_symbols = {"[MASK]", "[CLS]", "[SEP]"};  // ids 4, 5, 6
  log().info("training a {} SentencePiece model ({} pieces, with [MASK] [CLS] [SEP]) on {}",
             o.model_type, o.vocab_size, c.data.train);
  data::train_sentencepiece(o);
  return spm;
}

TaskSums to_sums(const models::MlmSums& s, const models::MlmBatch& b) {
  return {s.loss, s.loss, s.tokens, b.tokens, s.correct, s.has_correct};
}

class MlmTask : public TrainingTask {
 public:
  MlmTask(const Config& c, Device device, int rank, int world_size) : config_(c), device_(device) {
    spm_path_ = ensure_tokenizer(c);
    tokenizer_ = data::Tokenizer::load(spm_path_);
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    auto special = data::MlmSpecialIds::from_tokenizer(tokenizer_);
    masking_ = data::MaskingOptions{c.data.mask_prob,         c.data.mask_token_prob,
                                    c.data.random_token_prob, static_cast<uint64_t>(c.seed),
                                    tokenizer_.vocab_size(),  special};
    auto open = [&](const std::string& key, const std::string& path) {
      auto corpus = std::make_shared<const data::MmapCorpus>(
          data::MmapCorpus::open(ensure_prepared(c, key, path, spm_path_)));
      return std::make_shared<const data::PackedBlocks>(corpus, c.data.seq_len, special.cls,
                                                        special.sep);
    };
    train_blocks_ = open("train", c.data.train);
    if (!c.data.valid.empty()) valid_blocks_ = open("valid", c.data.valid);
    model_ = std::make_unique<models::BertForMaskedLM>(
        models::bert_config(c, tokenizer_.vocab_size()), store_);
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
    models::MlmBatch b = batcher_->next().to(device_);
    if (ctx.phase_hook) ctx.phase_hook->forward_begins(b.input_ids.size(0), b.input_ids.size(1), 0);
    models::MlmSums s = model_->forward_loss(b, ctx);
    if (ctx.phase_hook) ctx.phase_hook->backward_begins();
    model_->backward(ctx.loss_scale);  // the fp16 loss scale, else 1
    return to_sums(s, b);
  }

  bool has_valid() const override { return valid_blocks_ != nullptr; }

  TaskSums validate(Device device) override {
    data::MlmBatcherOptions bo;
    bo.batch_size = config_.train.batch_size;
    bo.shuffle = false;
    bo.fixed_masking = true;  // the same masks in every validation of every run
    bo.drop_last = false;
    data::MlmBatcher batcher(valid_blocks_, data::Masker(masking_), bo);
    nn::Context ctx;
    ctx.training = false;
    ctx.device = device;
    TaskSums total;
    for (int64_t i = 0, n = batcher.batches_in_epoch(); i < n; ++i) {
      models::MlmBatch b = batcher.next().to(device);
      total.add(to_sums(model_->forward_loss(b, ctx), b));
    }
    return total;
  }

  data::BatchPosition position() const override { return batcher_->position(); }
  void set_position(data::BatchPosition p) override { batcher_->set_position(p); }

 private:
  Config config_;
  Device device_;
  std::string spm_path_;
  data::Tokenizer tokenizer_;
  data::MaskingOptions masking_;
  std::shared_ptr<const data::PackedBlocks> train_blocks_, valid_blocks_;
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
