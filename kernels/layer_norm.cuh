// Layer normalization over the last dimension with fp32 statistics.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// x, y: [rows, n] of dtype dt; gamma, beta: [n] of param_dt; mean, rstd: f32 [rows].
// rms: RMSNorm (the mean not subtracted, written 0; ops/layer_norm.h).
cudaError_t layer_norm_forward(const void* x, const void* gamma, const void* beta, DType dt,
                               DType param_dt, int64_t rows, int64_t n, float eps, void* y,
                               float* mean, float* rstd, bool rms, cudaStream_t stream);

// Row slices for the parameter gradients; partial holds 2 * splits * n floats.
int layer_norm_backward_splits(int64_t rows);
// dx written; dgamma (dgamma_dt) and dbeta (dbeta_dt) accumulated.
cudaError_t layer_norm_backward(const void* dy, const void* x, const void* gamma, DType dt,
                                DType param_dt, const float* mean, const float* rstd, int64_t rows,
                                int64_t n, void* dx, void* dgamma, DType dgamma_dt, void* dbeta,
                                DType dbeta_dt, float* partial, int splits, bool rms,
                                cudaStream_t stream);

}  // namespace rotor::kernels
