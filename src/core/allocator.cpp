#include "core/allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "core/cuda_context.h"
#include "core/error.h"

namespace rotor {

namespace {
constexpr size_t kAlignment = 64;  // a cache line; also enough for AVX-512 loads
std::atomic<size_t> g_cpu_in_use{0};
std::atomic<size_t> g_cpu_peak{0};

// Freed CPU blocks are kept in power-of-two size classes and reused: a training
// step allocates the same shapes again and again, and returning large blocks
// to the kernel (munmap) and faulting them back in cost more than the step's
// arithmetic on small models. Waste is bounded by 2x; release_cached_memory()
// gives everything back.
class BlockCache {
 public:
  static constexpr int kClasses = 48;
  static size_t class_bytes(int c) { return size_t{1} << c; }
  static int class_of(size_t bytes) {
    size_t b = std::max<size_t>(bytes, kAlignment);
    return static_cast<int>(std::bit_width(b - 1));  // smallest c with 2^c >= b
  }
  void* take(int c) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& list = free_[static_cast<size_t>(c)];
    if (list.empty()) return nullptr;
    void* p = list.back();
    list.pop_back();
    cached_ -= class_bytes(c);
    return p;
  }
  void give(int c, void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[static_cast<size_t>(c)].push_back(p);
    cached_ += class_bytes(c);
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& list : free_) {
      for (void* p : list) std::free(p);
      list.clear();
    }
    cached_ = 0;
  }
  size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

 private:
  std::mutex mutex_;
  std::array<std::vector<void*>, kClasses> free_;
  size_t cached_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: tensors may outlive statics
  return *c;
}
}  // namespace

void release_cached_memory() {
  cache().release();
}
size_t cached_bytes() {
  return cache().cached();
}

void* device_alloc(size_t bytes, Device device) {
  if (bytes == 0) return nullptr;
  if (device.is_cuda()) return cuda::pool_alloc(bytes, device.index);
  const int c = BlockCache::class_of(bytes);
  ROTOR_CHECK(c < BlockCache::kClasses, "allocation of {} bytes is too large", bytes);
  void* p = cache().take(c);
  if (!p) p = std::aligned_alloc(kAlignment, BlockCache::class_bytes(c));
  if (!p) {
    release_cached_memory();  // maybe the cache holds what is missing
    p = std::aligned_alloc(kAlignment, BlockCache::class_bytes(c));
  }
  if (!p) ROTOR_FAIL("out of host memory: could not allocate {:.1f} MiB", bytes / 1048576.0);
  size_t now = g_cpu_in_use.fetch_add(bytes) + bytes;
  size_t peak = g_cpu_peak.load();
  while (now > peak && !g_cpu_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void device_free(void* ptr, size_t bytes, Device device) {
  if (!ptr) return;
  if (device.is_cuda()) {
    cuda::pool_free(ptr, bytes, device.index);
    return;
  }
  g_cpu_in_use.fetch_sub(bytes);
  cache().give(BlockCache::class_of(bytes), ptr);
}

size_t bytes_in_use(Device device) {
  return device.is_cuda() ? cuda::pool_bytes_in_use(device.index) : g_cpu_in_use.load();
}
size_t peak_bytes(Device device) {
  return device.is_cuda() ? cuda::pool_peak_bytes(device.index) : g_cpu_peak.load();
}
void reset_peak_bytes(Device device) {
  if (device.is_cuda())
    cuda::pool_reset_peak(device.index);
  else
    g_cpu_peak.store(g_cpu_in_use.load());
}

}  // namespace rotor
