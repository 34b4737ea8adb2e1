// Causal-LM data (task lm): a monolingual corpus read as one token stream,
// cut into blocks of seq_len inputs with their next-token targets, batched
// like the masked-LM blocks (data/batch_plan.h: shuffled per epoch, sharded,
// resumable exactly).
//
// The stream (deterministic, no randomness):
//   s_0 </s> s_1 </s> s_2 </s> ...
// every sentence (line) followed by the end-of-text token, the tokenizer's
// </s> (a trailing </s> stored by `rotor prepare --append-eos` is that
// token, not a second one; empty sentences are skipped). An eos_id < 0
// means no end-of-text token: the sentences follow one another directly (a
// byte LM's corpus, whose sentences keep their line breaks). Block i holds the
// stream's tokens [i * L, i * L + L + 1) for L = seq_len: inputs are the
// first L, targets the last L (each input's next token). Blocks therefore
// overlap by one token and their inputs do not: every token but the first
// of the stream is a target of exactly one block. A training set keeps only
// full blocks; an evaluation set (keep_partial) also the last, shorter one,
// so that every target of the set is scored once. Only the block starts are
// stored (sentence, offset): 16 bytes per block.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/batch_plan.h"
#include "data/batcher.h"  // BatchPosition
#include "data/corpus.h"
#include "data/sentencepiece.h"  // kPadId

namespace rotor::data {

class LmBlocks {
 public:
  // Throws rotor::Error when seq_len < 1 or the stream has no block (fewer
  // than seq_len + 1 tokens without keep_partial, fewer than 2 with it),
  // naming the corpus as `name` ("data.train notes.txt") when given, else by
  // its prefix.
  LmBlocks(std::shared_ptr<const MmapCorpus> corpus, int64_t seq_len, int32_t eos_id,
           bool keep_partial, const std::string& name = "");
  int64_t size() const { return static_cast<int64_t>(starts_.size()); }
  int64_t seq_len() const { return seq_len_; }
  int64_t stream_tokens() const { return stream_tokens_; }  // sentences + end-of-text tokens
  // The targets of all blocks (each stream token but the first at most once).
  int64_t target_tokens() const { return target_tokens_; }
  // Block i (< size()): its stream tokens, at most seq_len + 1 (inputs are
  // all but the last, targets all but the first).
  void block_into(int64_t i, std::vector<int32_t>& out) const;
  std::vector<int32_t> block(int64_t i) const;

 private:
  struct Start {
    uint64_t sentence;  // the sentence the block starts in
    uint64_t offset;    // token offset in it (== content length: its </s>)
  };
  int64_t content_length(uint64_t sentence) const;  // tokens without a trailing </s>
  std::shared_ptr<const MmapCorpus> corpus_;
  int64_t seq_len_;
  int32_t eos_;
  std::vector<Start> starts_;
  int64_t stream_tokens_ = 0, target_tokens_ = 0;
};

// One LM batch on the CPU (tasks/data.h makes model inputs of it).
struct LmHostBatch {
  Tensor input_ids;    // i32 [B, T], right-padded with pad
  Tensor targets;      // i32 [B, T], pad where an input has no next token
  int64_t tokens = 0;  // non-pad targets
};

// Batch size (blocks), shuffling, sharding; training drops the last, partial
// global batch, evaluation sets drop_last and shuffle false.
struct LmBatcherOptions : BatchPlanOptions {
  int32_t pad_id = kPadId;
  LmBatcherOptions() {
    batch_size = 32;
    stream_layer = 4;
    drop_last = true;
  }
};

class LmBatcher {
 public:
  LmBatcher(std::shared_ptr<const LmBlocks> blocks, LmBatcherOptions options);
  LmHostBatch next();
  BatchPosition position() const { return plan_.position(); }
  void set_position(BatchPosition p) { plan_.set_position(p); }
  int64_t batches_in_epoch() const { return plan_.batches_in_epoch(); }
  std::vector<std::vector<int64_t>> epoch_plan(uint64_t epoch) const {  // block ids per batch
    return plan_.epoch_plan(epoch);
  }
  // The batch of these block ids (tests, evaluation).
  LmHostBatch make_batch(const std::vector<int64_t>& block_ids) const;

 private:
  std::shared_ptr<const LmBlocks> blocks_;
  LmBatcherOptions opt_;
  BatchPlan plan_;
};

}  // namespace rotor::data
