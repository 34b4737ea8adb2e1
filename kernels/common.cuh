// Shared device helpers for rotor's kernels: fp32 load/store of the three
// floating storage types, warp/block reductions, launch-size helpers and the
// dtype switch the launchers use. nvcc-only; no rotor headers beyond dtype.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// ---- fp32 load/store ---------------------------------------------------------
__device__ __forceinline__ float to_f32(float x) {
  return x;
}
__device__ __forceinline__ float to_f32(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Element i of a floating buffer whose dtype is only known at run time (for
// small side inputs such as biases and norm parameters, which may be f32 while
// the activations are 16-bit).
__device__ __forceinline__ float load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case DType::BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}
__device__ __forceinline__ void store_any(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    case DType::BF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
      break;
  }
}

// ---- reductions ---------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a 1-D block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `scratch` holds 32 values; the block may call this
// repeatedly (it synchronizes before reusing the scratch).
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = lane < nwarps ? scratch[lane] : T(0);
  return warp_sum(r);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = lane < nwarps ? scratch[lane] : -INFINITY;
  return warp_max(r);
}

// ---- launch helpers -----------------------------------------------------------
constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items (capped; the loop covers the rest).
inline unsigned grid_for(int64_t n, int threads = kThreads, int64_t cap = 65535) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > cap) b = cap;
  return static_cast<unsigned>(b);
}

// Threads for a block that owns one row of n elements: a multiple of 32 in [32, 1024].
inline int row_threads(int64_t n, int max_threads = 256) {
  int64_t t = ((n + 31) / 32) * 32;
  if (t < 32) t = 32;
  if (t > max_threads) t = max_threads;
  return static_cast<int>(t);
}

}  // namespace rotor::kernels

// Runs `...` with T bound to the storage type of floating dtype `dt`; an
// unsupported dtype makes the enclosing launcher return cudaErrorInvalidValue.
// ROTOR_HALF_SWITCH takes the 16-bit types only (tensor-core kernels).
#define ROTOR_HALF_CASES_(T, ...) \
  case ::rotor::DType::F16: {     \
    using T = __half;             \
    __VA_ARGS__;                  \
  } break;                        \
  case ::rotor::DType::BF16: {    \
    using T = __nv_bfloat16;      \
    __VA_ARGS__;                  \
  } break;
#define ROTOR_FLOAT_SWITCH(dt, T, ...)  \
  switch (dt) {                         \
    case ::rotor::DType::F32: {         \
      using T = float;                  \
      __VA_ARGS__;                      \
    } break;                            \
      ROTOR_HALF_CASES_(T, __VA_ARGS__) \
    default:                            \
      return cudaErrorInvalidValue;     \
  }
#define ROTOR_HALF_SWITCH(dt, T, ...) \
  switch (dt) {                       \
    ROTOR_HALF_CASES_(T, __VA_ARGS__) \
    default:                          \
      return cudaErrorInvalidValue;   \
  }
