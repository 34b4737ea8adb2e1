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
//
// Packed documents (LmPacking::Documents, data.packing: documents): every
// non-empty sentence is a document, its tokens and (with eos_id >= 0) the
// end-of-text token; a document of m tokens gives m - 1 (input, next token)
// pairs, so its first token is never a target and nothing is predicted
// across documents. A document of more than seq_len pairs is split into
// pieces of seq_len pairs (overlapping by one token, as stream blocks do),
// each a document of its own. Pieces fill blocks greedily in corpus order: a
// piece that does not fit the rest of the block starts the next one, and
// the rest is padding. Every token of a block carries its position within
// its piece (from 0) and its piece's index in the block (ops see a
// block-diagonal mask, nn::DocLayout). Every block is kept, for training
// and evaluation alike. 24 bytes per piece.
//
// With TextDocuments::paragraphs (data.document_separator: blank_line) a
// document is a paragraph instead: the non-blank sentences between blank
// ones, end to end with their end-of-text tokens (with the byte tokenizer,
// their own line breaks). A sentence is blank when it has no content or
// only tokens of blank_tokens (the byte tokenizer's spaces, tabs, carriage
// returns and line breaks).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "data/batch_plan.h"
#include "data/batcher.h"  // BatchPosition
#include "data/corpus.h"
#include "data/row_packer.h"     // TextDocuments
#include "data/sentencepiece.h"  // kPadId

namespace rotor::data {

enum class LmPacking { Stream, Documents };

class LmBlocks {
 public:
  // Throws rotor::Error when seq_len < 1 or the stream has no block (fewer
  // than seq_len + 1 tokens without keep_partial, fewer than 2 with it),
  // naming the corpus as `name` ("data.train notes.txt") when given, else by
  // its prefix.
  LmBlocks(std::shared_ptr<const MmapCorpus> corpus, int64_t seq_len, int32_t eos_id,
           bool keep_partial, const std::string& name = "", LmPacking packing = LmPacking::Stream,
           TextDocuments documents = {});
  // Documents: whether they are paragraphs (else lines).
  bool paragraphs() const { return documents_kind_.paragraphs; }
  LmPacking packing() const { return packing_; }
  // Documents: how many documents there were, and how many were split.
  int64_t documents() const { return documents_; }
  int64_t split_documents() const { return split_; }
  int64_t pieces() const { return static_cast<int64_t>(pieces_.size()); }
  int64_t size() const {
    return static_cast<int64_t>(packing_ == LmPacking::Documents ? block_pieces_.size() - 1
                                                                 : starts_.size());
  }
  int64_t seq_len() const { return seq_len_; }
  int64_t stream_tokens() const { return stream_tokens_; }  // sentences + end-of-text tokens
  // The targets of all blocks (each stream token but the first at most once).
  int64_t target_tokens() const { return target_tokens_; }
  // Block i (< size()): its stream tokens, at most seq_len + 1 (inputs are
  // all but the last, targets all but the first).
  void block_into(int64_t i, std::vector<int32_t>& out) const;
  std::vector<int32_t> block(int64_t i) const;
  // Block i as (input, target) pairs, at most seq_len: for Documents each
  // piece's pairs in order, with the position of each input in its piece
  // and the piece's index in the block; for Stream the block's pairs, with
  // positions and segments left empty (the stream needs neither).
  void pairs_into(int64_t i, std::vector<int32_t>& inputs, std::vector<int32_t>& targets,
                  std::vector<int32_t>& positions, std::vector<int32_t>& segments) const;

 private:
  struct Start {
    uint64_t sentence;  // the sentence the block starts in
    uint64_t offset;    // token offset in it (== content length: its </s>)
  };
  struct Piece {
    uint64_t sentence;  // the sentence its first token is in
    uint32_t offset;    // that token's place in the sentence (+ </s>)
    uint32_t tokens;    // >= 2: tokens - 1 pairs, read on through the document's sentences
  };
  void pack_documents(const std::string& name);
  int64_t content_length(uint64_t sentence) const;  // tokens without a trailing </s>
  bool blank(uint64_t sentence) const;              // a paragraph separator
  std::shared_ptr<const MmapCorpus> corpus_;
  int64_t seq_len_;
  int32_t eos_;
  LmPacking packing_;
  TextDocuments documents_kind_;
  std::vector<Start> starts_;           // Stream
  std::vector<Piece> pieces_;           // Documents
  std::vector<uint64_t> block_pieces_;  // Documents: block i's pieces from [i] to [i + 1]
  int64_t stream_tokens_ = 0, target_tokens_ = 0, documents_ = 0, split_ = 0;
};

// One LM batch on the CPU (tasks/data.h makes model inputs of it).
struct LmHostBatch {
  Tensor input_ids;    // i32 [B, T], right-padded with pad
  Tensor targets;      // i32 [B, T], pad where an input has no next token
  int64_t tokens = 0;  // non-pad targets
  // Documents only (empty / undefined for Stream): each token's document
  // index in its row (-1 for padding), host [B*T], and its position in its
  // document, i32 [B, T] (0 for padding).
  std::vector<int32_t> segments;
  Tensor positions;
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
