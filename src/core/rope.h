// Rotary position embedding's arithmetic, written once for the CPU head split
// (src/ops/heads.cpp) and its kernel (kernels/heads.cu). RoFormer eq. 34 with
// interleaved pairs: pair i of a head vector is (x[2i], x[2i+1]), rotated at
// position m by the angle m theta_i with theta_i = base^(-2i/D):
//   y[2i]   = x[2i] cos(m theta_i) - x[2i+1] sin(m theta_i)
//   y[2i+1] = x[2i+1] cos(m theta_i) + x[2i] sin(m theta_i)
// Angles are computed in double on both sides and their cosine and sine
// rounded to float: at position ~1500 an fp32 angle would already be off by
// ~1e-4 rad, and both devices then rotate by the same float factors. Never
// compile this with fast-math sin/cos.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"  // ROTOR_HD

namespace rotor::rope {

// theta_i = base^(-2i/D) of pair i of a head of dimension D.
ROTOR_HD double frequency(int64_t pair, int64_t head_dim, double base) {
  return std::pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(head_dim));
}

// cos and sin of the angle of pair `pair` at position `position`.
struct Rotation {
  float cos, sin;
};

ROTOR_HD Rotation rotation(int64_t position, int64_t pair, int64_t head_dim, double base) {
  const double angle = static_cast<double>(position) * frequency(pair, head_dim, base);
  return {static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle))};
}

// (x0, x1) rotated by +angle (eq. 34): the forward.
ROTOR_HD void rotate(float x0, float x1, Rotation r, float& y0, float& y1) {
  y0 = x0 * r.cos - x1 * r.sin;
  y1 = x1 * r.cos + x0 * r.sin;
}

// (x0, x1) rotated by -angle: the transpose of the rotation, which is its
// inverse (the rotation is orthogonal); the backward.
ROTOR_HD void rotate_back(float x0, float x1, Rotation r, float& y0, float& y1) {
  y0 = x0 * r.cos + x1 * r.sin;
  y1 = x1 * r.cos - x0 * r.sin;
}

}  // namespace rotor::rope
