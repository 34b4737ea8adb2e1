// 16-byte vector access for the bandwidth-bound kernels (element-wise,
// dropout, layer norm, head split and merge, embedding): one LDG.E.128 /
// STG.E.128 moves 8 f16/bf16 or 4 f32 values, converted to and from fp32
// registers. A kernel takes the vector path when its pointers are 16-byte
// aligned and its rows a whole number of vectors (aligned16, whole_vectors),
// and a scalar path otherwise. nvcc-only.
#pragma once

#include <cstdint>

#include "kernels/common.cuh"

namespace rotor::kernels {

// Elements of T in 16 bytes.
template <class T>
struct Vec {
  static constexpr int N = 16 / static_cast<int>(sizeof(T));
};

// v[0..N) = p[0..N) in fp32; p must be 16-byte aligned.
template <class T>
__device__ __forceinline__ void load_vec(const T* __restrict__ p, float (&v)[Vec<T>::N]) {
  union {
    uint4 raw;
    T e[Vec<T>::N];
  } u;
  u.raw = *reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < Vec<T>::N; ++i) v[i] = to_f32(u.e[i]);
}

// p[0..N) = v rounded to T; p must be 16-byte aligned.
template <class T>
__device__ __forceinline__ void store_vec(T* __restrict__ p, const float (&v)[Vec<T>::N]) {
  union {
    uint4 raw;
    T e[Vec<T>::N];
  } u;
#pragma unroll
  for (int i = 0; i < Vec<T>::N; ++i) u.e[i] = from_f32<T>(v[i]);
  *reinterpret_cast<uint4*>(p) = u.raw;
}

// N values (a whole number of 16-byte vectors, or 1) from or to p.
template <class T, int N>
__device__ __forceinline__ void load_n(const T* __restrict__ p, float (&v)[N]) {
  if constexpr (N == 1) {
    v[0] = to_f32(*p);
  } else {
    constexpr int M = Vec<T>::N;
    static_assert(N % M == 0, "N must be a whole number of 16-byte vectors");
#pragma unroll
    for (int b = 0; b < N; b += M) load_vec(p + b, *reinterpret_cast<float(*)[M]>(v + b));
  }
}
template <class T, int N>
__device__ __forceinline__ void store_n(T* __restrict__ p, const float (&v)[N]) {
  if constexpr (N == 1) {
    *p = from_f32<T>(v[0]);
  } else {
    constexpr int M = Vec<T>::N;
    static_assert(N % M == 0, "N must be a whole number of 16-byte vectors");
#pragma unroll
    for (int b = 0; b < N; b += M) store_vec(p + b, *reinterpret_cast<const float(*)[M]>(v + b));
  }
}

// Elements per thread for a kernel reading A and writing B: 16 bytes of the
// narrower type (8 for any 16-bit side, else 4).
template <class A, class B>
constexpr int vec_width() {
  return Vec<A>::N > Vec<B>::N ? Vec<A>::N : Vec<B>::N;
}

// 16 raw bytes (a permutation needs no conversion).
__device__ __forceinline__ uint4 load_raw16(const void* p) {
  return *reinterpret_cast<const uint4*>(p);
}
__device__ __forceinline__ void store_raw16(void* p, uint4 v) {
  *reinterpret_cast<uint4*>(p) = v;
}

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}
// Rows of n elements of `bytes` each split into whole 16-byte vectors.
inline bool whole_vectors(int64_t n, size_t bytes) {
  return (n * static_cast<int64_t>(bytes)) % 16 == 0;
}

// Blocks for a grid-stride loop over `items`, a few waves of the GPU's SMs:
// enough to hide latency, few enough that each thread loops (and keeps its
// index arithmetic out of the loads).
inline unsigned waves_grid(int64_t items, int threads) {
  static int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
      n = 132;
    return n;
  }();
  int64_t blocks = (items + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sms) * 8;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks);
}

}  // namespace rotor::kernels
