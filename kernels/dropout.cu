// Dropout kernel: one Philox4x32-10 call yields the four uniforms of elements
// 4g..4g+3 (philox_u32 uses counter index/4 and lane index%4), so each thread
// handles one such group.
#include "core/philox.h"
#include "kernels/common.cuh"
#include "kernels/dropout.cuh"

namespace rotor::kernels {
namespace {

template <class T>
__global__ void dropout_kernel(const T* x, T* y, int64_t n, float p, float keep_scale,
                               uint64_t seed, uint64_t stream_id) {
  const int64_t groups = (n + 3) / 4;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups;
       g += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t block = static_cast<uint64_t>(g);
    const Philox4 r =
        philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                      static_cast<uint32_t>(stream_id), static_cast<uint32_t>(stream_id >> 32),
                      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int64_t i = 4 * g + lane;
      if (i < n) {
        const float u = static_cast<float>(r.v[lane] >> 8) * (1.0f / 16777216.0f);
        y[i] = u >= p ? from_f32<T>(to_f32(x[i]) * keep_scale) : from_f32<T>(0.0f);
      }
    }
  }
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
  const float keep_scale = 1.0f / (1.0f - p);  // as the CPU computes it
  ROTOR_FLOAT_SWITCH(
      dt, T,
      dropout_kernel<T><<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), n, p, keep_scale, seed, stream_id));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
