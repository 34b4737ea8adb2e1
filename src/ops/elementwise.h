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
// The gated linear unit of a gated feed-forward (Shazeer 2020, "GLU Variants
// Improve Transformer"; SwiGLU with SiLU): h [..., 2F] holds the gate in
// columns 0..F-1 and the value in F..2F-1; y [..., F] = act(gate) * value.
// Activation None is the bilinear variant.
void glu_forward(const Tensor& h, Tensor& y, Activation act);
// dh [..., 2F] = [dy * value * act'(gate) | dy * act(gate)].
void glu_backward(const Tensor& dy, const Tensor& h, Tensor& dh, Activation act);
// y = tanh(x) (BERT's pooler, label attention): on the CPU within ~2e-7 of
// std::tanh (ops/cpu_rows.h tanh_row), on CUDA tanhf.
void tanh_forward(const Tensor& x, Tensor& y);
// dx = dy * (1 - y^2), y = tanh_forward's output.
void tanh_backward(const Tensor& dy, const Tensor& y, Tensor& dx);

namespace detail {
// The CPU GEMM's epilogue on f32 rows c[rows, n], fused: c += bias (if not
// null), pre = c (if not null), c = act(c). The bits of add_bias, a copy and
// activation_forward one after the other; one pass over c instead of three.
void bias_activation_rows(float* c, const float* bias, float* pre, int64_t rows, int64_t n,
                          Activation act);
}  // namespace detail

}  // namespace rotor::ops
