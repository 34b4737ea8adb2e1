// The CUDA runtime as rotor uses it: device discovery, one stream per device,
// the stream-ordered memory pool and copies. Every function exists in a
// CPU-only build too; there they report no devices or throw rotor::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rotor::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  size_t total_memory = 0;
  int multiprocessors = 0;
};

int device_count();                 // 0 without CUDA or without a GPU
std::vector<DeviceInfo> devices();  // the devices that answer
void set_device(int index);
int current_device();

// The stream every rotor op on device `index` is ordered on (created on first
// use, non-blocking). Returned as void* (a cudaStream_t) so that headers stay
// free of the CUDA runtime.
void* stream(int index = -1);
void synchronize(int index = -1);  // waits for that stream

// Stream-ordered pool (cudaMallocAsync on the device's stream). The pool keeps
// freed memory for reuse (release threshold = unlimited).
void* pool_alloc(size_t bytes, int index);
void pool_free(void* ptr, size_t bytes, int index);
size_t pool_bytes_in_use(int index);
size_t pool_peak_bytes(int index);
void pool_reset_peak(int index);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };
// Copies on the device's stream; host-side copies synchronize before return.
void memcpy(void* dst, const void* src, size_t bytes, CopyKind kind, int index);
void memset_zero(void* dst, size_t bytes, int index);

// Versions for `rotor info` ("" when not built with CUDA).
std::string runtime_version();
std::string driver_version();
std::string cublas_version();
std::string cudnn_version();
std::string nccl_version();

// Throws rotor::Error naming `what` when a CUDA call failed (code != 0).
void check(int code, const char* what, const char* file, int line);

}  // namespace rotor::cuda

#define ROTOR_CUDA_CHECK(call) \
  ::rotor::cuda::check(static_cast<int>(call), #call, __FILE__, __LINE__)
