// TokenBatcher: padded, length-bucketed, token-bounded batches over a
// binarized parallel (or monolingual) corpus, deterministic from (seed, epoch),
// sharded across data-parallel ranks, prefetched on a background thread, and
// resumable exactly from a saved BatchPosition.
//
// One epoch, identical on every rank:
//   1. the sentences that fit alone are shuffled (Philox, stream (epoch, Shuffle));
//   2. sorted by (source length, target length), globally or within chunks of
//      `bucket_size` shuffled sentences; ties keep the shuffled order;
//   3. cut greedily into batches whose PADDED size fits on each side:
//        B * max(source length) <= max_tokens  and  B * max(target length) <= max_tokens
//      (lengths include the eos / bos added below);
//   4. the batch list is shuffled (a second Philox stream);
//   5. rank r of w takes batches r, r + w, r + 2w, ...; with Pad every rank takes
//      ceil(n / w) (wrapping around to the start), with Drop floor(n / w).
// Sentences longer than max_tokens on their own are skipped (counted in skipped()).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "data/corpus.h"

namespace rotor::data {

// Where the batch stream is: the next batch is batch `batch_index` of this
// rank's batches in epoch `epoch`. Save it in a checkpoint, restore with set_position.
struct BatchPosition {
  uint64_t epoch = 0;
  uint64_t batch_index = 0;
  bool operator==(const BatchPosition&) const = default;
};

enum class ShardRemainder { Pad, Drop };

struct BatcherOptions {
  int64_t max_tokens = 4096;  // per side, padding included
  int64_t max_sentences = 0;  // 0 = no limit on B
  uint64_t seed = 1;
  bool shuffle = true;      // false: global length order, batches in order (validation)
  int64_t bucket_size = 0;  // 0 = sort globally; else sort within chunks of this many
  int rank = 0;
  int world_size = 1;
  ShardRemainder remainder = ShardRemainder::Pad;
  // Append </s> to each source sentence (unless it already ends with one).
  bool src_append_eos = true;
  size_t prefetch = 4;  // batches the background thread keeps ready; 0 = no thread
};

struct Batch {
  BatchPosition position;            // this batch's place in the stream
  std::vector<int64_t> indices;      // [B] sentence ids in the corpus
  Tensor src;                        // i32 [B, S]: x (</s>), padded with 0
  Tensor tgt_in;                     // i32 [B, T]: <s> y, padded (parallel only)
  Tensor tgt_out;                    // i32 [B, T]: y </s>, padded (parallel only)
  std::vector<int32_t> src_lengths;  // [B] non-pad tokens per row of src
  std::vector<int32_t> tgt_lengths;  // [B] non-pad tokens per row of tgt_in / tgt_out
  int64_t src_tokens = 0;            // sum of src_lengths
  int64_t tgt_tokens = 0;            // sum of tgt_lengths (the loss's token count)
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

class TokenBatcher {
 public:
  // `tgt` may be null (monolingual). A target corpus stored with a trailing
  // </s> has it stripped before <s>/</s> are added. Throws rotor::Error when
  // the corpora differ in size, no sentence fits max_tokens, or options are invalid.
  TokenBatcher(std::shared_ptr<const MmapCorpus> src, std::shared_ptr<const MmapCorpus> tgt,
               BatcherOptions options);
  ~TokenBatcher();  // stops and joins the prefetch thread
  TokenBatcher(const TokenBatcher&) = delete;
  TokenBatcher& operator=(const TokenBatcher&) = delete;

  // The batch at position(), then advances (to the next epoch after the last).
  // Rethrows an exception raised on the prefetch thread.
  Batch next();
  BatchPosition position() const { return consume_pos_; }
  // The next batch will be the one at `p` (exactly as in an uninterrupted run).
  void set_position(BatchPosition p);

  // This rank's batches in `epoch` (sentence ids), the same count on every rank.
  std::vector<std::vector<int64_t>> epoch_plan(uint64_t epoch) const;
  int64_t batches_in_epoch(uint64_t epoch) const {
    return static_cast<int64_t>(epoch_plan(epoch).size());
  }
  int64_t skipped() const { return skipped_; }  // sentences too long to fit alone
  int64_t num_usable() const { return static_cast<int64_t>(usable_.size()); }
  const BatcherOptions& options() const { return opt_; }

 private:
  struct Ready {
    Batch batch;
    BatchPosition next;
  };
  Ready produce(BatchPosition pos);  // producer side, owns plan_cache_
  Batch make_batch(const std::vector<int64_t>& ids) const;
  void start_worker();
  void stop_worker();
  void worker_loop();

  std::shared_ptr<const MmapCorpus> src_, tgt_;
  BatcherOptions opt_;
  std::vector<int64_t> usable_;                     // sentence ids that fit alone
  std::vector<int32_t> src_len_, tgt_len_;          // padded-size lengths per sentence id
  std::vector<uint8_t> src_has_eos_, tgt_has_eos_;  // stored with a trailing </s>
  int64_t skipped_ = 0;

  uint64_t plan_epoch_ = UINT64_MAX;  // producer's cached plan
  std::vector<std::vector<int64_t>> plan_;

  BatchPosition consume_pos_, produce_pos_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Ready> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace rotor::data
