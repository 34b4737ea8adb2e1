// TUPE's untied [CLS] (nn/tupe.h) on the positional correlation of every
// head: the token at position 0 takes learned scalars instead of its
// position's correlations. On the CPU and on CUDA (kernels/attention_reference.cu).
#pragma once

#include "core/tensor.h"

namespace rotor::ops {

// c f32 [H, T, T], theta f32 [2, H] on c's device: row 0 of head h (what
// [CLS] attends to) := theta[0, h]; column 0 below it (what attends to
// [CLS]) := theta[1, h].
void tupe_untie_cls(Tensor& c, const Tensor& theta);
// Its backward on the correlation's gradient g f32 [H, T, T]:
// dtheta[1, h] += the sum of g's column 0 below row 0, then row 0 and
// column 0 are zeroed (what reaches the positions). dtheta[0, h] gets
// nothing: theta_1 shifts a whole row of scores alike, which softmax
// cancels (its gradient is exactly zero).
void tupe_untie_cls_backward(Tensor& g, Tensor& dtheta);

}  // namespace rotor::ops
