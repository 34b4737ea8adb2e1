// Softmax kernels: one block per row, three passes (max, sum, write); the row
// is re-read from L1/L2 rather than held in registers, so any n works.
#include "kernels/common.cuh"
#include "kernels/softmax.cuh"

namespace rotor::kernels {
namespace {

template <class T>
__global__ void softmax_fwd_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, to_f32(xr[j]));
    mx = block_max(mx, scratch);
    if (mx == -INFINITY) {  // nothing to normalize: zeros, as on the CPU
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = from_f32<T>(0.0f);
      continue;
    }
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += expf(to_f32(xr[j]) - mx);
    s = block_sum(s, scratch);
    const float inv = 1.0f / s;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = from_f32<T>(expf(to_f32(xr[j]) - mx) * inv);
    __syncthreads();  // y may alias x: the next row's reads start after this row's writes
  }
}

template <class T>
__global__ void softmax_bwd_kernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* yr = y + r * n;
    const T* dyr = dy + r * n;
    T* dxr = dx + r * n;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += to_f32(yr[j]) * to_f32(dyr[j]);
    dot = block_sum(dot, scratch);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dxr[j] = from_f32<T>(to_f32(yr[j]) * (to_f32(dyr[j]) - dot));
  }
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 30) ? rows : (1 << 30));
}

}  // namespace

cudaError_t softmax_forward(const void* x, void* y, DType dt, int64_t rows, int64_t n,
                            cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     softmax_fwd_kernel<T><<<row_grid(rows), row_threads(n, 512), 0, stream>>>(
                         static_cast<const T*>(x), static_cast<T*>(y), rows, n));
  return cudaGetLastError();
}

cudaError_t softmax_backward(const void* y, const void* dy, void* dx, DType dt, int64_t rows,
                             int64_t n, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      softmax_bwd_kernel<T><<<row_grid(rows), row_threads(n, 512), 0, stream>>>(
          static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), rows, n));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
