// CPU rotary position embedding (RoFormer eq. 34, interleaved pairs). The
// angles (t + offset) * theta_i are computed in double: at position ~1500 an
// fp32 angle would already be off by ~1e-4 rad.
#include "ops/rope.h"

#include <cmath>
#include <vector>

#include "ops/cpu_f32.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {
void check_rope(const Tensor& in, const Tensor& out, float base, const char* op) {
  if (in.dim() != 4) ROTOR_FAIL("{}: expected [B, T, H, D], got {}", op, shape_str(in.shape()));
  if (in.size(3) % 2 != 0) ROTOR_FAIL("{}: head dimension D = {} must be even", op, in.size(3));
  if (in.shape() != out.shape())
    ROTOR_FAIL("{}: shapes differ: {} vs {}", op, shape_str(in.shape()), shape_str(out.shape()));
  if (in.dtype() != out.dtype())
    ROTOR_FAIL("{}: dtypes differ: {} vs {}", op, dtype_name(in.dtype()), dtype_name(out.dtype()));
  check_same_device(in, out, op);
  if (!(base > 0.0f)) ROTOR_FAIL("{}: base must be > 0, got {}", op, base);
}

// Rotates every pair of x [B, T, H, D] by sign * (t + offset) * theta_i.
// sign = -1 is the transpose (inverse) rotation, used by the backward.
void rotate(const Tensor& x, Tensor& y, float base, int64_t offset, double sign) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3);
  const int64_t half = D / 2;
  // cos/sin per (t, i), shared by every batch row and head.
  std::vector<float> cos_t(static_cast<size_t>(T * half)), sin_t(cos_t.size());  // [T, D/2]
  for (int64_t i = 0; i < half; ++i) {
    const double theta = std::pow(static_cast<double>(base), -2.0 * i / static_cast<double>(D));
    for (int64_t t = 0; t < T; ++t) {
      const double angle = sign * static_cast<double>(t + offset) * theta;
      cos_t[t * half + i] = static_cast<float>(std::cos(angle));
      sin_t[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  const float* px = x.data<float>();  // [B, T, H, D]
  float* py = y.data<float>();        // [B, T, H, D] (may alias x)
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const float* c = cos_t.data() + t * half;
      const float* s = sin_t.data() + t * half;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base_idx = ((b * T + t) * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = px[base_idx + 2 * i], x1 = px[base_idx + 2 * i + 1];
          py[base_idx + 2 * i] = x0 * c[i] - x1 * s[i];
          py[base_idx + 2 * i + 1] = x1 * c[i] + x0 * s[i];
        }
      }
    }
  }
}
}  // namespace

void rope_forward(const Tensor& x, Tensor& y, float base, int64_t position_offset) {
  check_rope(x, y, base, "rope_forward");
  ROTOR_DISPATCH_CUDA(x, rope_forward(x, y, base, position_offset));
  if (detail::F32Compute::needed({&x})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    rotate(f.input(x), y32, base, position_offset, 1.0);
    f.commit();
    return;
  }
  require_f32(x, "rope_forward");
  rotate(x, y, base, position_offset, 1.0);
}

void rope_backward(const Tensor& dy, Tensor& dx, float base, int64_t position_offset) {
  check_rope(dy, dx, base, "rope_backward");
  ROTOR_DISPATCH_CUDA(dy, rope_backward(dy, dx, base, position_offset));
  if (detail::F32Compute::needed({&dy})) {
    detail::F32Compute f;
    Tensor dx32 = f.output(dx);
    rotate(f.input(dy), dx32, base, position_offset, -1.0);
    f.commit();
    return;
  }
  require_f32(dy, "rope_backward");
  rotate(dy, dx, base, position_offset, -1.0);
}

}  // namespace rotor::ops
