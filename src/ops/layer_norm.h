// Layer normalization over the last dimension; mean and rstd kept in fp32.
// With rms, RMSNorm (Zhang & Sennrich 2019; T5's and Llama's norm): the mean
// is not subtracted (mean is written 0), rstd = 1/sqrt(mean(x^2) + eps), and
// the backward drops the mean's term; beta is added as given (zeros for
// RMSNorm, which has none), dbeta accumulated as for layer norm.
#pragma once

#include "core/tensor.h"

namespace rotor::ops {

// y = (x - mean) * rstd * gamma + beta for x[rows, n]; mean, rstd: f32 [rows].
// y has x's dtype; gamma and beta share one dtype, x's or f32 (mixed precision:
// 16-bit x with the f32 master gamma and beta).
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd, bool rms = false);
// dx is written; dgamma and dbeta [n] (any floating dtype) are accumulated
// (+=), as are all parameter gradients in rotor.
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                         bool rms = false);
// The same with dx = residual + the normalization's dx: a pre-norm residual
// block's input gradient (nn/residual.cpp) in the same pass over the rows,
// where layer_norm_backward and ops::add took two. residual has x's shape
// and dtype; dx may alias dy or residual. In f32 the bits of the two ops.
void layer_norm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                             const Tensor& mean, const Tensor& rstd, const Tensor& residual,
                             Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool rms = false);

}  // namespace rotor::ops
