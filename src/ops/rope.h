// Rotary position embedding, RoFormer eq. 34, interleaved pairs:
//   y[2i]   = x[2i] cos(m theta_i) - x[2i+1] sin(m theta_i)
//   y[2i+1] = x[2i+1] cos(m theta_i) + x[2i] sin(m theta_i)
// with theta_i = base^(-2i/D), m = t + position_offset. Angles are computed
// in double on the CPU and fp32-or-better on the GPU (no fast-math sin/cos).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace rotor::ops {

// x, y: [B, T, H, D] with D even (y may alias x).
void rope_forward(const Tensor& x, Tensor& y, float base, int64_t position_offset = 0);
// The transpose of the rotation: rotates by -m theta (dx may alias dy).
void rope_backward(const Tensor& dy, Tensor& dx, float base, int64_t position_offset = 0);

}  // namespace rotor::ops
