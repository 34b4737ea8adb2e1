// Element-wise kernels: grid-stride loops, fp32 math, one pass over memory.
#include "kernels/common.cuh"
#include "kernels/elementwise.cuh"

namespace rotor::kernels {
namespace {

// GELU, tanh approximation (Hendrycks & Gimpel; cuBLASLt's GELU epilogue).
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

__device__ __forceinline__ float act_fwd(float x, Act act) {
  switch (act) {
    case Act::ReLU:
      return x > 0.0f ? x : 0.0f;
    case Act::GELU: {
      float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
      return 0.5f * x * (1.0f + t);
    }
    default:
      return x;
  }
}
__device__ __forceinline__ float act_grad(float x, Act act) {
  switch (act) {
    case Act::ReLU:
      return x > 0.0f ? 1.0f : 0.0f;
    case Act::GELU: {
      float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
      float dinner = kGeluC * (1.0f + 3.0f * kGeluA * x * x);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
    }
    default:
      return 1.0f;
  }
}

template <class T>
__global__ void fill_kernel(T* x, int64_t n, T v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

template <class S, class D>
__global__ void cast_kernel(const S* src, D* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = from_f32<D>(to_f32(src[i]));
}

template <class T, bool kMul>
__global__ void binary_kernel(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float x = to_f32(a[i]), y = to_f32(b[i]);
    out[i] = from_f32<T>(kMul ? x * y : x + y);
  }
}

template <class T>
__global__ void scale_kernel(T* x, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = from_f32<T>(to_f32(x[i]) * s);
}

template <class T>
__global__ void axpby_kernel(float alpha, const T* x, float beta, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float r = alpha * to_f32(x[i]);
    if (beta != 0.0f) r += beta * to_f32(y[i]);
    y[i] = from_f32<T>(r);
  }
}

template <class T>
__global__ void add_bias_kernel(T* x, const void* bias, DType bias_dt, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = from_f32<T>(to_f32(x[i]) + load_any(bias, bias_dt, i % cols));
}

template <class T>
__global__ void act_fwd_kernel(const T* x, T* y, int64_t n, Act act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(act_fwd(to_f32(x[i]), act));
}

template <class T>
__global__ void act_bwd_kernel(const T* dy, const T* x, T* dx, int64_t n, Act act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dx[i] = from_f32<T>(to_f32(dy[i]) * act_grad(to_f32(x[i]), act));
}

template <class S>
cudaError_t cast_from(const S* src, void* dst, DType dst_dt, int64_t n, cudaStream_t stream) {
  ROTOR_FLOAT_SWITCH(dst_dt, D,
                     cast_kernel<S, D>
                     <<<grid_for(n), kThreads, 0, stream>>>(src, static_cast<D*>(dst), n));
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill(void* x, DType dt, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (dt) {
    case DType::I32:
      fill_kernel<int32_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<int32_t*>(x), n,
                                                                 static_cast<int32_t>(value));
      break;
    case DType::U8:
      fill_kernel<uint8_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<uint8_t*>(x), n,
                                                                 static_cast<uint8_t>(value));
      break;
    case DType::F32:
      fill_kernel<float><<<grid_for(n), kThreads, 0, stream>>>(static_cast<float*>(x), n, value);
      break;
    case DType::F16:
      fill_kernel<uint16_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<uint16_t*>(x), n,
                                                                  float_to_half_bits(value));
      break;
    case DType::BF16:
      fill_kernel<uint16_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<uint16_t*>(x), n,
                                                                  float_to_bf16_bits(value));
      break;
  }
  return cudaGetLastError();
}

cudaError_t cast(const void* src, DType src_dt, void* dst, DType dst_dt, int64_t n,
                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(src_dt, S,
                     return cast_from<S>(static_cast<const S*>(src), dst, dst_dt, n, stream));
  return cudaGetLastError();
}

cudaError_t add(const void* a, const void* b, void* out, DType dt, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      binary_kernel<T, false><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n));
  return cudaGetLastError();
}

cudaError_t mul(const void* a, const void* b, void* out, DType dt, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      binary_kernel<T, true><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n));
  return cudaGetLastError();
}

cudaError_t scale(void* x, DType dt, int64_t n, float s, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T, scale_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(x), n, s));
  return cudaGetLastError();
}

cudaError_t axpby(float alpha, const void* x, float beta, void* y, DType dt, int64_t n,
                  cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     axpby_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
                         alpha, static_cast<const T*>(x), beta, static_cast<T*>(y), n));
  return cudaGetLastError();
}

cudaError_t add_bias(void* x, DType dt, const void* bias, DType bias_dt, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     add_bias_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
                         static_cast<T*>(x), bias, bias_dt, rows, cols));
  return cudaGetLastError();
}

cudaError_t activation_forward(const void* x, void* y, DType dt, int64_t n, Act act,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     act_fwd_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
                         static_cast<const T*>(x), static_cast<T*>(y), n, act));
  return cudaGetLastError();
}

cudaError_t activation_backward(const void* dy, const void* x, void* dx, DType dt, int64_t n,
                                Act act, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      act_bwd_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
          static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), n, act));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
