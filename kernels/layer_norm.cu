// Layer norm kernels. Forward and dx: one block per row, two-pass statistics
// (mean, then the centred sum of squares) in fp32. dgamma/dbeta: per row
// slice partial column sums, added in a fixed order by a finish kernel.
#include "kernels/common.cuh"
#include "kernels/layer_norm.cuh"

namespace rotor::kernels {
namespace {

constexpr int kRowsPerSplit = 256;
constexpr int kColTile = 32, kRowThreads = 8;

template <class T>
__global__ void ln_fwd_kernel(const T* x, const void* gamma, const void* beta, DType pdt,
                              int64_t rows, int64_t n, float eps, T* y, float* mean, float* rstd) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += to_f32(xr[j]);
    const float mu = block_sum(s, scratch) / static_cast<float>(n);
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float d = to_f32(xr[j]) - mu;
      ss += d * d;
    }
    const float var = block_sum(ss, scratch) / static_cast<float>(n);
    const float rs = 1.0f / sqrtf(var + eps);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] =
          from_f32<T>((to_f32(xr[j]) - mu) * rs * load_any(gamma, pdt, j) + load_any(beta, pdt, j));
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    __syncthreads();  // y may alias x
  }
}

template <class T>
__global__ void ln_bwd_dx_kernel(const T* dy, const T* x, const void* gamma, DType pdt,
                                 const float* mean, const float* rstd, int64_t rows, int64_t n,
                                 T* dx) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * n;
    const T* xr = x + r * n;
    T* dxr = dx + r * n;
    const float mu = mean[r], rs = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float g = to_f32(dyr[j]) * load_any(gamma, pdt, j);
      sg += g;
      sgx += g * (to_f32(xr[j]) - mu) * rs;
    }
    const float mg = block_sum(sg, scratch) / static_cast<float>(n);
    const float mgx = block_sum(sgx, scratch) / static_cast<float>(n);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const float xhat = (to_f32(xr[j]) - mu) * rs;
      dxr[j] = from_f32<T>(rs * (to_f32(dyr[j]) * load_any(gamma, pdt, j) - mg - xhat * mgx));
    }
    __syncthreads();  // dx may alias dy
  }
}

// partial: [2, splits, n] = (sum dy * xhat, sum dy) per row slice.
template <class T>
__global__ void ln_bwd_params_partial(const T* dy, const T* x, const float* mean, const float* rstd,
                                      int64_t rows, int64_t n, float* partial, int splits,
                                      int64_t rows_per_split) {
  __shared__ float tg[kRowThreads][kColTile + 1], tb[kRowThreads][kColTile + 1];
  const int64_t col = blockIdx.x * int64_t(kColTile) + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_split;
  const int64_t r1 = min(rows, r0 + rows_per_split);
  float ag = 0.0f, ab = 0.0f;
  if (col < n)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      const float g = to_f32(dy[r * n + col]);
      ag += g * (to_f32(x[r * n + col]) - mean[r]) * rstd[r];
      ab += g;
    }
  tg[threadIdx.y][threadIdx.x] = ag;
  tb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    float sg = 0.0f, sb = 0.0f;
    for (int k = 0; k < kRowThreads; ++k) {
      sg += tg[k][threadIdx.x];
      sb += tb[k][threadIdx.x];
    }
    partial[blockIdx.y * n + col] = sg;
    partial[(int64_t(splits) + blockIdx.y) * n + col] = sb;
  }
}

__global__ void ln_bwd_params_finish(const float* partial, int splits, int64_t n, void* dgamma,
                                     DType gdt, void* dbeta, DType bdt) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < n;
       c += int64_t(gridDim.x) * blockDim.x) {
    double g = 0.0, b = 0.0;
    for (int s = 0; s < splits; ++s) {
      g += partial[s * n + c];
      b += partial[(int64_t(splits) + s) * n + c];
    }
    store_any(dgamma, gdt, c, load_any(dgamma, gdt, c) + static_cast<float>(g));
    store_any(dbeta, bdt, c, load_any(dbeta, bdt, c) + static_cast<float>(b));
  }
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 30) ? rows : (1 << 30));
}

}  // namespace

cudaError_t layer_norm_forward(const void* x, const void* gamma, const void* beta, DType dt,
                               DType param_dt, int64_t rows, int64_t n, float eps, void* y,
                               float* mean, float* rstd, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     ln_fwd_kernel<T><<<row_grid(rows), row_threads(n, 512), 0, stream>>>(
                         static_cast<const T*>(x), gamma, beta, param_dt, rows, n, eps,
                         static_cast<T*>(y), mean, rstd));
  return cudaGetLastError();
}

int layer_norm_backward_splits(int64_t rows) {
  int64_t s = (rows + kRowsPerSplit - 1) / kRowsPerSplit;
  if (s < 1) s = 1;
  if (s > 4096) s = 4096;
  return static_cast<int>(s);
}

cudaError_t layer_norm_backward(const void* dy, const void* x, const void* gamma, DType dt,
                                DType param_dt, const float* mean, const float* rstd, int64_t rows,
                                int64_t n, void* dx, void* dgamma, DType dgamma_dt, void* dbeta,
                                DType dbeta_dt, float* partial, int splits, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const int64_t per = (rows + splits - 1) / splits;
  dim3 grid(static_cast<unsigned>((n + kColTile - 1) / kColTile), static_cast<unsigned>(splits));
  dim3 block(kColTile, kRowThreads);
  // Parameter gradients first: dx may alias dy.
  ROTOR_FLOAT_SWITCH(dt, T,
                     ln_bwd_params_partial<T><<<grid, block, 0, stream>>>(
                         static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd, rows, n,
                         partial, splits, per);
                     ln_bwd_dx_kernel<T><<<row_grid(rows), row_threads(n, 512), 0, stream>>>(
                         static_cast<const T*>(dy), static_cast<const T*>(x), gamma, param_dt, mean,
                         rstd, rows, n, static_cast<T*>(dx)));
  ln_bwd_params_finish<<<grid_for(n), kThreads, 0, stream>>>(partial, splits, n, dgamma, dgamma_dt,
                                                             dbeta, dbeta_dt);
  return cudaGetLastError();
}

}  // namespace rotor::kernels
