// DeBERTa's relative rows on the device (ops/deberta_bias.h,
// deberta_gather / deberta_scatter; the CPU loops there are the reference),
// around the cuBLASLt products C2P [B H, Tq, S] and P2C [B H, Tk, S]:
//   gather:  bias[bh, i, j] = c2p[bh, i, r] + scale p2c[bh, j, r], r = rows[i, j];
//   scatter: dc2p[bh, i, s] = sum over j (increasing) with rows[i, j] = s of dbias[bh, i, j],
//            dp2c[bh, j, s] = sum over i (increasing) with rows[i, j] = s of scale dbias[bh, i, j].
// The scatter gives a row to one thread (no atomics; the CPU's order and bits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace rotor::kernels {

cudaError_t deberta_gather(const float* c2p, const float* p2c, const int32_t* rows, float scale,
                           float* bias, int64_t BH, int64_t Tq, int64_t Tk, int64_t S,
                           cudaStream_t stream);
cudaError_t deberta_scatter(const float* dbias, const int32_t* rows, float scale, float* dc2p,
                            float* dp2c, int64_t BH, int64_t Tq, int64_t Tk, int64_t S,
                            cudaStream_t stream);

}  // namespace rotor::kernels
