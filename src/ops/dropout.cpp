// CPU dropout: the mask is a pure function of (seed, stream, element index),
// so the backward regenerates it and the GPU draws the very same one.
#include "ops/dropout.h"

#include <algorithm>

#include "core/philox.h"
#include "ops/cpu_f32.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {
void check_dropout(const Tensor& in, const Tensor& out, float p, const char* op) {
  if (in.numel() != out.numel())
    ROTOR_FAIL("{}: element counts differ: {} vs {}", op, shape_str(in.shape()),
               shape_str(out.shape()));
  require_floating(in, op);
  if (in.dtype() != out.dtype())
    ROTOR_FAIL("{}: dtypes differ: {} vs {}", op, dtype_name(in.dtype()), dtype_name(out.dtype()));
  check_same_device(in, out, op);
  // p = 1 would scale by 1/0; a layer that drops everything has no use.
  if (!(p >= 0.0f && p < 1.0f)) ROTOR_FAIL("{}: probability must be in [0, 1), got {}", op, p);
}

// out[i] = (residual[i] +) in[i] * keep(i) / (1 - p): forward and backward
// are the same map. In f32; 16-bit tensors through f32 copies, rounded once.
void apply_mask(const Tensor* residual16, const Tensor& in16, Tensor& out16, float p, uint64_t seed,
                uint64_t stream) {
  detail::F32Compute f;
  const Tensor in = f.input(in16);
  const Tensor res = residual16 ? f.input(*residual16) : Tensor();
  Tensor out = f.output(out16);
  const float* pin = in.data<float>();
  const float* pres = residual16 ? res.data<float>() : nullptr;
  float* pout = out.data<float>();
  const int64_t n = in.numel();
  if (p == 0.0f && !pres) {
    if (pin != pout) out.copy_from(in);
    f.commit();
    return;
  }
  const float keep_scale = 1.0f / (1.0f - p);
  // One Philox block yields the numbers of 4 consecutive elements (element i
  // uses lane i % 4 of block i / 4, as philox_u32 defines), so draw per block.
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const uint64_t block = static_cast<uint64_t>(b);
    const Philox4 r =
        philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                      static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    const int64_t end = std::min<int64_t>(n, 4 * b + 4);
    for (int64_t i = 4 * b; i < end; ++i) {
      const float u = static_cast<float>(r.v[i & 3] >> 8) * (1.0f / 16777216.0f);
      const float d = u >= p ? pin[i] * keep_scale : 0.0f;
      pout[i] = pres ? pres[i] + d : d;
    }
  }
  f.commit();
}
}  // namespace

void dropout_forward(const Tensor& x, Tensor& y, float p, uint64_t seed, uint64_t stream) {
  check_dropout(x, y, p, "dropout_forward");
  ROTOR_DISPATCH_CUDA(x, dropout_forward(x, y, p, seed, stream));
  apply_mask(nullptr, x, y, p, seed, stream);
}

void dropout_backward(const Tensor& dy, Tensor& dx, float p, uint64_t seed, uint64_t stream) {
  check_dropout(dy, dx, p, "dropout_backward");
  ROTOR_DISPATCH_CUDA(dy, dropout_backward(dy, dx, p, seed, stream));
  apply_mask(nullptr, dy, dx, p, seed, stream);
}

void dropout_add_forward(const Tensor& residual, const Tensor& x, float p, uint64_t seed,
                         uint64_t stream, Tensor& out) {
  check_dropout(x, out, p, "dropout_add_forward");
  check_dropout(residual, out, p, "dropout_add_forward residual");
  ROTOR_DISPATCH_CUDA(x, dropout_add_forward(residual, x, p, seed, stream, out));
  apply_mask(&residual, x, out, p, seed, stream);
}

}  // namespace rotor::ops
