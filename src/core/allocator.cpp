#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/cuda_context.h"
#include "core/error.h"

namespace rotor {

namespace {
constexpr size_t kAlignment = 64;  // a cache line; also enough for AVX-512 loads
std::atomic<size_t> g_cpu_in_use{0};
std::atomic<size_t> g_cpu_peak{0};
}  // namespace

void* device_alloc(size_t bytes, Device device) {
  if (bytes == 0) return nullptr;
  if (device.is_cuda()) return cuda::pool_alloc(bytes, device.index);
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
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
  std::free(ptr);
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
