#include "core/cuda_context.h"

#include <array>
#include <atomic>
#include <mutex>

#include "core/error.h"

#if ROTOR_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
#endif

namespace rotor::cuda {

#if ROTOR_WITH_CUDA

namespace {
constexpr int kMaxDevices = 64;
struct PerDevice {
  cudaStream_t stream = nullptr;
  std::atomic<size_t> in_use{0};
  std::atomic<size_t> peak{0};
  bool pool_configured = false;
};
std::array<PerDevice, kMaxDevices>& state() {
  static std::array<PerDevice, kMaxDevices> s;
  return s;
}
std::mutex& state_mutex() {
  static std::mutex m;
  return m;
}
int resolve(int index) {
  return index < 0 ? current_device() : index;
}
std::string version_string(int v, int major_div, int minor_div, int minor_mod) {
  return std::to_string(v / major_div) + "." + std::to_string((v / minor_div) % minor_mod);
}
}  // namespace

void check(int code, const char* what, const char* file, int line) {
  if (code == 0) return;
  const char* msg = cudaGetErrorString(static_cast<cudaError_t>(code));
  throw_check_failure(file, line, what, fmt::format("CUDA error {}: {}", code, msg));
}

int device_count() {
  static int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky "no device" error
      return 0;
    }
    return count;
  }();
  return n;
}

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  for (int i = 0; i < device_count(); ++i) {
    cudaDeviceProp p{};
    ROTOR_CUDA_CHECK(cudaGetDeviceProperties(&p, i));
    out.push_back({i, p.name, p.major, p.minor, p.totalGlobalMem, p.multiProcessorCount});
  }
  return out;
}

void set_device(int index) {
  ROTOR_CUDA_CHECK(cudaSetDevice(index));
}

int current_device() {
  int d = 0;
  ROTOR_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void* stream(int index) {
  index = resolve(index);
  ROTOR_CHECK(index >= 0 && index < kMaxDevices, "bad CUDA device index {}", index);
  auto& s = state()[index];
  std::lock_guard<std::mutex> lock(state_mutex());
  if (!s.stream) {
    int prev = current_device();
    set_device(index);
    ROTOR_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    set_device(prev);
  }
  return s.stream;
}

void synchronize(int index) {
  ROTOR_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream(index))));
}

void* pool_alloc(size_t bytes, int index) {
  if (bytes == 0) return nullptr;
  auto& s = state()[index];
  auto st = static_cast<cudaStream_t>(stream(index));
  {
    std::lock_guard<std::mutex> lock(state_mutex());
    if (!s.pool_configured) {
      cudaMemPool_t pool;
      ROTOR_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index));
      uint64_t threshold = UINT64_MAX;  // keep freed blocks for reuse
      ROTOR_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
      s.pool_configured = true;
    }
  }
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, bytes, st);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    ROTOR_FAIL(
        "out of GPU memory on cuda:{}: could not allocate {:.1f} MiB ({} MiB in use by rotor)",
        index, bytes / 1048576.0, s.in_use.load() / 1048576);
  }
  size_t now = s.in_use.fetch_add(bytes) + bytes;
  size_t peak = s.peak.load();
  while (now > peak && !s.peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void pool_free(void* ptr, size_t bytes, int index) {
  if (!ptr) return;
  state()[index].in_use.fetch_sub(bytes);
  ROTOR_CUDA_CHECK(cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream(index))));
}

size_t pool_bytes_in_use(int index) {
  return state()[resolve(index)].in_use.load();
}
size_t pool_peak_bytes(int index) {
  return state()[resolve(index)].peak.load();
}
void pool_reset_peak(int index) {
  auto& s = state()[resolve(index)];
  s.peak.store(s.in_use.load());
}

void memcpy(void* dst, const void* src, size_t bytes, CopyKind kind, int index) {
  if (bytes == 0) return;
  auto st = static_cast<cudaStream_t>(stream(index));
  cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                     : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                      : cudaMemcpyDeviceToDevice;
  ROTOR_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, st));
  if (kind != CopyKind::DeviceToDevice) ROTOR_CUDA_CHECK(cudaStreamSynchronize(st));
}

void memset_zero(void* dst, size_t bytes, int index) {
  if (bytes == 0) return;
  ROTOR_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream(index))));
}

std::string runtime_version() {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return version_string(v, 1000, 10, 100);
}
std::string driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) {
    (void)cudaGetLastError();
    return "none";
  }
  return version_string(v, 1000, 10, 100);
}
std::string cublas_version() {
  size_t v = cublasLtGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}
std::string cudnn_version() {
  size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}
std::string nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

#else  // CPU-only build

void check(int code, const char* what, const char* file, int line) {
  if (code != 0) throw_check_failure(file, line, what, "CUDA call in a CPU-only build");
}
int device_count() {
  return 0;
}
std::vector<DeviceInfo> devices() {
  return {};
}
[[noreturn]] static void no_cuda() {
  ROTOR_FAIL("this rotor was built without CUDA (ROTOR_CUDA=OFF)");
}
void set_device(int) {
  no_cuda();
}
int current_device() {
  return 0;
}
void* stream(int) {
  no_cuda();
}
void synchronize(int) {}
void* pool_alloc(size_t, int) {
  no_cuda();
}
void pool_free(void*, size_t, int) {}
size_t pool_bytes_in_use(int) {
  return 0;
}
size_t pool_peak_bytes(int) {
  return 0;
}
void pool_reset_peak(int) {}
void memcpy(void*, const void*, size_t, CopyKind, int) {
  no_cuda();
}
void memset_zero(void*, size_t, int) {
  no_cuda();
}
std::string runtime_version() {
  return "";
}
std::string driver_version() {
  return "";
}
std::string cublas_version() {
  return "";
}
std::string cudnn_version() {
  return "";
}
std::string nccl_version() {
  return "";
}

#endif

}  // namespace rotor::cuda
