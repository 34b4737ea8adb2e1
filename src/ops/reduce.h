// Reductions. Results that stay on the device are 1-element f32 tensors, so
// that a training step needs no host synchronization.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace rotor::ops {

// out[n] (+)= sum over rows of x[rows, n] (the bias gradient): x of any
// floating dtype, out f32, sums in f32 or better.
void sum_rows(const Tensor& x, Tensor& out, bool accumulate);
// Host values (these synchronize): sum (in double) and the max |x|.
double sum(const Tensor& x);
float max_abs(const Tensor& x);
// sqrt(sum of squares of all tensors) as an f32 [1] tensor on their device.
Tensor global_norm(const std::vector<Tensor>& tensors);
// 1 in an u8 [1] tensor when any element of any tensor is inf or NaN, else 0.
Tensor any_nonfinite(const std::vector<Tensor>& tensors);

}  // namespace rotor::ops
