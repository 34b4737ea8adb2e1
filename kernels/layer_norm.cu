// Layer norm kernels, statistics in fp32 with two passes (mean, then the
// centred sum of squares) over values held in registers; with rms (RMSNorm)
// the mean is taken as 0 and the backward drops its term.
//  - Rows of up to 32 * 8 16-byte vectors (2048 f16/bf16, 1024 f32 values;
//    1024 / 512 for the backward) whose pointers are 16-byte aligned: one
//    warp per row, the row in registers, one read of x and one write of y. The
//    backward reads dy and x once, writes dx, and sums dgamma and dbeta into a
//    per-warp slice of shared memory (no atomics), added per block and then
//    across blocks in a fixed order: deterministic.
//  - Otherwise: one block per row, and the parameter gradients from per row
//    slice partial column sums, added in a fixed order by a finish kernel.
#include "kernels/common.cuh"
#include "kernels/layer_norm.cuh"
#include "kernels/vec.cuh"

namespace rotor::kernels {
namespace {

constexpr int kRowsPerSplit = 32;
constexpr int kColTile = 32, kRowThreads = 8;
constexpr int kWarps = 4;       // warps per block of the warp-per-row kernels
constexpr int kMaxVecs = 8;     // 16-byte vectors per lane: rows of up to 256 vectors
constexpr int kMaxBwdVecs = 4;  // backward: 128 vectors (shared memory: kWarps x 2 x n f32)

// ---- one warp per row ----------------------------------------------------------

// Lane `lane` holds vectors lane, lane + 32, ... (k < nv) of a row of nv vectors.
template <class T, int N, int VPT>
__device__ __forceinline__ void load_row(const T* __restrict__ row, int lane, int64_t nv,
                                         float (&v)[VPT][N]) {
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int64_t k = lane + 32 * i;
    if (k < nv) {
      load_vec(row + k * N, v[i]);
    } else {
#pragma unroll
      for (int c = 0; c < N; ++c) v[i][c] = 0.0f;
    }
  }
}

// mean and rstd of a row held by the warp (values beyond the row are 0 and
// excluded from the centred sum); rms: the mean taken as 0.
template <int N, int VPT>
__device__ __forceinline__ void row_stats(const float (&v)[VPT][N], int lane, int64_t nv, int64_t n,
                                          float eps, bool rms, float& mu, float& rs) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i)
#pragma unroll
    for (int c = 0; c < N; ++c) s += v[i][c];
  const float m = warp_sum(s) / static_cast<float>(n);  // every lane shuffles
  mu = rms ? 0.0f : m;
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i)
    if (lane + 32 * i < nv)
#pragma unroll
      for (int c = 0; c < N; ++c) {
        const float d = v[i][c] - mu;
        ss += d * d;
      }
  rs = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(n) + eps);
}

// T the activations, P gamma and beta (T or f32).
template <class T, class P, int VPT>
__global__ void ln_fwd_warp_kernel(const T* x, const P* __restrict__ gamma,
                                   const P* __restrict__ beta, int64_t rows, int64_t n, float eps,
                                   bool rms, T* y, float* __restrict__ mean,
                                   float* __restrict__ rstd) {
  constexpr int N = Vec<T>::N;
  const int lane = threadIdx.x & 31;
  const int64_t nv = n / N;
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + (threadIdx.x >> 5); r < rows; r += warps) {
    float v[VPT][N];
    load_row<T, N, VPT>(x + r * n, lane, nv, v);
    float mu, rs;
    row_stats<N, VPT>(v, lane, nv, n, eps, rms, mu, rs);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t k = lane + 32 * i;
      if (k >= nv) continue;
      float g[N], b[N];
      load_n<P, N>(gamma + k * N, g);
      load_n<P, N>(beta + k * N, b);
#pragma unroll
      for (int c = 0; c < N; ++c) v[i][c] = (v[i][c] - mu) * rs * g[c] + b[c];
      store_vec(y + r * n + k * N, v[i]);  // y may alias x: the row is in registers
    }
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// dx written; per block, column sums of dy * xhat and dy into
// partial[blockIdx.x * n + c] and partial[(splits + blockIdx.x) * n + c].
template <class T, class P, int VPT>
__global__ void ln_bwd_warp_kernel(const T* dy, const T* __restrict__ x,
                                   const P* __restrict__ gamma, const float* __restrict__ mean,
                                   const float* __restrict__ rstd, int64_t rows, int64_t n,
                                   bool rms, T* dx, float* __restrict__ partial, int splits) {
  constexpr int N = Vec<T>::N;
  extern __shared__ float sums[];  // [kWarps][2][n]: this warp's dgamma and dbeta columns
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nv = n / N;
  float* sg = sums + int64_t(warp) * 2 * n;
  float* sb = sg + n;
  for (int64_t c = lane; c < 2 * n; c += 32) sg[c] = 0.0f;
  __syncwarp();  // lanes zeroed columns that other lanes add to
  const int64_t warps = int64_t(gridDim.x) * kWarps;
  for (int64_t r = blockIdx.x * int64_t(kWarps) + warp; r < rows; r += warps) {
    float d[VPT][N], h[VPT][N];
    load_row<T, N, VPT>(dy + r * n, lane, nv, d);
    load_row<T, N, VPT>(x + r * n, lane, nv, h);
    const float mu = mean[r], rs = rstd[r];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t k = lane + 32 * i;
      if (k >= nv) continue;
      float g[N];
      load_n<P, N>(gamma + k * N, g);
#pragma unroll
      for (int c = 0; c < N; ++c) {
        h[i][c] = (h[i][c] - mu) * rs;  // xhat
        sg[k * N + c] += d[i][c] * h[i][c];
        sb[k * N + c] += d[i][c];
        d[i][c] *= g[c];  // dy * gamma
        s1 += d[i][c];
        s2 += d[i][c] * h[i][c];
      }
    }
    const float m1 = warp_sum(s1) / static_cast<float>(n);  // every lane shuffles
    const float mg = rms ? 0.0f : m1;
    const float mgx = warp_sum(s2) / static_cast<float>(n);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int64_t k = lane + 32 * i;
      if (k >= nv) continue;
#pragma unroll
      for (int c = 0; c < N; ++c) d[i][c] = rs * (d[i][c] - mg - h[i][c] * mgx);
      store_vec(dx + r * n + k * N, d[i]);  // dx may alias dy: the row is in registers
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    float g = 0.0f, b = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      g += sums[int64_t(w) * 2 * n + c];
      b += sums[int64_t(w) * 2 * n + n + c];
    }
    partial[blockIdx.x * n + c] = g;
    partial[(int64_t(splits) + blockIdx.x) * n + c] = b;
  }
}

// Vectors per lane for a row of n values of T on the warp path (0: none fits).
template <class T>
int warp_vecs(int64_t n, int max_vecs) {
  const int64_t nv = n / Vec<T>::N;
  for (int vpt = 1; vpt <= max_vecs; vpt *= 2)
    if (nv <= 32 * vpt) return vpt;
  return 0;
}

template <class T, class P>
bool warp_path(int64_t n, int max_vecs, std::initializer_list<const void*> ptrs) {
  if (n % Vec<T>::N != 0 || (n * static_cast<int64_t>(sizeof(P))) % 16 != 0) return false;
  for (const void* p : ptrs)
    if (!aligned16(p)) return false;
  return warp_vecs<T>(n, max_vecs) > 0;
}

template <class T>
__global__ void ln_fwd_kernel(const T* x, const void* gamma, const void* beta, DType pdt,
                              int64_t rows, int64_t n, float eps, bool rms, T* y, float* mean,
                              float* rstd) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s += to_f32(xr[j]);
    const float m = block_sum(s, scratch) / static_cast<float>(n);  // every thread syncs
    const float mu = rms ? 0.0f : m;
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
                                 bool rms, T* dx) {
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
    const float m1 = block_sum(sg, scratch) / static_cast<float>(n);  // every thread syncs
    const float mg = rms ? 0.0f : m1;
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

// Sums partial rows [0, used) of both halves (the second starting at row
// `splits`) in a fixed order and accumulates them into dgamma and dbeta.
__global__ void ln_bwd_params_finish_strided(const float* partial, int used, int splits, int64_t n,
                                             void* dgamma, DType gdt, void* dbeta, DType bdt) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < n;
       c += int64_t(gridDim.x) * blockDim.x) {
    double g = 0.0, b = 0.0;
    for (int s = 0; s < used; ++s) {
      g += partial[s * n + c];
      b += partial[(int64_t(splits) + s) * n + c];
    }
    store_any(dgamma, gdt, c, load_any(dgamma, gdt, c) + static_cast<float>(g));
    store_any(dbeta, bdt, c, load_any(dbeta, bdt, c) + static_cast<float>(b));
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

template <class T, class P>
cudaError_t ln_fwd_warp(const void* x, const void* gamma, const void* beta, int64_t rows, int64_t n,
                        float eps, bool rms, void* y, float* mean, float* rstd,
                        cudaStream_t stream) {
  const unsigned grid = waves_grid((rows + kWarps - 1) / kWarps * 32 * kWarps, 32 * kWarps);
  const T* px = static_cast<const T*>(x);
  const P *pg = static_cast<const P*>(gamma), *pb = static_cast<const P*>(beta);
  T* py = static_cast<T*>(y);
  switch (warp_vecs<T>(n, kMaxVecs)) {
    case 1:
      ln_fwd_warp_kernel<T, P, 1>
          <<<grid, 32 * kWarps, 0, stream>>>(px, pg, pb, rows, n, eps, rms, py, mean, rstd);
      break;
    case 2:
      ln_fwd_warp_kernel<T, P, 2>
          <<<grid, 32 * kWarps, 0, stream>>>(px, pg, pb, rows, n, eps, rms, py, mean, rstd);
      break;
    case 4:
      ln_fwd_warp_kernel<T, P, 4>
          <<<grid, 32 * kWarps, 0, stream>>>(px, pg, pb, rows, n, eps, rms, py, mean, rstd);
      break;
    default:
      ln_fwd_warp_kernel<T, P, 8>
          <<<grid, 32 * kWarps, 0, stream>>>(px, pg, pb, rows, n, eps, rms, py, mean, rstd);
      break;
  }
  return cudaGetLastError();
}

// The warp path of the backward; returns the number of partial rows written.
template <class T, class P>
int ln_bwd_warp(const void* dy, const void* x, const void* gamma, const float* mean,
                const float* rstd, int64_t rows, int64_t n, bool rms, void* dx, float* partial,
                int splits, cudaStream_t stream) {
  // A few blocks per SM: the fewer, the fewer partial rows to add up.
  int blocks = static_cast<int>(waves_grid(rows * 32, 32 * kWarps)) / 2;
  if (blocks < 1) blocks = 1;
  if (blocks > splits) blocks = splits;
  const size_t smem = sizeof(float) * kWarps * 2 * static_cast<size_t>(n);
  const T *pdy = static_cast<const T*>(dy), *px = static_cast<const T*>(x);
  const P* pg = static_cast<const P*>(gamma);
  T* pdx = static_cast<T*>(dx);
  switch (warp_vecs<T>(n, kMaxBwdVecs)) {
    case 1:
      ln_bwd_warp_kernel<T, P, 1><<<blocks, 32 * kWarps, smem, stream>>>(
          pdy, px, pg, mean, rstd, rows, n, rms, pdx, partial, splits);
      break;
    case 2:
      ln_bwd_warp_kernel<T, P, 2><<<blocks, 32 * kWarps, smem, stream>>>(
          pdy, px, pg, mean, rstd, rows, n, rms, pdx, partial, splits);
      break;
    default:
      ln_bwd_warp_kernel<T, P, 4><<<blocks, 32 * kWarps, smem, stream>>>(
          pdy, px, pg, mean, rstd, rows, n, rms, pdx, partial, splits);
      break;
  }
  return blocks;
}

}  // namespace

cudaError_t layer_norm_forward(const void* x, const void* gamma, const void* beta, DType dt,
                               DType param_dt, int64_t rows, int64_t n, float eps, void* y,
                               float* mean, float* rstd, bool rms, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  if (param_dt == DType::F32 || param_dt == dt) {
    ROTOR_FLOAT_SWITCH(
        dt, T,
        if (param_dt == DType::F32 &&
            warp_path<T, float>(
                n, kMaxVecs,
                {x, y, gamma, beta})) return ln_fwd_warp<T, float>(x, gamma, beta, rows, n, eps,
                                                                   rms, y, mean, rstd, stream);
        if (param_dt == dt &&
            warp_path<T, T>(n, kMaxVecs,
                            {x, y, gamma, beta})) return ln_fwd_warp<T, T>(x, gamma, beta, rows, n,
                                                                           eps, rms, y, mean, rstd,
                                                                           stream));
  }
  ROTOR_FLOAT_SWITCH(dt, T,
                     ln_fwd_kernel<T><<<row_grid(rows), row_threads(n, 512), 0, stream>>>(
                         static_cast<const T*>(x), gamma, beta, param_dt, rows, n, eps, rms,
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
                                DType dbeta_dt, float* partial, int splits, bool rms,
                                cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  if (param_dt == DType::F32 || param_dt == dt) {
    int used = 0;
    ROTOR_FLOAT_SWITCH(
        dt, T,
        if (param_dt == DType::F32 && warp_path<T, float>(n, kMaxBwdVecs, {dy, x, dx, gamma}))
            used = ln_bwd_warp<T, float>(dy, x, gamma, mean, rstd, rows, n, rms, dx, partial,
                                         splits, stream);
        else if (param_dt == dt && warp_path<T, T>(n, kMaxBwdVecs, {dy, x, dx, gamma})) used =
            ln_bwd_warp<T, T>(dy, x, gamma, mean, rstd, rows, n, rms, dx, partial, splits, stream));
    if (used > 0) {
      // The finish kernel reads partial rows [0, used) of each half, whose
      // second half starts at row `splits`.
      ln_bwd_params_finish_strided<<<grid_for(n), kThreads, 0, stream>>>(
          partial, used, splits, n, dgamma, dgamma_dt, dbeta, dbeta_dt);
      return cudaGetLastError();
    }
  }
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
                         rstd, rows, n, rms, static_cast<T*>(dx)));
  ln_bwd_params_finish<<<grid_for(n), kThreads, 0, stream>>>(partial, splits, n, dgamma, dgamma_dt,
                                                             dbeta, dbeta_dt);
  return cudaGetLastError();
}

}  // namespace rotor::kernels
