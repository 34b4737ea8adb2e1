// Softmax over the last dimension, statistics in fp32.
#pragma once

#include "core/tensor.h"

namespace rotor::ops {

// y[rows, n] = softmax(x[rows, n]) along n.
void softmax_forward(const Tensor& x, Tensor& y);
// dx = y * (dy - sum(dy * y)) along n.
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

}  // namespace rotor::ops
