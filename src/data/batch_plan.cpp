#include "data/batch_plan.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"

namespace rotor::data {

BatchPlan::BatchPlan(int64_t items, BatchPlanOptions o) : items_(items), opt_(o) {
  ROTOR_CHECK(items >= 0, "a batch plan over {} items", items);
  if (o.batch_size <= 0) ROTOR_FAIL("train.batch_size: {} must be positive", o.batch_size);
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    ROTOR_FAIL("batcher: rank {} is not in [0, world size {})", o.rank, o.world_size);
}

std::vector<std::vector<int64_t>> BatchPlan::epoch_plan(uint64_t epoch) const {
  const int64_t n = items_, B = opt_.batch_size;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (opt_.shuffle) {
    PhiloxRng rng(opt_.seed, rng_stream(epoch, opt_.stream_layer, RngPurpose::Shuffle, 0));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  std::vector<std::vector<int64_t>> global;
  for (int64_t b = 0; b < n; b += B) {
    const int64_t e = std::min(n, b + B);
    if (e - b < B && opt_.drop_last && !global.empty()) break;
    global.emplace_back(order.begin() + b, order.begin() + e);
  }
  const int64_t G = static_cast<int64_t>(global.size()), w = opt_.world_size;
  if (G == 0) return {};
  const int64_t per =
      opt_.remainder == ShardRemainder::Pad ? (G + w - 1) / w : std::max<int64_t>(G / w, 1);
  std::vector<std::vector<int64_t>> mine;
  for (int64_t k = 0; k < per; ++k)
    mine.push_back(global[static_cast<size_t>((opt_.rank + k * w) % G)]);
  return mine;
}

int64_t BatchPlan::batches_in_epoch() const {
  const int64_t n = items_, B = opt_.batch_size, w = opt_.world_size;
  int64_t G = n / B;
  if (n % B != 0 && (!opt_.drop_last || G == 0)) ++G;
  if (G == 0) return 0;
  return opt_.remainder == ShardRemainder::Pad ? (G + w - 1) / w : std::max<int64_t>(G / w, 1);
}

BatchPlan::Next BatchPlan::next() {
  ROTOR_CHECK(items_ > 0, "batches drawn from no items");
  if (plan_epoch_ != pos_.epoch) {
    plan_ = epoch_plan(pos_.epoch);
    plan_epoch_ = pos_.epoch;
  }
  if (pos_.batch_index >= plan_.size()) {  // a position restored past the end
    pos_ = {pos_.epoch + 1, 0};
    return next();
  }
  const Next out{&plan_[pos_.batch_index], pos_.epoch};
  if (++pos_.batch_index >= plan_.size()) pos_ = {pos_.epoch + 1, 0};
  return out;
}

}  // namespace rotor::data
