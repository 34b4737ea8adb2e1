// The translation task: token batches of sentence pairs, the encoder-decoder
// and its label-smoothed loss normalized by target tokens.
#include "tasks/task.h"

#include <algorithm>

#include "core/logging.h"
#include "models/model_config.h"
#include "tasks/data.h"
#include "tasks/translation/data.h"
#include "tasks/translation/scores.h"

namespace rotor::tasks {

namespace {

class TranslationTask : public TrainingTask {
 public:
  TranslationTask(const Config& c, Device device, int rank, int world_size)
      : config_(c), data_(load_translation_data(c, true)) {
    model_ = std::make_unique<models::EncoderDecoder>(
        models::transformer_options(c, data_.tokenizer.vocab_size()), store_);
    store_.allocate(device);
    data::BatcherOptions bo;
    bo.max_tokens = c.data.max_tokens;
    bo.seed = static_cast<uint64_t>(c.seed);
    bo.prefetch = static_cast<size_t>(c.data.prefetch);
    bo.rank = rank;
    bo.world_size = world_size;
    batcher_ = std::make_unique<data::TokenBatcher>(data_.train.src, data_.train.tgt, bo);
    device_ = device;
    log().info("data: {} sentence pairs, {} batches of <= {} tokens per epoch on this rank{}, {}",
               data_.train.src->size(), batcher_->batches_in_epoch(0), bo.max_tokens,
               c.data.packing == Packing::Documents
                   ? ", trained variable-length (pairs end to end, no padding)"
                   : "",
               bo.prefetch > 0 ? fmt::format("{} prefetched on a background thread", bo.prefetch)
                               : std::string("made on demand (data.prefetch 0)"));
  }

  nn::ParameterStore& params() override { return store_; }
  std::string tokenizer_path() const override { return data_.spm_path; }
  int64_t vocab_size() const override { return data_.tokenizer.vocab_size(); }
  int64_t skipped() const { return batcher_->skipped(); }

  TaskSums train_micro_batch(const nn::Context& ctx) override {
    data::Batch b = batcher_->next();
    const bool varlen = config_.data.packing == Packing::Documents;
    const models::TranslationBatch mb = to_model_batch(b, device_, varlen);
    // The slots the model computes: padded rows, or one row of real tokens.
    if (ctx.phase_hook)
      ctx.phase_hook->forward_begins(mb.src.size(0), mb.src.size(1), mb.tgt_in.size(1));
    models::LossSums s =
        model_->forward_loss(mb, static_cast<float>(config_.train.label_smoothing), ctx);
    if (ctx.phase_hook) ctx.phase_hook->backward_begins();
    model_->backward(ctx.loss_scale);  // the fp16 loss scale, else 1
    return {s.loss, s.nll, s.tokens, b.src_tokens + b.tgt_tokens, 0, false};
  }

  bool has_split(EvalSplit split) const override { return corpus(split).defined(); }

  ValidationResult evaluate(EvalSplit split, Device device) override {
    const ParallelCorpus& set = corpus(split);
    ROTOR_CHECK(set.defined(), "evaluate: no such data set");
    data::BatcherOptions bo;
    bo.max_tokens = config_.data.max_tokens;
    bo.shuffle = false;
    bo.prefetch = 0;
    data::TokenBatcher batcher(set.src, set.tgt, bo);
    nn::Context ctx;
    ctx.training = false;
    ctx.device = device;
    ValidationResult r;
    const int64_t n = batcher.batches_in_epoch(0);
    for (int64_t i = 0; i < n; ++i) {
      data::Batch b = batcher.next();
      models::LossSums s = model_->forward_loss(
          to_model_batch(b, device), static_cast<float>(config_.train.label_smoothing), ctx);
      r.sums.add({s.loss, s.nll, s.tokens, b.src_tokens + b.tgt_tokens, 0, false});
    }
    const auto& metrics = config_.train.valid_metrics;
    const auto wants = [&](ValidMetric m) {
      return std::find(metrics.begin(), metrics.end(), m) != metrics.end();
    };
    if (wants(ValidMetric::Bleu) || wants(ValidMetric::Chrf)) {
      TranslationScoreOptions so;
      so.bleu = wants(ValidMetric::Bleu);
      so.chrf = wants(ValidMetric::Chrf);
      // The test set is scored whole; validation may be capped.
      so.max_sentences =
          split == EvalSplit::Valid ? static_cast<size_t>(config_.train.valid_max_sentences) : 0;
      so.max_tokens = config_.data.max_tokens;
      so.decode = config_.decode;
      const TranslationScores t =
          score_translations(*model_, data_.tokenizer, *set.src, *set.tgt, so, device);
      if (t.bleu) r.scores.emplace_back(ValidMetric::Bleu, *t.bleu);
      if (t.chrf) r.scores.emplace_back(ValidMetric::Chrf, *t.chrf);
      r.decoded = t.sentences;
      r.decode_seconds = t.seconds;
    }
    return r;
  }

  data::BatchPosition position() const override { return batcher_->position(); }
  void set_position(data::BatchPosition p) override { batcher_->set_position(p); }

 private:
  const ParallelCorpus& corpus(EvalSplit split) const {
    return split == EvalSplit::Valid ? data_.valid : data_.test;
  }

  Config config_;
  TranslationData data_;
  nn::ParameterStore store_;
  std::unique_ptr<models::EncoderDecoder> model_;
  std::unique_ptr<data::TokenBatcher> batcher_;
  Device device_;
};

}  // namespace

const TaskSlice kTranslationSlice{
    .make = make_training_task<TranslationTask>,
};

}  // namespace rotor::tasks
