// A whole kernels/*.cu file, launchers included, run on the CPU: the
// prelude of the files that emulate_cu.py generates (tests/emulation/
// kernels_emulate_*.cpp include them). On top of cuda_emulation.h's thread
// block it gives
//   - emu::launch, which the generator puts in place of every
//     `kernel<<<grid, block, smem, stream>>>(args)`: the grid's blocks one
//     after the other, each with a fiber per CUDA thread (1-, 2- and
//     3-D blocks and grids);
//   - static __shared__ arrays (one block runs at a time, so a function-local
//     static is the block's shared memory);
//   - the runtime calls the launchers make (cudaGetLastError, cudaMemsetAsync,
//     cudaMemcpyAsync, cudaFuncSetAttribute, cudaGetDevice,
//     cudaDeviceGetAttribute) on host memory, which stands for device memory;
//   - cub::DeviceRadixSort::SortPairs as a stable sort on the key's bits
//     [begin_bit, end_bit): the order cub's (stable, LSD) radix sort gives.
// Every buffer a launcher gets is host memory; a stream is ignored (each
// launch finishes before the launcher goes on, which is one order CUDA's
// stream allows).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "cuda_emulation.h"

#undef __shared__
#define __shared__ static

namespace emu {

// The last error a shimmed runtime call set (cudaGetLastError clears it).
inline thread_local cudaError_t t_last_error = cudaSuccess;

// Number of launches run so far (a check that a case reached the kernels).
inline int& launches() {
  static int n = 0;
  return n;
}

// Called with a launch's stream before it runs (the emulated device keeps
// each stream's order with it: device/runtime.cpp).
inline void (*before_launch)(cudaStream_t) = nullptr;

template <class Body>
void launch(Body&& body, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = nullptr) {
  if (before_launch) before_launch(stream);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || block.x * block.y * block.z == 0 ||
      block.x * block.y * block.z > 1024 || grid.y > 65535 || grid.z > 65535) {
    t_last_error = cudaErrorInvalidConfiguration;  // what CUDA reports for such a launch
    return;
  }
  ++launches();
  const std::function<void()> f = body;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) run_block(block, grid, make_uint3(x, y, z), smem, f);
}

inline cudaError_t last_error() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

}  // namespace emu

// CUDA's integer min and max (math_functions.hpp, for device code only).
#define ROTOR_EMU_MINMAX_(T) \
  inline T min(T a, T b) {   \
    return b < a ? b : a;    \
  }                          \
  inline T max(T a, T b) {   \
    return a < b ? b : a;    \
  }
ROTOR_EMU_MINMAX_(int)
ROTOR_EMU_MINMAX_(unsigned)
ROTOR_EMU_MINMAX_(long)
ROTOR_EMU_MINMAX_(unsigned long)
ROTOR_EMU_MINMAX_(long long)
ROTOR_EMU_MINMAX_(unsigned long long)
#undef ROTOR_EMU_MINMAX_

template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline float __int_as_float(int x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

#define cudaGetLastError() ::emu::last_error()
#define cudaMemsetAsync(p, v, n, ...) (std::memset((p), (v), (n)), cudaSuccess)
#define cudaMemcpyAsync(d, s, n, ...) (std::memmove((d), (s), (n)), cudaSuccess)
#define cudaFuncSetAttribute(...) cudaSuccess
#define cudaGetDevice(dev) (*(dev) = 0, cudaSuccess)
#define cudaDeviceGetAttribute(v, attr, dev) (*(v) = 132, cudaSuccess)  // an H100's SMs

namespace cub {
struct DeviceRadixSort {
  // cub's signature for the pairs the launchers sort (keys and values not
  // aliased; temp storage queried with a null pointer first).
  template <class K, class V>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const K* keys_in, K* keys_out,
                               const V* values_in, V* values_out, int n, int begin_bit = 0,
                               int end_bit = static_cast<int>(sizeof(K) * 8),
                               cudaStream_t = nullptr) {
    if (!temp) {
      temp_bytes = 256;
      return cudaSuccess;
    }
    if (temp_bytes < 256 || n < 0 || begin_bit < 0 || end_bit > static_cast<int>(sizeof(K) * 8) ||
        begin_bit > end_bit)
      return cudaErrorInvalidValue;
    std::memset(temp, 0xff, temp_bytes);  // cub's scratch: the caller may not rely on its bytes
    const int bits = end_bit - begin_bit;
    const K mask = bits >= static_cast<int>(sizeof(K) * 8) ? static_cast<K>(~K(0))
                                                           : static_cast<K>((K(1) << bits) - 1);
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return ((keys_in[a] >> begin_bit) & mask) < ((keys_in[b] >> begin_bit) & mask);
    });
    // cub leaves the bits outside [begin_bit, end_bit) as they were.
    std::vector<K> k(static_cast<size_t>(n));
    std::vector<V> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      k[static_cast<size_t>(i)] = keys_in[order[static_cast<size_t>(i)]];
      v[static_cast<size_t>(i)] = values_in[order[static_cast<size_t>(i)]];
    }
    std::copy(k.begin(), k.end(), keys_out);
    std::copy(v.begin(), v.end(), values_out);
    return cudaSuccess;
  }
};
}  // namespace cub
