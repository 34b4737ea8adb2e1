// Element-wise ops. Outputs may alias inputs of the same shape.
#pragma once

#include "core/tensor.h"
#include "ops/gemm.h"  // Activation

namespace rotor::ops {

void fill(Tensor& x, float value);
// dst = src converted to dst's dtype (any floating dtypes, same element count).
void cast(const Tensor& src, Tensor& dst);
void add(const Tensor& a, const Tensor& b, Tensor& out);          // out = a + b
void mul(const Tensor& a, const Tensor& b, Tensor& out);          // out = a * b
void scale(Tensor& x, float s);                                   // x *= s
void axpby(float alpha, const Tensor& x, float beta, Tensor& y);  // y = alpha x + beta y
// x[rows, n] += bias[n] for every row.
void add_bias(Tensor& x, const Tensor& bias);
void activation_forward(const Tensor& x, Tensor& y, Activation act);
// dx = dy * act'(x), x the pre-activation.
void activation_backward(const Tensor& dy, const Tensor& x, Tensor& dx, Activation act);

}  // namespace rotor::ops
