// DeBERTa's relative rows (kernels/deberta_rows.cuh).
#include "kernels/common.cuh"
#include "kernels/deberta_rows.cuh"

namespace rotor::kernels {

namespace {

// One thread per score (bh, i, j), j fastest.
__global__ void deberta_gather_kernel(const float* __restrict__ c2p, const float* __restrict__ p2c,
                                      const int32_t* __restrict__ rows, float scale,
                                      float* __restrict__ bias, int64_t Tq, int64_t Tk, int64_t S,
                                      int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % Tk, row = e / Tk, i = row % Tq, bh = row / Tq;  // row = bh Tq + i
    const int64_t r = rows[i * Tk + j];
    bias[e] = c2p[row * S + r] + scale * p2c[(bh * Tk + j) * S + r];
  }
}

// One thread per (bh, i): dc2p's row i, the keys in order.
__global__ void deberta_scatter_queries_kernel(const float* __restrict__ dbias,
                                               const int32_t* __restrict__ rows,
                                               float* __restrict__ dc2p, int64_t Tq, int64_t Tk,
                                               int64_t S, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % Tq;  // e = bh Tq + i
    float* out = dc2p + e * S;
    for (int64_t s = 0; s < S; ++s) out[s] = 0.0f;
    const float* g = dbias + e * Tk;
    for (int64_t j = 0; j < Tk; ++j) out[rows[i * Tk + j]] += g[j];
  }
}

// One thread per (bh, j): dp2c's row j, the queries in order.
__global__ void deberta_scatter_keys_kernel(const float* __restrict__ dbias,
                                            const int32_t* __restrict__ rows, float scale,
                                            float* __restrict__ dp2c, int64_t Tq, int64_t Tk,
                                            int64_t S, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % Tk, bh = e / Tk;
    float* out = dp2c + e * S;
    for (int64_t s = 0; s < S; ++s) out[s] = 0.0f;
    const float* g = dbias + bh * Tq * Tk + j;
    for (int64_t i = 0; i < Tq; ++i) out[rows[i * Tk + j]] += scale * g[i * Tk];
  }
}

}  // namespace

cudaError_t deberta_gather(const float* c2p, const float* p2c, const int32_t* rows, float scale,
                           float* bias, int64_t BH, int64_t Tq, int64_t Tk, int64_t S,
                           cudaStream_t stream) {
  const int64_t n = BH * Tq * Tk;
  if (n <= 0) return cudaSuccess;
  deberta_gather_kernel<<<grid_for(n), kThreads, 0, stream>>>(c2p, p2c, rows, scale, bias, Tq, Tk,
                                                              S, n);
  return cudaGetLastError();
}

cudaError_t deberta_scatter(const float* dbias, const int32_t* rows, float scale, float* dc2p,
                            float* dp2c, int64_t BH, int64_t Tq, int64_t Tk, int64_t S,
                            cudaStream_t stream) {
  if (BH * Tq > 0)
    deberta_scatter_queries_kernel<<<grid_for(BH * Tq), kThreads, 0, stream>>>(dbias, rows, dc2p,
                                                                               Tq, Tk, S, BH * Tq);
  if (BH * Tk > 0)
    deberta_scatter_keys_kernel<<<grid_for(BH * Tk), kThreads, 0, stream>>>(
        dbias, rows, scale, dp2c, Tq, Tk, S, BH * Tk);
  return cudaGetLastError();
}

}  // namespace rotor::kernels
