// Dropout kernels. One Philox4x32-10 call yields the four uniforms of elements
// 4g..4g+3 (philox_u32 uses counter index/4 and lane index%4); a thread takes
// one 16-byte vector of elements (4 f32 or 8 f16/bf16: one or two calls) and,
// for dropout_add, the residual's vector beside it.
#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/dropout.cuh"
#include "kernels/vec.cuh"

namespace rotor::kernels {
namespace {

// The keep factors (0 or keep_scale) of the four elements of Philox block g.
__device__ __forceinline__ void keep4(uint64_t g, float p, float keep_scale, uint64_t seed,
                                      uint64_t stream_id, float (&k)[4]) {
  const Philox4 r =
      philox4x32_10(static_cast<uint32_t>(g), static_cast<uint32_t>(g >> 32),
                    static_cast<uint32_t>(stream_id), static_cast<uint32_t>(stream_id >> 32),
                    static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
#pragma unroll
  for (int l = 0; l < 4; ++l) {
    const float u = static_cast<float>(r.v[l] >> 8) * (1.0f / 16777216.0f);
    k[l] = u >= p ? keep_scale : 0.0f;
  }
}

// G elements per thread (a multiple of 4); VEC: 16-byte loads and stores,
// else element by element (unaligned views). y may alias x or residual.
template <class T, int G, bool VEC, bool ADD>
__global__ void dropout_kernel(const T* residual, const T* x, T* y, int64_t n, float p,
                               float keep_scale, uint64_t seed, uint64_t stream_id) {
  const int64_t ng = n / G, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t v = first; v < ng; v += stride) {
    const int64_t i0 = v * G;
    float a[G], r[G];
    if constexpr (VEC) {
      load_n<T, G>(x + i0, a);
      if constexpr (ADD) load_n<T, G>(residual + i0, r);
    } else {
#pragma unroll
      for (int c = 0; c < G; ++c) {
        a[c] = to_f32(x[i0 + c]);
        if constexpr (ADD) r[c] = to_f32(residual[i0 + c]);
      }
    }
#pragma unroll
    for (int g = 0; g < G / 4; ++g) {
      float k[4];
      keep4(static_cast<uint64_t>(i0 / 4 + g), p, keep_scale, seed, stream_id, k);
#pragma unroll
      for (int l = 0; l < 4; ++l) {
        const float d = k[l] != 0.0f ? a[4 * g + l] * k[l] : 0.0f;  // the CPU's +0
        a[4 * g + l] = ADD ? r[4 * g + l] + d : d;
      }
    }
    if constexpr (VEC) {
      store_n<T, G>(y + i0, a);
    } else {
#pragma unroll
      for (int c = 0; c < G; ++c) y[i0 + c] = from_f32<T>(a[c]);
    }
  }
  // The last n % G elements (fewer than one vector): one thread each.
  for (int64_t i = ng * G + first; i < n; i += stride) {
    float k[4];
    keep4(static_cast<uint64_t>(i / 4), p, keep_scale, seed, stream_id, k);
    const float d = k[i & 3] != 0.0f ? to_f32(x[i]) * k[i & 3] : 0.0f;
    y[i] = from_f32<T>(ADD ? to_f32(residual[i]) + d : d);
  }
}

template <class T, bool ADD>
cudaError_t launch(const void* residual, const void* x, void* y, int64_t n, float p, uint64_t seed,
                   uint64_t stream_id, cudaStream_t stream) {
  constexpr int G = Vec<T>::N < 4 ? 4 : Vec<T>::N;
  const float keep_scale = 1.0f / (1.0f - p);  // as the CPU computes it
  const T* pr = static_cast<const T*>(residual);
  const T* px = static_cast<const T*>(x);
  T* py = static_cast<T*>(y);
  const unsigned grid = waves_grid(n / G + 1, kThreads);
  if (aligned16(x) && aligned16(y) && (!ADD || aligned16(residual)))
    dropout_kernel<T, G, true, ADD>
        <<<grid, kThreads, 0, stream>>>(pr, px, py, n, p, keep_scale, seed, stream_id);
  else
    dropout_kernel<T, G, false, ADD>
        <<<grid, kThreads, 0, stream>>>(pr, px, py, n, p, keep_scale, seed, stream_id);
  return cudaGetLastError();
}

}  // namespace

cudaError_t dropout_apply(const void* x, void* y, DType dt, int64_t n, float p, uint64_t seed,
                          uint64_t stream_id, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (p == 0.0f) {
    if (x == y) return cudaSuccess;
    return cudaMemcpyAsync(y, x, static_cast<size_t>(n) * dtype_size(dt), cudaMemcpyDeviceToDevice,
                           stream);
  }
  ROTOR_FLOAT_SWITCH(dt, T, return launch<T, false>(nullptr, x, y, n, p, seed, stream_id, stream));
  return cudaGetLastError();
}

cudaError_t dropout_add(const void* residual, const void* x, void* y, DType dt, int64_t n, float p,
                        uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  // p == 0 keeps everything: keep_scale 1 and every uniform >= 0.
  ROTOR_FLOAT_SWITCH(dt, T, return launch<T, true>(residual, x, y, n, p, seed, stream_id, stream));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
