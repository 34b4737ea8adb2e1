// Element-wise kernels: one pass over memory, fp32 math, 16-byte vectors.
// Each map kernel walks its tensor in vectors of N elements (kernels/vec.cuh:
// one LDG.E.128 / STG.E.128 per 16 bytes) with a grid of a few waves that
// strides over the rest, then finishes the n % N tail element by element.
// Unaligned pointers (views at odd offsets) take the same kernels with N = 1.
#include "kernels/common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/vec.cuh"

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
    case Act::SiLU:
      return x / (1.0f + expf(-x));
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
    case Act::SiLU: {
      float s = 1.0f / (1.0f + expf(-x));
      return s + x * s * (1.0f - s);
    }
    default:
      return 1.0f;
  }
}

// ---- the maps (outputs may alias inputs: no __restrict__ on them) -------------

// y = op(x); S and D the storage types of x and y.
template <class S, class D, int N, class Op>
__global__ void map1_kernel(const S* x, D* y, int64_t n, Op op) {
  const int64_t nv = n / N, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t v = first; v < nv; v += stride) {
    float a[N];
    load_n<S, N>(x + v * N, a);
#pragma unroll
    for (int c = 0; c < N; ++c) a[c] = op(a[c]);
    store_n<D, N>(y + v * N, a);
  }
  for (int64_t i = nv * N + first; i < n; i += stride) y[i] = from_f32<D>(op(to_f32(x[i])));
}

// y = op(a, b).
template <class T, int N, class Op>
__global__ void map2_kernel(const T* a, const T* b, T* y, int64_t n, Op op) {
  const int64_t nv = n / N, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (int64_t v = first; v < nv; v += stride) {
    float p[N], q[N];
    load_n<T, N>(a + v * N, p);
    load_n<T, N>(b + v * N, q);
#pragma unroll
    for (int c = 0; c < N; ++c) p[c] = op(p[c], q[c]);
    store_n<T, N>(y + v * N, p);
  }
  for (int64_t i = nv * N + first; i < n; i += stride)
    y[i] = from_f32<T>(op(to_f32(a[i]), to_f32(b[i])));
}

// The GLU: y[r, j] = act(h[r, j]) * h[r, F + j]; N divides F on the vector path.
template <class T, int N>
__global__ void glu_kernel(const T* h, T* y, int64_t rows, int64_t F, Act act) {
  const int64_t nv = rows * F / N, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nv; v += stride) {
    const int64_t i = v * N, r = i / F, j = i - r * F;
    float g[N], u[N];
    load_n<T, N>(h + 2 * r * F + j, g);
    load_n<T, N>(h + 2 * r * F + F + j, u);
#pragma unroll
    for (int c = 0; c < N; ++c) g[c] = act_fwd(g[c], act) * u[c];
    store_n<T, N>(y + i, g);
  }
}

// Its gradient: dh[r, j] = dy v act'(g), dh[r, F + j] = dy act(g) (ReLU: dy v
// where g > 0, else +0, as ActGradOp). dh may alias h: each thread reads its
// elements before it writes them.
template <class T, int N>
__global__ void glu_grad_kernel(const T* dy, const T* h, T* dh, int64_t rows, int64_t F, Act act) {
  const int64_t nv = rows * F / N, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nv; v += stride) {
    const int64_t i = v * N, r = i / F, j = i - r * F;
    float d[N], g[N], u[N], dg[N], du[N];
    load_n<T, N>(dy + i, d);
    load_n<T, N>(h + 2 * r * F + j, g);
    load_n<T, N>(h + 2 * r * F + F + j, u);
#pragma unroll
    for (int c = 0; c < N; ++c) {
      du[c] = d[c] * act_fwd(g[c], act);
      dg[c] =
          act == Act::ReLU ? (g[c] > 0.0f ? d[c] * u[c] : 0.0f) : d[c] * u[c] * act_grad(g[c], act);
    }
    store_n<T, N>(dh + 2 * r * F + j, dg);
    store_n<T, N>(dh + 2 * r * F + F + j, du);
  }
}

// x[r, :] += bias (B the bias's storage type); N divides cols on the vector path.
template <class T, class B, int N>
__global__ void add_bias_kernel(T* x, const B* __restrict__ bias, int64_t rows, int64_t cols) {
  const int64_t nv = rows * cols / N, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < nv; v += stride) {
    const int64_t col = (v * N) % cols;
    float a[N], b[N];
    load_n<T, N>(x + v * N, a);
#pragma unroll
    for (int c = 0; c < N; ++c) b[c] = to_f32(bias[col + c]);  // small: stays in L1/L2
#pragma unroll
    for (int c = 0; c < N; ++c) a[c] += b[c];
    store_n<T, N>(x + v * N, a);
  }
}

template <class T, int N>
__global__ void fill_float_kernel(T* y, int64_t n, float value) {
  const int64_t nv = n / N, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  float a[N];
#pragma unroll
  for (int c = 0; c < N; ++c) a[c] = value;
  for (int64_t v = first; v < nv; v += stride) store_n<T, N>(y + v * N, a);
  for (int64_t i = nv * N + first; i < n; i += stride) y[i] = from_f32<T>(value);
}

template <class T>
__global__ void fill_int_kernel(T* x, int64_t n, T v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = v;
}

struct ScaleOp {
  float s;
  __device__ float operator()(float x) const { return x * s; }
};
struct ActOp {
  Act act;
  __device__ float operator()(float x) const { return act_fwd(x, act); }
};
struct TanhOp {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct TanhGradOp {  // (dy, y) -> dy * (1 - y^2), y = tanh(x)
  __device__ float operator()(float dy, float y) const { return dy * (1.0f - y * y); }
};
struct IdentityOp {
  __device__ float operator()(float x) const { return x; }
};
struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};
struct AxpbyOp {
  float alpha, beta;
  __device__ float operator()(float x, float y) const { return alpha * x + beta * y; }
};
struct ActGradOp {  // (dy, x) -> dy * act'(x)
  Act act;
  // ReLU passes dy where x > 0 and +0 elsewhere, as the CPU and PyTorch do:
  // dy * 0 would give -0 for a negative dy and NaN for an inf or NaN one.
  __device__ float operator()(float dy, float x) const {
    if (act == Act::ReLU) return x > 0.0f ? dy : 0.0f;
    return dy * act_grad(x, act);
  }
};

// ---- launchers ------------------------------------------------------------------

template <class S, class D, class Op>
cudaError_t map1(const void* x, void* y, int64_t n, Op op, cudaStream_t stream) {
  const S* xs = static_cast<const S*>(x);
  D* yd = static_cast<D*>(y);
  constexpr int N = vec_width<S, D>();
  if (aligned16(x) && aligned16(y))
    map1_kernel<S, D, N, Op>
        <<<waves_grid(n / N + 1, kThreads), kThreads, 0, stream>>>(xs, yd, n, op);
  else
    map1_kernel<S, D, 1, Op><<<waves_grid(n, kThreads), kThreads, 0, stream>>>(xs, yd, n, op);
  return cudaGetLastError();
}

template <class T, class Op>
cudaError_t map2(const void* a, const void* b, void* y, int64_t n, Op op, cudaStream_t stream) {
  const T *pa = static_cast<const T*>(a), *pb = static_cast<const T*>(b);
  T* py = static_cast<T*>(y);
  constexpr int N = Vec<T>::N;
  if (aligned16(a) && aligned16(b) && aligned16(y))
    map2_kernel<T, N, Op>
        <<<waves_grid(n / N + 1, kThreads), kThreads, 0, stream>>>(pa, pb, py, n, op);
  else
    map2_kernel<T, 1, Op><<<waves_grid(n, kThreads), kThreads, 0, stream>>>(pa, pb, py, n, op);
  return cudaGetLastError();
}

template <class S>
cudaError_t cast_from(const S* src, void* dst, DType dst_dt, int64_t n, cudaStream_t stream) {
  ROTOR_FLOAT_SWITCH(dst_dt, D, return map1<S, D>(src, dst, n, IdentityOp{}, stream));
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill(void* x, DType dt, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  switch (dt) {
    case DType::I32:
      fill_int_kernel<int32_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<int32_t*>(x), n,
                                                                     static_cast<int32_t>(value));
      return cudaGetLastError();
    case DType::U8:
      fill_int_kernel<uint8_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<uint8_t*>(x), n,
                                                                     static_cast<uint8_t>(value));
      return cudaGetLastError();
    default:
      break;
  }
  ROTOR_FLOAT_SWITCH(
      dt, T, constexpr int N = Vec<T>::N; if (aligned16(x)) fill_float_kernel<T, N>
      <<<waves_grid(n / N + 1, kThreads), kThreads, 0, stream>>>(static_cast<T*>(x), n, value);
      else fill_float_kernel<T, 1>
      <<<waves_grid(n, kThreads), kThreads, 0, stream>>>(static_cast<T*>(x), n, value));
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
  ROTOR_FLOAT_SWITCH(dt, T, return map2<T>(a, b, out, n, AddOp{}, stream));
  return cudaGetLastError();
}

cudaError_t mul(const void* a, const void* b, void* out, DType dt, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return map2<T>(a, b, out, n, MulOp{}, stream));
  return cudaGetLastError();
}

cudaError_t scale(void* x, DType dt, int64_t n, float s, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return map1<T, T>(x, x, n, ScaleOp{s}, stream));
  return cudaGetLastError();
}

cudaError_t axpby(float alpha, const void* x, float beta, void* y, DType dt, int64_t n,
                  cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  // beta == 0 never reads y (BLAS): a NaN there must not leak.
  if (beta == 0.0f) {
    ROTOR_FLOAT_SWITCH(dt, T, return map1<T, T>(x, y, n, ScaleOp{alpha}, stream));
  }
  ROTOR_FLOAT_SWITCH(dt, T, return map2<T>(x, y, y, n, AxpbyOp{alpha, beta}, stream));
  return cudaGetLastError();
}

cudaError_t add_bias(void* x, DType dt, const void* bias, DType bias_dt, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      ROTOR_FLOAT_SWITCH(
          bias_dt, B, constexpr int N = Vec<T>::N; T* px = static_cast<T*>(x);
          const B* pb = static_cast<const B*>(bias);
          if (aligned16(x) && cols % N == 0) add_bias_kernel<T, B, N>
          <<<waves_grid(rows * cols / N, kThreads), kThreads, 0, stream>>>(px, pb, rows, cols);
          else add_bias_kernel<T, B, 1>
          <<<waves_grid(rows * cols, kThreads), kThreads, 0, stream>>>(px, pb, rows, cols)));
  return cudaGetLastError();
}

cudaError_t activation_forward(const void* x, void* y, DType dt, int64_t n, Act act,
                               cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return map1<T, T>(x, y, n, ActOp{act}, stream));
  return cudaGetLastError();
}

cudaError_t activation_backward(const void* dy, const void* x, void* dx, DType dt, int64_t n,
                                Act act, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return map2<T>(dy, x, dx, n, ActGradOp{act}, stream));
  return cudaGetLastError();
}

namespace {

template <class T>
cudaError_t glu_forward_as(const void* h, void* y, int64_t rows, int64_t F, Act act,
                           cudaStream_t stream) {
  const T* ph = static_cast<const T*>(h);
  T* py = static_cast<T*>(y);
  constexpr int N = Vec<T>::N;
  const int64_t n = rows * F;
  if (F % N == 0 && aligned16(h) && aligned16(y))
    glu_kernel<T, N>
        <<<waves_grid(n / N + 1, kThreads), kThreads, 0, stream>>>(ph, py, rows, F, act);
  else
    glu_kernel<T, 1><<<waves_grid(n, kThreads), kThreads, 0, stream>>>(ph, py, rows, F, act);
  return cudaGetLastError();
}

template <class T>
cudaError_t glu_backward_as(const void* dy, const void* h, void* dh, int64_t rows, int64_t F,
                            Act act, cudaStream_t stream) {
  const T *pdy = static_cast<const T*>(dy), *ph = static_cast<const T*>(h);
  T* pdh = static_cast<T*>(dh);
  constexpr int N = Vec<T>::N;
  const int64_t n = rows * F;
  if (F % N == 0 && aligned16(dy) && aligned16(h) && aligned16(dh))
    glu_grad_kernel<T, N>
        <<<waves_grid(n / N + 1, kThreads), kThreads, 0, stream>>>(pdy, ph, pdh, rows, F, act);
  else
    glu_grad_kernel<T, 1>
        <<<waves_grid(n, kThreads), kThreads, 0, stream>>>(pdy, ph, pdh, rows, F, act);
  return cudaGetLastError();
}

}  // namespace

cudaError_t glu_forward(const void* h, void* y, DType dt, int64_t rows, int64_t F, Act act,
                        cudaStream_t stream) {
  if (rows <= 0 || F <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return glu_forward_as<T>(h, y, rows, F, act, stream));
  return cudaGetLastError();
}

cudaError_t glu_backward(const void* dy, const void* h, void* dh, DType dt, int64_t rows, int64_t F,
                         Act act, cudaStream_t stream) {
  if (rows <= 0 || F <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return glu_backward_as<T>(dy, h, dh, rows, F, act, stream));
  return cudaGetLastError();
}

cudaError_t tanh_forward(const void* x, void* y, DType dt, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return map1<T, T>(x, y, n, TanhOp{}, stream));
  return cudaGetLastError();
}

cudaError_t tanh_backward(const void* dy, const void* y, void* dx, DType dt, int64_t n,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T, return map2<T>(dy, y, dx, n, TanhGradOp{}, stream));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
