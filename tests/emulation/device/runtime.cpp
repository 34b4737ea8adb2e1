// The CUDA runtime calls rotor makes, answered by one emulated device on host
// memory (tests/emulation/device/README.md). Linked into an executable, these
// definitions take the place of libcudart's for rotor_lib's glue, and the
// launchers of the emulated kernels call them too.
//
// The device: cuda:0, an H100 by default (compute capability 9.0, its SM
// count and shared memory); ROTOR_EMU_SM=70 makes it a V100 (7.0, 80 SMs,
// 96 KiB of shared memory a block) and ROTOR_EMU_SM=80 an A100. The
// emulated kernels have code for it (kernel_prelude.h); the objects of the
// CUDA build's own kernels have none (cudaFuncGetAttributes fails, as on a
// device a fatbinary does not cover), and launching one fails the run.
// Streams: kernels, copies, memsets and cuBLASLt calls finish before they
// return. The NCCL calls (nccl.cpp) are queued on their stream: by default
// they run at once too; with ROTOR_EMU_STREAMS=lazy they wait until
// something needs them -- a synchronization of their stream or the device,
// a stream that waits on an event recorded after them, the 64th query of
// such an event (the ones before answer cudaErrorNotReady), or other work on
// their stream. Both are orders CUDA allows: the first shows a collective
// that reads its input before the compute stream has written it, the second
// one whose result is used before it is waited for, or whose buffers are
// written or freed (poisoned) while it is still queued. Memory:
//   - an allocation is a host block of exactly the size asked for, 256-byte
//     aligned, filled with 0xff bytes (NaN in f32, f16 and bf16) as device
//     memory is uninitialized; freeing it poisons it again before release;
//   - 256 guard bytes before and after each allocation are checked when it
//     is freed and at every synchronization (a write past either end);
//   - a copy or memset must lie inside one live allocation on its device
//     side(s) and outside every allocation on its host side; anything else
//     is an emulation failure that names the call.
// A call the emulation does not answer (a kernel launch of CUDA's own, a
// runtime function not listed here) fails the run: the build links only the
// functions below in front of libcudart.
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "device/device_memory.h"
#include "kernel_emulation.h"

namespace emu_device {
namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, size_t>& allocations() {
  static std::map<uintptr_t, size_t> a;
  return a;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "emulated device: FAILED: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The allocation holding p (its base and size), or {0, 0}.
std::pair<uintptr_t, size_t> find(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex());
  auto it = allocations().upper_bound(a);
  if (it == allocations().begin()) return {0, 0};
  --it;
  if (a >= it->first + it->second) return {0, 0};
  return *it;
}

// What the device reports, by ROTOR_EMU_SM.
struct Model {
  int sm;
  const char* gpu;
  int sms, smem_optin_kib, smem_sm_kib, gib;
};

const Model& model() {
  static const Model m = [] {
    static const Model known[] = {{70, "V100", 80, 96, 96, 32},
                                  {80, "A100", 108, 163, 164, 80},
                                  {90, "H100", 132, 227, 228, 80}};
    const char* env = std::getenv("ROTOR_EMU_SM");
    const int want = env && *env ? std::atoi(env) : 90;
    for (const Model& k : known)
      if (k.sm == want) return k;
    fail(std::string("ROTOR_EMU_SM=") + env + ": the emulated device is sm 70, 80 or 90");
  }();
  return m;
}

int g_device = 0;

// How many devices answer (ROTOR_EMU_DEVICES, default 1): alike, one process
// each, so that ranks of `rotor launch` take one GPU each as on a machine
// with that many (device/nccl.cpp refuses two ranks on one, as NCCL does).
int device_count() {
  static const int n = [] {
    const char* env = std::getenv("ROTOR_EMU_DEVICES");
    const int v = env && *env ? std::atoi(env) : 1;
    if (v < 1 || v > 64) fail(std::string("ROTOR_EMU_DEVICES=") + env + ": from 1 to 64 devices");
    return v;
  }();
  return n;
}
bool valid_device(int device) {
  return device >= 0 && device < device_count();
}
cudaError_t g_sticky = cudaSuccess;  // none: no call here makes one

// Bytes before and after every allocation, set to kGuardByte when it is made
// and checked when it is freed and at every synchronization: a kernel or a
// copy that wrote past either end of its buffer fails the run there.
constexpr size_t kGuard = 256;
constexpr unsigned char kGuardByte = 0xa5;

void check_guards(uintptr_t base, size_t bytes) {
  const auto* b = reinterpret_cast<const unsigned char*>(base);
  for (size_t i = 0; i < kGuard; ++i) {
    if (b[bytes + i] != kGuardByte)
      fail("a write at byte " + std::to_string(bytes + i) + " of a device allocation of " +
           std::to_string(bytes) + " bytes (past its end)");
    if (b[-1 - static_cast<std::ptrdiff_t>(i)] != kGuardByte)
      fail("a write at byte -" + std::to_string(i + 1) + " of a device allocation of " +
           std::to_string(bytes) + " bytes (before its start)");
  }
}

// Every live allocation's guards (at a synchronization).
cudaError_t check_all_guards() {
  std::lock_guard<std::mutex> lock(mutex());
  for (const auto& [base, bytes] : allocations()) check_guards(base, bytes);
  return g_sticky;
}

// A stream: its queued work, each with a number (1, 2, ...), run in order.
struct Stream {
  std::deque<std::pair<uint64_t, std::function<void()>>> queued;
  uint64_t last = 0;     // the number of the last work queued
  uint64_t done = 0;     // every work up to this number has run
  bool running = false;  // a thread runs this stream's work now
};

// A lazy stream's work runs on the 64th query of an event recorded after
// it, if nothing needed it before: a GPU that is slow, not stopped.
constexpr int kQueriesBeforeRunning = 64;

// The place in a stream where an event was recorded.
struct Event {
  Stream* stream = nullptr;
  uint64_t mark = 0;
  int queries = 0;
};

std::mutex& stream_mutex() {
  static std::mutex m;
  return m;
}
std::condition_variable& stream_done() {
  static std::condition_variable c;
  return c;
}
std::set<Stream*>& streams() {
  static std::set<Stream*> s;
  return s;
}
Stream* stream_of(cudaStream_t s) {
  static Stream legacy;  // the null stream
  return s ? reinterpret_cast<Stream*>(s) : &legacy;
}

bool lazy() {
  static const bool l = [] {
    const char* env = std::getenv("ROTOR_EMU_STREAMS");
    const std::string v = env ? env : "";
    if (v.empty() || v == "eager") return false;
    if (v == "lazy") return true;
    fail("ROTOR_EMU_STREAMS=" + v + ": eager or lazy");
  }();
  return l;
}

// Runs s's queued work up to number `upto`, in order, outside the lock (the
// work may wait for other ranks; other threads may queue meanwhile).
void run_until(Stream* s, uint64_t upto) {
  std::unique_lock<std::mutex> lock(stream_mutex());
  while (s->done < upto) {
    if (s->running) {
      stream_done().wait(lock);
      continue;
    }
    if (s->queued.empty()) {
      s->done = s->last;
      break;
    }
    auto [n, work] = std::move(s->queued.front());
    s->queued.pop_front();
    s->running = true;
    lock.unlock();
    work();
    lock.lock();
    s->running = false;
    s->done = n;
    stream_done().notify_all();
  }
}

void run_all(Stream* s) {
  run_until(s, std::numeric_limits<uint64_t>::max());
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  Stream* s = stream_of(stream);
  {
    std::lock_guard<std::mutex> lock(stream_mutex());
    s->queued.emplace_back(++s->last, std::move(work));
  }
  if (!lazy()) run_all(s);
}

void in_order(cudaStream_t stream) {
  run_all(stream_of(stream));
}

namespace {
// Kernel launches keep their stream's order too.
const bool g_launch_hook = [] {
  emu::before_launch = &in_order;
  return true;
}();
}  // namespace

int sm() {
  return model().sm;
}

int current_device() {
  return g_device;
}

bool is_device(const void* p) {
  return find(p).second != 0;
}

void check_range(const std::string& what, const void* p, size_t bytes) {
  if (bytes == 0) return;
  const auto [base, size] = find(p);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (size == 0)
    fail(what + ": " + std::to_string(bytes) + " bytes at a pointer outside device memory");
  if (a + bytes > base + size)
    fail(what + ": " + std::to_string(bytes) + " bytes at offset " + std::to_string(a - base) +
         " of an allocation of " + std::to_string(size));
}

}  // namespace emu_device

namespace {

void check_host(const std::string& what, const void* p, size_t bytes) {
  if (bytes == 0) return;
  if (!p) emu_device::fail(what + ": a null host pointer");
  if (emu_device::is_device(p) ||
      emu_device::is_device(static_cast<const unsigned char*>(p) + bytes - 1))
    emu_device::fail(what + ": the host side points into device memory");
}

cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) emu::t_last_error = e;
  return e;
}

}  // namespace

// The definitions below are the calls themselves, not kernel_emulation.h's
// stand-ins.
#include "device/kernel_prelude.h"  // NOLINT(build/include_order)

extern "C" {

cudaError_t cudaGetLastError(void) {
  return emu::last_error();
}

cudaError_t cudaPeekAtLastError(void) {
  return emu::t_last_error;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = emu_device::device_count();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!emu_device::valid_device(device)) return set_error(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  const emu_device::Model& m = emu_device::model();
  std::snprintf(prop->name, sizeof prop->name, "rotor emulated device (%s, sm_%d, host memory)",
                m.gpu, m.sm);
  prop->totalGlobalMem = size_t(m.gib) << 30;
  prop->sharedMemPerBlock = 48 << 10;
  prop->sharedMemPerBlockOptin = static_cast<size_t>(m.smem_optin_kib) << 10;
  prop->sharedMemPerMultiprocessor = static_cast<size_t>(m.smem_sm_kib) << 10;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = m.sm / 10;
  prop->minor = m.sm % 10;
  prop->multiProcessorCount = m.sms;
  prop->maxThreadsPerMultiProcessor = 2048;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!emu_device::valid_device(device)) return set_error(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = emu_device::model().sms;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = emu_device::model().smem_optin_kib << 10;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = 48 << 10;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = emu_device::sm() / 10;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = emu_device::sm() % 10;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    default:
      emu_device::fail("cudaDeviceGetAttribute: attribute " + std::to_string(attr) +
                       " is not emulated");
  }
}

cudaError_t cudaSetDevice(int device) {
  if (!emu_device::valid_device(device)) return set_error(cudaErrorInvalidDevice);
  emu_device::g_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = emu_device::g_device;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}

// Streams and events (the queues above).
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  auto* st = new emu_device::Stream;
  {
    std::lock_guard<std::mutex> lock(emu_device::stream_mutex());
    emu_device::streams().insert(st);
  }
  *s = reinterpret_cast<cudaStream_t>(st);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  // CUDA lets queued work finish after the call; here it runs first.
  emu_device::run_all(emu_device::stream_of(s));
  {
    std::lock_guard<std::mutex> lock(emu_device::stream_mutex());
    emu_device::streams().erase(emu_device::stream_of(s));
  }
  delete emu_device::stream_of(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  emu_device::run_all(emu_device::stream_of(s));
  return emu_device::check_all_guards();
}
cudaError_t cudaDeviceSynchronize(void) {
  std::set<emu_device::Stream*> all;
  {
    std::lock_guard<std::mutex> lock(emu_device::stream_mutex());
    all = emu_device::streams();
  }
  emu_device::run_all(emu_device::stream_of(nullptr));
  for (emu_device::Stream* s : all) emu_device::run_all(s);
  return emu_device::check_all_guards();
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  *e = reinterpret_cast<cudaEvent_t>(new emu_device::Event);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<emu_device::Event*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  auto* ev = reinterpret_cast<emu_device::Event*>(e);
  std::lock_guard<std::mutex> lock(emu_device::stream_mutex());
  ev->stream = emu_device::stream_of(s);
  ev->mark = ev->stream->last;
  ev->queries = 0;
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  auto* ev = reinterpret_cast<emu_device::Event*>(e);
  {
    std::lock_guard<std::mutex> lock(emu_device::stream_mutex());
    if (!ev->stream || ev->stream->done >= ev->mark) return cudaSuccess;
    if (++ev->queries < emu_device::kQueriesBeforeRunning) return cudaErrorNotReady;
  }
  emu_device::run_until(ev->stream, ev->mark);
  return cudaSuccess;
}
// The waiting stream's later work runs at once, so what the event marks runs now.
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t e, unsigned int) {
  auto* ev = reinterpret_cast<emu_device::Event*>(e);
  if (ev->stream) emu_device::run_until(ev->stream, ev->mark);
  return cudaSuccess;
}

// Memory.
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  if (!emu_device::valid_device(device)) return set_error(cudaErrorInvalidDevice);
  static char name;
  *pool = reinterpret_cast<cudaMemPool_t>(&name);
  return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) {
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t s) {
  emu_device::in_order(s);
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  void* q = nullptr;
  const size_t g = emu_device::kGuard;
  if (posix_memalign(&q, 256, bytes + 2 * g) != 0) return set_error(cudaErrorMemoryAllocation);
  unsigned char* block = static_cast<unsigned char*>(q) + g;
  std::memset(block - g, emu_device::kGuardByte, g);
  std::memset(block, 0xff, bytes);
  std::memset(block + bytes, emu_device::kGuardByte, g);
  {
    std::lock_guard<std::mutex> lock(emu_device::mutex());
    emu_device::allocations()[reinterpret_cast<uintptr_t>(block)] = bytes;
  }
  *p = block;
  return cudaSuccess;
}

// The block is poisoned and released at once: work still queued on another
// stream that uses it fails its checks.
cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  emu_device::in_order(s);
  if (!p) return cudaSuccess;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(emu_device::mutex());
    auto it = emu_device::allocations().find(reinterpret_cast<uintptr_t>(p));
    if (it == emu_device::allocations().end())
      emu_device::fail("cudaFreeAsync of a pointer that is no allocation's start");
    bytes = it->second;
    emu_device::check_guards(it->first, bytes);
    emu_device::allocations().erase(it);
  }
  std::memset(p, 0xff, bytes);
  std::free(static_cast<unsigned char*>(p) - emu_device::kGuard);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s) {
  emu_device::in_order(s);
  if (bytes == 0) return cudaSuccess;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      emu_device::check_range("cudaMemcpyAsync (host to device) destination", dst, bytes);
      check_host("cudaMemcpyAsync (host to device) source", src, bytes);
      break;
    case cudaMemcpyDeviceToHost:
      emu_device::check_range("cudaMemcpyAsync (device to host) source", src, bytes);
      check_host("cudaMemcpyAsync (device to host) destination", dst, bytes);
      break;
    case cudaMemcpyDeviceToDevice:
      emu_device::check_range("cudaMemcpyAsync (device to device) source", src, bytes);
      emu_device::check_range("cudaMemcpyAsync (device to device) destination", dst, bytes);
      break;
    default:
      emu_device::fail("cudaMemcpyAsync: kind " + std::to_string(kind) + " (rotor names the kind)");
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  emu_device::in_order(s);
  emu_device::check_range("cudaMemsetAsync", p, bytes);
  std::memset(p, value, bytes);
  return cudaSuccess;
}

// Kernels: every kernel file the emulation covers is linked in emulated form;
// the others' functions have no code for this device.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes*, const void*) {
  return set_error(cudaErrorInvalidDeviceFunction);
}
// As on a GPU, more dynamic shared memory than the device's opt-in limit is
// refused.
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize &&
      (value < 0 || value > emu_device::model().smem_optin_kib << 10))
    return set_error(cudaErrorInvalidValue);
  return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
  emu_device::fail("a CUDA kernel launch that the emulated device has no emulation for");
}

}  // extern "C"
