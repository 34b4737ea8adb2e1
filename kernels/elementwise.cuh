// Element-wise launchers (fp32 math; f32/f16/bf16 storage). Outputs may alias
// inputs of the same dtype. n counts elements; all return cudaGetLastError().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace rotor::kernels {

enum class Act : int { None = 0, ReLU = 1, GELU = 2, SiLU = 3 };

// Any dtype: integer dtypes get the value converted to an integer.
cudaError_t fill(void* x, DType dt, int64_t n, float value, cudaStream_t stream);
// Any floating src/dst dtypes (round to nearest even on the 16-bit side).
cudaError_t cast(const void* src, DType src_dt, void* dst, DType dst_dt, int64_t n,
                 cudaStream_t stream);
cudaError_t add(const void* a, const void* b, void* out, DType dt, int64_t n, cudaStream_t stream);
cudaError_t mul(const void* a, const void* b, void* out, DType dt, int64_t n, cudaStream_t stream);
cudaError_t scale(void* x, DType dt, int64_t n, float s, cudaStream_t stream);
// y = alpha x + beta y; y is not read when beta == 0 (BLAS convention).
cudaError_t axpby(float alpha, const void* x, float beta, void* y, DType dt, int64_t n,
                  cudaStream_t stream);
// x[rows, cols] += bias[cols]; bias may have another floating dtype.
cudaError_t add_bias(void* x, DType dt, const void* bias, DType bias_dt, int64_t rows, int64_t cols,
                     cudaStream_t stream);
// y = act(x). GELU is the tanh approximation; SiLU x / (1 + e^-x).
cudaError_t activation_forward(const void* x, void* y, DType dt, int64_t n, Act act,
                               cudaStream_t stream);
// dx = dy * act'(x), x the pre-activation.
cudaError_t activation_backward(const void* dy, const void* x, void* dx, DType dt, int64_t n,
                                Act act, cudaStream_t stream);
// The gated linear unit (ops/elementwise.h glu_forward): h [rows, 2F], gate
// in columns 0..F-1, value in F..2F-1; y [rows, F] = act(gate) * value.
cudaError_t glu_forward(const void* h, void* y, DType dt, int64_t rows, int64_t F, Act act,
                        cudaStream_t stream);
// dh [rows, 2F] = [dy * value * act'(gate) | dy * act(gate)]; dh may alias h.
cudaError_t glu_backward(const void* dy, const void* h, void* dh, DType dt, int64_t rows, int64_t F,
                         Act act, cudaStream_t stream);
// y = tanh(x) (tanhf).
cudaError_t tanh_forward(const void* x, void* y, DType dt, int64_t n, cudaStream_t stream);
// dx = dy * (1 - y^2), y = tanh(x) as the forward wrote it.
cudaError_t tanh_backward(const void* dy, const void* y, void* dx, DType dt, int64_t n,
                          cudaStream_t stream);

}  // namespace rotor::kernels
