// Transformer-XL's relative shift on the device (ops/xl_bias.h,
// xl_shift_forward / xl_shift_backward; the CPU loops there are the
// reference): with base(i) = q_offset + i + Tk - 1 and L = q_offset + Tq +
// Tk - 1,
//   forward:  bias[bh, i, j] = g[bh, i, base(i) - j] + gv[h, base(i) - j] + cu[bh, j];
//   backward: dg[bh, i, l] = dbias[bh, i, base(i) - l] (0 outside the keys),
//             dcu[bh, j] = sum over i of dbias[bh, i, j],
//             dgv[h, l] = sum over b, then i, of dg[b h, i, l].
// The sums run in double in the CPU's order (the same bits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace rotor::kernels {

cudaError_t xl_shift_forward(const float* g, const float* gv, const float* cu, float* bias,
                             int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t q_offset,
                             cudaStream_t stream);
cudaError_t xl_shift_backward(const float* dbias, float* dg, float* dgv, float* dcu, int64_t B,
                              int64_t H, int64_t Tq, int64_t Tk, int64_t q_offset,
                              cudaStream_t stream);

}  // namespace rotor::kernels
