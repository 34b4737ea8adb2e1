// Row softmax over the last dimension, fp32 statistics. Raw pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

// y[rows, n] = softmax(x) per row; a row of all -inf gives zeros. y may alias x.
cudaError_t softmax_forward(const void* x, void* y, DType dt, int64_t rows, int64_t n,
                            cudaStream_t stream);
// dx = y * (dy - sum(dy * y)) per row; dx may alias dy.
cudaError_t softmax_backward(const void* y, const void* dy, void* dx, DType dt, int64_t rows,
                             int64_t n, cudaStream_t stream);

}  // namespace rotor::kernels
