// Cross-entropy kernels: one block per row. The smoothed loss is
//   -sum_j q_j log p_j = on * nll + off * sum_{j != t} (lse - x_j),
// and sum_{j != t} (lse - x_j) = (V - 1)(lse - max) + sum_{j != t} (max - x_j)
// adds only non-negative terms (no cancellation).
#include "kernels/common.cuh"
#include "kernels/cross_entropy.cuh"

namespace rotor::kernels {
namespace {

// The largest value of a row of `vocab`, on every thread of the block
// (fmaxf: a NaN is never the largest).
template <class T>
__device__ float row_max(const T* xr, int64_t vocab, float* scratch) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) mx = fmaxf(mx, to_f32(xr[j]));
  return block_max(mx, scratch);
}

template <class T>
__global__ void ce_fwd_kernel(const T* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                              double on, double off, int ignore_index, float* loss, float* nll,
                              float* lse) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = logits + r * vocab;
    const float mx = row_max(xr, vocab, scratch);
    float s = 0.0f, gap = 0.0f;  // sum exp(x - max), sum (max - x)
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float x = to_f32(xr[j]);
      s += expf(x - mx);
      gap += mx - x;
    }
    s = block_sum(s, scratch);
    gap = block_sum(gap, scratch);
    if (threadIdx.x == 0) {
      const double l = static_cast<double>(mx) + log(static_cast<double>(s));
      lse[r] = static_cast<float>(l);
      const int32_t t = targets[r];
      if (t == ignore_index) {
        loss[r] = 0.0f;
        nll[r] = 0.0f;
      } else if (t < 0 || t >= vocab) {
        loss[r] = nll[r] = __int_as_float(0x7fc00000);  // NaN: bad target
      } else {
        const double xt = to_f32(xr[t]);
        const double nll_r = l - xt;
        const double rest = static_cast<double>(vocab - 1) * (l - mx) + (gap - (mx - xt));
        nll[r] = static_cast<float>(nll_r);
        loss[r] = static_cast<float>(on * nll_r + off * rest);
      }
    }
    __syncthreads();
  }
}

template <class T>
__global__ void ce_bwd_kernel(const T* logits, const int32_t* targets, const float* lse,
                              int64_t rows, int64_t vocab, float on, float off, int ignore_index,
                              float loss_scale, T* dlogits) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = logits + r * vocab;
    T* dr = dlogits + r * vocab;
    const int32_t t = targets[r];
    const float l = lse[r];
    if (t == ignore_index) {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) dr[j] = from_f32<T>(0.0f);
    } else if (t < 0 || t >= vocab) {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
        dr[j] = from_f32<T>(__int_as_float(0x7fc00000));
    } else {
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
        const float p = expf(to_f32(xr[j]) - l);
        dr[j] = from_f32<T>(loss_scale * (p - (j == t ? on : off)));
      }
    }
  }
}

// The first index of the row's largest value: the block's max, then the
// smallest index holding it (a warp and a block minimum of indices).
template <class T>
__global__ void top1_hits_kernel(const T* logits, const int32_t* targets, int64_t rows,
                                 int64_t vocab, int ignore_index, int32_t* hits) {
  __shared__ float scratch[32];
  __shared__ int64_t first[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = logits + r * vocab;
    const float mx = row_max(xr, vocab, scratch);
    int64_t at = vocab;
    for (int64_t j = threadIdx.x; j < vocab && at == vocab; j += blockDim.x)
      if (to_f32(xr[j]) == mx) at = j;
    for (int o = 16; o > 0; o >>= 1) {
      const int64_t other = __shfl_xor_sync(0xffffffffu, at, o);
      at = other < at ? other : at;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) first[warp] = at;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < nwarps; ++w) at = first[w] < at ? first[w] : at;
      const int32_t t = targets[r];
      hits[r] = (t != ignore_index && at == static_cast<int64_t>(t)) ? 1 : 0;
    }
    __syncthreads();
  }
}

unsigned row_grid(int64_t rows) {
  return static_cast<unsigned>(rows < (1 << 30) ? rows : (1 << 30));
}

}  // namespace

cudaError_t cross_entropy_forward(const void* logits, DType dt, const int32_t* targets,
                                  int64_t rows, int64_t vocab, float smoothing, int ignore_index,
                                  float* loss, float* nll, float* lse, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  const double on = 1.0 - smoothing;
  const double off = vocab > 1 ? static_cast<double>(smoothing) / (vocab - 1) : 0.0;
  ROTOR_FLOAT_SWITCH(dt, T,
                     ce_fwd_kernel<T><<<row_grid(rows), row_threads(vocab, 512), 0, stream>>>(
                         static_cast<const T*>(logits), targets, rows, vocab, on, off, ignore_index,
                         loss, nll, lse));
  return cudaGetLastError();
}

cudaError_t cross_entropy_backward(const void* logits, DType dt, const int32_t* targets,
                                   const float* lse, int64_t rows, int64_t vocab, float smoothing,
                                   int ignore_index, float loss_scale, void* dlogits,
                                   cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  const double on = 1.0 - smoothing;
  const double off = vocab > 1 ? static_cast<double>(smoothing) / (vocab - 1) : 0.0;
  ROTOR_FLOAT_SWITCH(
      dt, T,
      ce_bwd_kernel<T><<<row_grid(rows), row_threads(vocab, 512), 0, stream>>>(
          static_cast<const T*>(logits), targets, lse, rows, vocab, static_cast<float>(on),
          static_cast<float>(off), ignore_index, loss_scale, static_cast<T*>(dlogits)));
  return cudaGetLastError();
}

cudaError_t top1_hits(const void* logits, DType dt, const int32_t* targets, int64_t rows,
                      int64_t vocab, int ignore_index, int32_t* hits, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (vocab <= 0) return cudaMemsetAsync(hits, 0, static_cast<size_t>(rows) * 4, stream);
  ROTOR_FLOAT_SWITCH(dt, T,
                     top1_hits_kernel<T><<<row_grid(rows), row_threads(vocab, 512), 0, stream>>>(
                         static_cast<const T*>(logits), targets, rows, vocab, ignore_index, hits));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
