// The causal-LM task: a monolingual corpus read as one stream (an
// end-of-text token, the tokenizer's </s>, after every line) cut into blocks
// of data.seq_len inputs with their next tokens as targets, shuffled per
// epoch; the decoder-only model; the cross-entropy of every next token.
// With a byte tokenizer (data.tokenizer bytes) the stream is the text's
// bytes exactly: line breaks are byte tokens and no end-of-text token is
// added (the corpus keeps them, tasks/data.cpp).
// Validation scores every token of the set once, in non-overlapping blocks
// (each token sees only the context of its own block), and reports the loss
// per token, its perplexity and bits per UTF-8 byte of the text
// (tasks/scoring.h, shared with `rotor eval`): for bytes exactly the
// bits per scored byte (every byte of the set but the first).
#include "tasks/task.h"

#include <algorithm>
#include <filesystem>

#include "core/logging.h"
#include "data/lm.h"
#include "data/sentencepiece.h"
#include "models/decoder_lm.h"
#include "models/model_config.h"
#include "tasks/data.h"
#include "tasks/scoring.h"

namespace rotor::tasks {

namespace {

struct EvalSet {
  std::shared_ptr<const data::LmBlocks> blocks;
  int64_t bytes = 0;  // UTF-8 bytes of its text (bytes: those scored)
};

// What data.packing documents made of a set: the documents, how many a
// block holds and how many were longer than a block (split).
void log_packing(const data::LmBlocks& blocks, const std::string& name) {
  if (blocks.packing() != data::LmPacking::Documents) return;
  log().info(
      "{}: {} documents ({}), {} split (longer than a block), {} pieces in {} blocks of up to "
      "{} tokens ({:.2f} a block); {} targets",
      name, blocks.documents(), blocks.paragraphs() ? "paragraphs" : "lines",
      blocks.split_documents(), blocks.pieces(), blocks.size(), blocks.seq_len(),
      static_cast<double>(blocks.pieces()) /
          static_cast<double>(std::max<int64_t>(blocks.size(), 1)),
      blocks.target_tokens());
}

class LmTask : public TrainingTask {
 public:
  LmTask(const Config& c, Device device, int rank, int world_size) : config_(c), device_(device) {
    if (c.data.train.empty()) ROTOR_FAIL("data.train is required for training");
    spm_path_ = ensure_tokenizer(c);
    tokenizer_ = data::Tokenizer::load(spm_path_);
    auto open = [&](const std::string& key, bool eval) {
      const std::string prefix = prepared_prefix(c, key, spm_path_);
      auto corpus = open_corpus(prefix, tokenizer_);
      // Messages name the user's file, and what it was binarized into.
      const data::CorpusSource source = corpus_source(c, key);
      const std::string name = source.path == prefix ? fmt::format("{} {}", source.key, source.path)
                                                     : fmt::format("{} {} (binarized as {})",
                                                                   source.key, source.path, prefix);
      EvalSet set;
      if (!eval) {
        set.blocks = std::make_shared<const data::LmBlocks>(
            corpus, c.data.seq_len, lm_end_of_text(tokenizer_), false, name, lm_packing(c),
            text_documents(c, tokenizer_));
        log_packing(*set.blocks, name);
        return set;
      }
      set.blocks = lm_eval_blocks(corpus, c.data.seq_len, tokenizer_, name, lm_packing(c),
                                  text_documents(c, tokenizer_));
      log_packing(*set.blocks, name);
      set.bytes =
          lm_scored_bytes(tokenizer_, *set.blocks, [&] { return text_bytes(key, *corpus); });
      return set;
    };
    train_ = open("train", false).blocks;
    if (!c.data.valid.empty()) valid_ = open("valid", true);
    if (!c.data.test.empty()) test_ = open("test", true);
    model_ =
        std::make_unique<models::DecoderLM>(models::lm_options(c, tokenizer_.vocab_size()), store_);
    store_.allocate(device);
    const auto bo = batcher_options<data::LmBatcherOptions>(c, rank, world_size);
    batcher_ = std::make_unique<data::LmBatcher>(train_, bo);
    if (batcher_->batches_in_epoch() == 0)
      ROTOR_FAIL("data.train {}: {} blocks of {} tokens, fewer than one batch of {}", c.data.train,
                 train_->size(), c.data.seq_len, c.train.batch_size);
  }

  nn::ParameterStore& params() override { return store_; }
  std::string tokenizer_path() const override { return spm_path_; }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }

  TaskSums train_micro_batch(const nn::Context& ctx) override {
    models::LmBatch b = to_model_batch(batcher_->next(), device_);
    if (ctx.phase_hook) ctx.phase_hook->forward_begins(b.input_ids.size(0), b.input_ids.size(1), 0);
    models::LmSums s = model_->forward_loss(b, ctx);
    if (ctx.phase_hook) ctx.phase_hook->backward_begins();
    model_->backward(ctx.loss_scale);  // the fp16 loss scale, else 1
    return to_sums(s, b);
  }

  bool has_split(EvalSplit split) const override { return set(split).blocks != nullptr; }

  ValidationResult evaluate(EvalSplit split, Device device) override {
    const EvalSet& es = set(split);
    ROTOR_CHECK(es.blocks != nullptr, "evaluate: no such data set");
    nn::Context ctx;
    ctx.training = false;
    ctx.device = device;
    return score_lm(*model_, es.blocks, es.bytes, config_.train.batch_size, ctx);
  }

  data::BatchPosition position() const override { return batcher_->position(); }
  void set_position(data::BatchPosition p) override { batcher_->set_position(p); }

 private:
  const EvalSet& set(EvalSplit split) const { return split == EvalSplit::Valid ? valid_ : test_; }

  // The UTF-8 bytes of data.<key>'s text: the raw file's size, or for a
  // prepared prefix its lines decoded, each with its newline. At least 1.
  int64_t text_bytes(const std::string& key, const data::MmapCorpus& corpus) const {
    const data::CorpusSource source = corpus_source(config_, key);
    int64_t bytes = 0;
    if (!source.is_prepared()) {
      for (const std::string& f : source.raw_files())
        bytes += static_cast<int64_t>(std::filesystem::file_size(f));
    } else {
      for (size_t i = 0; i < corpus.size(); ++i)
        bytes += static_cast<int64_t>(tokenizer_.decode(corpus.sentence(i)).size()) + 1;
    }
    return std::max<int64_t>(bytes, 1);
  }

  Config config_;
  Device device_;
  std::string spm_path_;
  data::Tokenizer tokenizer_;
  std::shared_ptr<const data::LmBlocks> train_;
  EvalSet valid_, test_;
  nn::ParameterStore store_;
  std::unique_ptr<models::DecoderLM> model_;
  std::unique_ptr<data::LmBatcher> batcher_;
};

}  // namespace

const TaskSlice kLmSlice{
    .make = make_training_task<LmTask>,
};

}  // namespace rotor::tasks
