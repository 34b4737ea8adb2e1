// Transformer-XL's relative shift (kernels/xl_shift.cuh): element-wise
// gathers and column sums around the cuBLASLt products of ops/xl_bias.cpp.
#include "kernels/common.cuh"
#include "kernels/xl_shift.cuh"

namespace rotor::kernels {

namespace {

// One thread per score (bh, i, j), j fastest.
__global__ void xl_shift_fwd_kernel(const float* __restrict__ g, const float* __restrict__ gv,
                                    const float* __restrict__ cu, float* __restrict__ bias,
                                    int64_t H, int64_t Tq, int64_t Tk, int64_t q_offset,
                                    int64_t n) {
  const int64_t L = q_offset + Tq + Tk - 1;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % Tk, i = (e / Tk) % Tq, bh = e / (Tk * Tq);
    const int64_t l = q_offset + i + Tk - 1 - j;
    bias[e] = g[(bh * Tq + i) * L + l] + gv[(bh % H) * L + l] + cu[bh * Tk + j];
  }
}

// One thread per (bh, i, l), l fastest.
__global__ void xl_shift_bwd_gather_kernel(const float* __restrict__ dbias, float* __restrict__ dg,
                                           int64_t Tq, int64_t Tk, int64_t q_offset, int64_t n) {
  const int64_t L = q_offset + Tq + Tk - 1;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t l = e % L, row = e / L, i = row % Tq;  // row = bh Tq + i
    const int64_t j = q_offset + i + Tk - 1 - l;
    dg[e] = j >= 0 && j < Tk ? dbias[row * Tk + j] : 0.0f;
  }
}

// One thread per (bh, j): the column's sum over the queries.
__global__ void xl_shift_bwd_cols_kernel(const float* __restrict__ dbias, float* __restrict__ dcu,
                                         int64_t Tq, int64_t Tk, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % Tk, bh = e / Tk;
    double s = 0.0;
    for (int64_t i = 0; i < Tq; ++i) s += dbias[(bh * Tq + i) * Tk + j];
    dcu[e] = static_cast<float>(s);
  }
}

// One thread per (h, l): over the batch, then the queries.
__global__ void xl_shift_bwd_heads_kernel(const float* __restrict__ dg, float* __restrict__ dgv,
                                          int64_t B, int64_t H, int64_t Tq, int64_t L, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t l = e % L, h = e / L;
    double s = 0.0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < Tq; ++i) s += dg[((b * H + h) * Tq + i) * L + l];
    dgv[e] = static_cast<float>(s);
  }
}

}  // namespace

cudaError_t xl_shift_forward(const float* g, const float* gv, const float* cu, float* bias,
                             int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t q_offset,
                             cudaStream_t stream) {
  const int64_t n = B * H * Tq * Tk;
  if (n <= 0) return cudaSuccess;
  xl_shift_fwd_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, gv, cu, bias, H, Tq, Tk, q_offset,
                                                            n);
  return cudaGetLastError();
}

cudaError_t xl_shift_backward(const float* dbias, float* dg, float* dgv, float* dcu, int64_t B,
                              int64_t H, int64_t Tq, int64_t Tk, int64_t q_offset,
                              cudaStream_t stream) {
  const int64_t L = q_offset + Tq + Tk - 1;
  if (B * H * Tq * L > 0) {
    const int64_t n = B * H * Tq * L;
    xl_shift_bwd_gather_kernel<<<grid_for(n), kThreads, 0, stream>>>(dbias, dg, Tq, Tk, q_offset,
                                                                     n);
  }
  if (B * H * Tk > 0)
    xl_shift_bwd_cols_kernel<<<grid_for(B * H * Tk), kThreads, 0, stream>>>(dbias, dcu, Tq, Tk,
                                                                            B * H * Tk);
  if (H * L > 0)
    xl_shift_bwd_heads_kernel<<<grid_for(H * L), kThreads, 0, stream>>>(dg, dgv, B, H, Tq, L,
                                                                        H * L);
  return cudaGetLastError();
}

}  // namespace rotor::kernels
