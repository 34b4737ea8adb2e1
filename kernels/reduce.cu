// Reduction kernels. Column sums: a [32 x 8] thread tile per (column block,
// row slice) writes partials, a second kernel adds the slices in order (in
// double). Whole-tensor reductions: per-block partials in double.
#include "kernels/common.cuh"
#include "kernels/reduce.cuh"

namespace rotor::kernels {
namespace {

constexpr int kRowsPerSplit = 256;
constexpr int kColTile = 32, kRowThreads = 8;

template <class T>
__global__ void sum_rows_partial_kernel(const T* x, int64_t rows, int64_t n, float* partial,
                                        int64_t rows_per_split) {
  __shared__ float tile[kRowThreads][kColTile + 1];
  const int64_t col = blockIdx.x * int64_t(kColTile) + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_split;
  const int64_t r1 = min(rows, r0 + rows_per_split);
  float acc = 0.0f;
  if (col < n)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) acc += to_f32(x[r * n + col]);
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    float s = 0.0f;
    for (int k = 0; k < kRowThreads; ++k) s += tile[k][threadIdx.x];
    partial[blockIdx.y * n + col] = s;
  }
}

__global__ void sum_rows_finish_kernel(const float* partial, int splits, int64_t n, float* out,
                                       bool accumulate) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < n;
       c += int64_t(gridDim.x) * blockDim.x) {
    double acc = accumulate ? out[c] : 0.0;
    for (int s = 0; s < splits; ++s) acc += partial[s * n + c];
    out[c] = static_cast<float>(acc);
  }
}

template <class T, bool kSquare>
__global__ void sum_kernel(const T* x, int64_t n, double* partial) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double v = to_f32(x[i]);
    acc += kSquare ? v * v : v;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__device__ __forceinline__ float nan_max(float a, float b) {
  if (isnan(a)) return a;
  if (isnan(b)) return b;
  return fmaxf(a, b);
}

template <class T>
__global__ void max_abs_kernel(const T* x, int64_t n, float* partial) {
  __shared__ float scratch[32];
  float m = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    m = nan_max(m, fabsf(to_f32(x[i])));
  for (int o = 16; o > 0; o >>= 1) m = nan_max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float r = scratch[0];
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) r = nan_max(r, scratch[w]);
    partial[blockIdx.x] = r;
  }
}

__global__ void global_norm_finish_kernel(const double* slots, int64_t nslots, float* out) {
  __shared__ double scratch[32];
  // Each thread adds a fixed strided subset, then a fixed tree: deterministic.
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < nslots; i += blockDim.x) acc += slots[i];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[0] = static_cast<float>(sqrt(acc));
}

template <class T>
__global__ void nonfinite_kernel(const T* x, int64_t n, uint8_t* flag) {
  bool bad = false;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    bad |= !isfinite(to_f32(x[i]));
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;  // same value from every writer
}

}  // namespace

int sum_rows_splits(int64_t rows) {
  int64_t s = (rows + kRowsPerSplit - 1) / kRowsPerSplit;
  if (s < 1) s = 1;
  if (s > 4096) s = 4096;
  return static_cast<int>(s);
}

cudaError_t sum_rows(const void* x, DType dt, int64_t rows, int64_t n, float* out, bool accumulate,
                     float* partial, int splits, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (rows <= 0) {
    if (!accumulate) return cudaMemsetAsync(out, 0, n * sizeof(float), stream);
    return cudaSuccess;
  }
  const int64_t per = (rows + splits - 1) / splits;
  dim3 grid(static_cast<unsigned>((n + kColTile - 1) / kColTile), static_cast<unsigned>(splits));
  dim3 block(kColTile, kRowThreads);
  ROTOR_FLOAT_SWITCH(dt, T,
                     sum_rows_partial_kernel<T>
                     <<<grid, block, 0, stream>>>(static_cast<const T*>(x), rows, n, partial, per));
  sum_rows_finish_kernel<<<grid_for(n), kThreads, 0, stream>>>(partial, splits, n, out, accumulate);
  return cudaGetLastError();
}

int reduce_blocks(int64_t n) {
  int64_t b = (n + kThreads * 4 - 1) / (kThreads * 4);
  if (b < 1) b = 1;
  if (b > 1024) b = 1024;
  return static_cast<int>(b);
}

cudaError_t sum_partials(const void* x, DType dt, int64_t n, double* partial, int blocks,
                         cudaStream_t stream) {
  ROTOR_FLOAT_SWITCH(dt, T,
                     sum_kernel<T, false>
                     <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), n, partial));
  return cudaGetLastError();
}

cudaError_t max_abs_partials(const void* x, DType dt, int64_t n, float* partial, int blocks,
                             cudaStream_t stream) {
  ROTOR_FLOAT_SWITCH(dt, T,
                     max_abs_kernel<T>
                     <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), n, partial));
  return cudaGetLastError();
}

cudaError_t sumsq_partials(const void* x, DType dt, int64_t n, double* slots, int blocks,
                           cudaStream_t stream) {
  ROTOR_FLOAT_SWITCH(dt, T,
                     sum_kernel<T, true>
                     <<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), n, slots));
  return cudaGetLastError();
}

cudaError_t global_norm_finish(const double* slots, int64_t nslots, float* out,
                               cudaStream_t stream) {
  global_norm_finish_kernel<<<1, 1024, 0, stream>>>(slots, nslots, out);
  return cudaGetLastError();
}

cudaError_t nonfinite_reset(uint8_t* flag, cudaStream_t stream) {
  return cudaMemsetAsync(flag, 0, 1, stream);
}

cudaError_t nonfinite_check(const void* x, DType dt, int64_t n, uint8_t* flag,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(dt, T,
                     nonfinite_kernel<T><<<grid_for(n, kThreads, 4096), kThreads, 0, stream>>>(
                         static_cast<const T*>(x), n, flag));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
