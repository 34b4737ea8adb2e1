// Masked-LM data: packing a monolingual corpus into fixed-length blocks,
// batching the blocks, and BERT's dynamic masking.
//
// Special tokens. The tokenizer must define the user symbols [CLS], [SEP] and
// [MASK] (rotor trains it with user_defined_symbols "[MASK],[CLS],[SEP]", so
// [MASK] = 4, [CLS] = 5, [SEP] = 6, after <pad> 0, <unk> 1, <s> 2, </s> 3).
// MlmSpecialIds::from_tokenizer looks them up with piece_to_id, so another
// order works too; a missing one is a rotor::Error.
//
// Packing (deterministic, no randomness): the corpus is read as one stream
//   s_0 [SEP] s_1 [SEP] s_2 [SEP] ...
// (a trailing </s> stored by `rotor prepare --append-eos` is replaced by the
// [SEP]; empty sentences are skipped) and cut into consecutive chunks of
// seq_len - 1 tokens; block i is [CLS] + chunk i. Every block has exactly
// seq_len tokens except possibly the last (>= 2 tokens). Chunks may cut a
// sentence (as Hugging Face run_mlm's group_texts does); [SEP] marks sentence
// ends. Only the block starts are stored (sentence, offset): 16 bytes per
// block, so a multi-billion-token corpus packs in memory.
//
// Masking (BERT, Devlin et al. 2019): every maskable token is selected with
// probability mask_prob; a selected token becomes [MASK] with probability
// mask_token_prob, a random maskable token with random_token_prob, and stays
// unchanged otherwise; the loss is taken on every selected token. NEVER
// selected: <pad>, <unk>, <s>, </s>, [CLS], [SEP], [MASK] (and any other id in
// MlmSpecialIds::never_mask); random replacements are drawn among the other
// ids only, unless random_special (data.random_token_special: true) draws
// them from the whole vocabulary, specials included, as Hugging Face's
// DataCollatorForLanguageModeling does. The random numbers for token t of block b are elements
// 4 * (b * seq_len + t) + {0, 1, 2} of the Philox stream
// rng_stream(round, 0, RngPurpose::Masking, 0) under the run's seed: a pure
// function of (seed, round, block id, position). The batcher uses round =
// epoch (dynamic masking, RoBERTa: each epoch masks every block afresh), so
// the masks do not depend on the rank count, the batch order or the step,
// and a resumed run masks exactly as an uninterrupted one. Validation uses
// fixed masking (round kFixedMaskingRound in every epoch): the same masks in
// every validation and every run.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/batch_plan.h"
#include "data/batcher.h"  // BatchPosition, ShardRemainder
#include "data/corpus.h"
#include "data/row_packer.h"  // TextDocuments
#include "data/sentencepiece.h"

namespace rotor::data {

struct MlmSpecialIds {
  int32_t pad = kPadId, cls = -1, sep = -1, mask = -1;
  std::vector<int32_t> never_mask;  // ids never selected nor drawn as replacements
  // [CLS], [SEP], [MASK] via piece_to_id; never_mask = pad, unk, bos, eos, cls, sep, mask.
  static MlmSpecialIds from_tokenizer(const Tokenizer& tokenizer);
  // The default layout (user symbols "[MASK],[CLS],[SEP]"): mask 4, cls 5, sep 6.
  static MlmSpecialIds standard();
};

// ---- packing ---------------------------------------------------------------

// Packed documents (MlmPacking::Documents, data.packing documents): every
// non-empty sentence (line) is a document, laid out as [CLS] tokens [SEP]; a
// document of more than seq_len - 2 tokens is split into pieces of seq_len
// - 2 tokens, each with its own [CLS] and [SEP]. Pieces fill blocks greedily
// in corpus order (a piece that does not fit the rest of a block starts the
// next one). Every token carries its position in its piece (from 0) and the
// piece's index in the block; attention stays within a piece
// (nn::DocLayout). A piece is masked on its own, with its global index as the
// masking block id, so its masks do not depend on what it is packed with.
// 16 bytes per piece. With TextDocuments::paragraphs
// (data.document_separator: blank_line) a document is a paragraph, its
// sentences joined by [SEP] as in the stream: [CLS] s1 [SEP] s2 ... [SEP].
enum class MlmPacking { Stream, Documents };

class PackedBlocks {
 public:
  // Throws rotor::Error when seq_len < 2 (3 for documents) or the corpus has
  // no tokens, naming the corpus as `name` when given, else by its prefix.
  PackedBlocks(std::shared_ptr<const MmapCorpus> corpus, int64_t seq_len, int32_t cls_id,
               int32_t sep_id, MlmPacking packing = MlmPacking::Stream,
               const std::string& name = "", TextDocuments documents = {});
  bool paragraphs() const { return documents_kind_.paragraphs; }
  int64_t size() const {
    return static_cast<int64_t>(packing_ == MlmPacking::Documents ? block_pieces_.size() - 1
                                                                  : starts_.size());
  }
  int64_t seq_len() const { return seq_len_; }
  MlmPacking packing() const { return packing_; }
  int64_t stream_tokens() const { return stream_tokens_; }  // sentences + separators
  // Documents: how many documents, how many were split, and the pieces.
  int64_t documents() const { return documents_; }
  int64_t split_documents() const { return split_; }
  int64_t pieces() const { return static_cast<int64_t>(pieces_.size()); }
  // Block i (< size()): [CLS] + its chunk of the stream, at most seq_len ids;
  // for documents its pieces one after another.
  std::vector<int32_t> block(int64_t i) const;
  void block_into(int64_t i, std::vector<int32_t>& out) const;
  // Documents: block i's pieces in order, each its global index and length
  // ([CLS] and [SEP] included); their lengths sum to block i's size.
  struct PieceSpan {
    uint64_t id;
    int64_t length;
  };
  std::vector<PieceSpan> block_pieces(int64_t i) const;

 private:
  struct Start {
    uint64_t sentence;  // first sentence the chunk touches
    uint64_t offset;    // token offset in it (== content length: the [SEP])
  };
  struct Piece {
    uint64_t sentence;  // the sentence of its first content token
    uint32_t offset;    // that token's place in the sentence (+ its [SEP])
    uint32_t tokens;    // content tokens (the piece adds [CLS] and [SEP]), read on
                        // across a paragraph's sentences, a [SEP] after each
  };
  int64_t content_length(uint64_t sentence) const;  // tokens without a trailing </s>
  void pack_documents(const std::string& name);
  std::shared_ptr<const MmapCorpus> corpus_;
  int64_t seq_len_;
  int32_t cls_, sep_;
  MlmPacking packing_;
  TextDocuments documents_kind_;
  std::vector<Start> starts_;           // Stream
  std::vector<Piece> pieces_;           // Documents
  std::vector<uint64_t> block_pieces_;  // Documents: block i's pieces from [i] to [i + 1]
  int64_t stream_tokens_ = 0, documents_ = 0, split_ = 0;
};

// ---- masking ---------------------------------------------------------------

struct MaskingOptions {
  double mask_prob = 0.15;
  double mask_token_prob = 0.8;
  double random_token_prob = 0.1;
  uint64_t seed = 1;
  int32_t vocab_size = 0;
  MlmSpecialIds special;
  bool random_special = false;  // random replacements may be specials (any id < vocab_size)
};

inline constexpr uint64_t kFixedMaskingRound = 0xFFFFFFFFull;  // validation masks

class Masker {
 public:
  explicit Masker(MaskingOptions options);  // throws on bad probabilities / ids
  // Masks `ids` in place (a block of at most seq_len tokens whose id in the
  // packing is `block`); appends the positions of the selected tokens (t,
  // within the block) and their original ids.
  void mask(std::span<int32_t> ids, uint64_t round, uint64_t block, int64_t seq_len,
            std::vector<int32_t>& positions, std::vector<int32_t>& targets) const;
  bool maskable(int32_t id) const {
    return id >= 0 && id < vocab_ && !never_[static_cast<size_t>(id)];
  }
  const MaskingOptions& options() const { return opt_; }

 private:
  MaskingOptions opt_;
  int32_t vocab_;
  std::vector<uint8_t> never_;        // [V]
  std::vector<int32_t> replacements;  // maskable ids
};

// ---- batching --------------------------------------------------------------

// One masked-LM batch on the CPU (tasks/data.h makes model inputs of it).
struct MlmHostBatch {
  Tensor input_ids;           // i32 [B, T]: masked inputs, right-padded with pad
  Tensor token_type_ids;      // i32 [B, T], or undefined = every token in segment 0
  Tensor lengths;             // i32 [B]: non-pad tokens per row
  Tensor age_ids;             // i32 [B, T] (EHR, data/ehr_mlm.h), or undefined
  Tensor position_ids;        // i32 [B, T]: visit indices (EHR), or undefined
  Tensor masked_positions;    // i32 [M]: flat indices b * T + t of the tokens to predict
  Tensor masked_targets;      // i32 [M]: their original ids
  int64_t tokens = 0;         // non-pad tokens
  int64_t masked_tokens = 0;  // M
  // Packed documents: each token's document index in its row, host [B*T]
  // (-1: padding); empty: none (models::EncoderInputs).
  std::vector<int32_t> documents;
};

// The host batch of B rows right-padded to T: input i32 [B * T], lengths [B],
// the masked flat positions b * T + t and their targets [M]; tokens is the
// sum of the lengths. The optional channels (token types, ages, positions)
// are the caller's to add.
MlmHostBatch mlm_host_batch(const std::vector<int32_t>& input, const std::vector<int32_t>& lengths,
                            const std::vector<int32_t>& positions,
                            const std::vector<int32_t>& targets, int64_t B, int64_t T);

// Batch size (blocks), shuffling, sharding (data/batch_plan.h); training
// drops the last, partial global batch, validation sets drop_last false.
struct MlmBatcherOptions : BatchPlanOptions {
  bool fixed_masking = false;  // true: round kFixedMaskingRound in every epoch (validation)
  MlmBatcherOptions() {
    batch_size = 64;
    stream_layer = 2;
    drop_last = true;
  }
};

// Batches of blocks as data/batch_plan.h lays out an epoch (the shuffle
// stream keyed by layer 2), masked with the epoch as the masking round
// (kFixedMaskingRound with fixed_masking).
class MlmBatcher {
 public:
  MlmBatcher(std::shared_ptr<const PackedBlocks> blocks, const Masker& masker,
             MlmBatcherOptions options);

  // A CPU batch: input ids [B, T] (T = the longest block, padded with pad),
  // lengths, masked positions (flat b * T + t) and targets; no token types
  // (segment 0).
  MlmHostBatch next();
  BatchPosition position() const { return plan_.position(); }
  void set_position(BatchPosition p) { plan_.set_position(p); }

  std::vector<std::vector<int64_t>> epoch_plan(uint64_t epoch) const {  // block ids per batch
    return plan_.epoch_plan(epoch);
  }
  int64_t batches_in_epoch() const { return plan_.batches_in_epoch(); }
  // The batch of these block ids, masked with `round` (tests, evaluation).
  MlmHostBatch make_batch(const std::vector<int64_t>& block_ids, uint64_t round) const;
  const MlmBatcherOptions& options() const { return opt_; }

 private:
  std::shared_ptr<const PackedBlocks> blocks_;
  Masker masker_;
  MlmBatcherOptions opt_;
  BatchPlan plan_;
};

}  // namespace rotor::data
