// Batches of a fixed number of items (masked-LM blocks, classification
// examples), the same on every rank, sharded across data-parallel ranks and
// resumable exactly. One epoch:
//   1. the item ids 0..n-1, shuffled by the Philox stream (epoch, layer,
//      Shuffle) unless !shuffle;
//   2. cut into global batches of batch_size consecutive ids (the last,
//      partial one dropped when drop_last, unless it is the only one);
//   3. rank r of w takes global batches r, r + w, ...; with Pad every rank
//      takes ceil(n / w) (wrapping around), with Drop floor(n / w) (at least 1).
// next() returns the ids of the batch at position() and advances (to the next
// epoch after its last batch); set_position() restores a saved position.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batcher.h"  // BatchPosition, ShardRemainder

namespace rotor::data {

struct BatchPlanOptions {
  int64_t batch_size = 32;  // items per batch
  uint64_t seed = 1;
  uint32_t stream_layer = 0;  // keys the shuffle stream (each batcher its own)
  bool shuffle = true;
  bool drop_last = false;
  int rank = 0;
  int world_size = 1;
  ShardRemainder remainder = ShardRemainder::Pad;
};

class BatchPlan {
 public:
  // Options checked (a rotor::Error naming what is wrong); no items make no
  // batches.
  BatchPlan(int64_t items, BatchPlanOptions options);

  std::vector<std::vector<int64_t>> epoch_plan(uint64_t epoch) const;  // this rank's batches
  int64_t batches_in_epoch() const;                                    // the same every epoch

  // The item ids of the batch at position(), and the epoch it belongs to.
  struct Next {
    const std::vector<int64_t>* ids;
    uint64_t epoch;
  };
  Next next();
  BatchPosition position() const { return pos_; }
  void set_position(BatchPosition p) { pos_ = p; }

 private:
  int64_t items_;
  BatchPlanOptions opt_;
  BatchPosition pos_;
  uint64_t plan_epoch_ = UINT64_MAX;
  std::vector<std::vector<int64_t>> plan_;
};

}  // namespace rotor::data
