// The cache of built cuDNN SDPA graphs (src/ops/cudnn_attention_cuda.cpp).
// Building a graph (heuristics, plan, sometimes a kernel compiled at run time)
// costs milliseconds to seconds, so each is built once per shape key and
// reused; translation batches vary in length, so the cache is bounded and
// forgets the least recently used graph beyond its capacity. Free of cuDNN:
// the key and the cache are tested on the CPU (tests/cpu/test_cudnn_attention.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/dtype.h"
#include "ops/cudnn_attention.h"

namespace rotor::ops {

// Everything a built graph depends on: its device, direction, dtype, shapes
// and the options baked into it. Key lengths and dropout seeds are run-time
// inputs of the graph, not part of the key.
struct SdpaGraphKey {
  int device = 0;
  bool backward = false;
  DType dtype = DType::F32;
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  bool causal = false;
  bool key_lengths = false;
  float dropout = 0.0f;
  float scale = 1.0f;

  bool operator==(const SdpaGraphKey&) const = default;
  // "fwd bf16 B64 H12 Tq512 Tk512 D64 causal lengths drop0.1 scale1 cuda:0"
  std::string str() const;
};

SdpaGraphKey sdpa_graph_key(const CudnnAttentionCase& c, float scale, int device, bool backward);

struct SdpaGraphKeyHash {
  size_t operator()(const SdpaGraphKey& k) const;
};

// A least-recently-used map from keys to shared values (a graph in use by a
// caller stays alive after its eviction). Thread-safe; `build` runs under the
// lock, so two threads never build the same graph twice.
template <class Key, class Value, class Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The value of `key`, made by build() (returning std::shared_ptr<Value>) on
  // a miss. An exception from build() leaves the cache unchanged.
  template <class Build>
  std::shared_ptr<Value> get(const Key& key, Build&& build) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      ++hits_;
      order_.splice(order_.begin(), order_, it->second);  // most recent first
      return it->second->second;
    }
    ++misses_;
    std::shared_ptr<Value> value = build();
    order_.emplace_front(key, value);
    index_.emplace(key, order_.begin());
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    return value;
  }

  bool contains(const Key& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return index_.count(key) != 0;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
  }
  size_t capacity() const { return capacity_; }
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }
  size_t evictions() const { return evictions_; }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    index_.clear();
    order_.clear();
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<Value>>;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
  size_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

// Graphs kept per process (forward and backward together). A translation run
// sees a few hundred distinct (B, Tq, Tk) shapes; a masked-LM run one or two.
constexpr size_t kSdpaGraphCacheCapacity = 512;

}  // namespace rotor::ops
