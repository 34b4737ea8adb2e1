#include "ops/tupe_cls.h"

#include "core/error.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {

void check_cls(const Tensor& c, const Tensor& theta, const char* op) {
  ROTOR_CHECK(c.dim() == 3 && c.size(1) == c.size(2) && c.size(1) > 0 && c.dtype() == DType::F32,
              "{}: the correlation must be f32 [H, T, T], got {}", op, c.str());
  ROTOR_CHECK(theta.dim() == 2 && theta.size(0) == 2 && theta.size(1) == c.size(0) &&
                  theta.dtype() == DType::F32 && theta.device() == c.device(),
              "{}: theta must be f32 [2, {}] on {}, got {}", op, c.size(0), c.device().str(),
              theta.str());
}

}  // namespace

void tupe_untie_cls(Tensor& c, const Tensor& theta) {
  check_cls(c, theta, "tupe_untie_cls");
  ROTOR_DISPATCH_CUDA(c, tupe_untie_cls(c, theta));
  const int64_t H = c.size(0), T = c.size(1);
  const float* th = theta.data<float>();  // [2, H]
  float* pc = c.data<float>();            // [H, T, T]
  for (int64_t h = 0; h < H; ++h) {
    float* ch = pc + h * T * T;
    for (int64_t j = 0; j < T; ++j) ch[j] = th[h];
    for (int64_t i = 1; i < T; ++i) ch[i * T] = th[H + h];
  }
}

void tupe_untie_cls_backward(Tensor& g, Tensor& dtheta) {
  check_cls(g, dtheta, "tupe_untie_cls_backward");
  ROTOR_DISPATCH_CUDA(g, tupe_untie_cls_backward(g, dtheta));
  const int64_t H = g.size(0), T = g.size(1);
  float* pg = g.data<float>();        // [H, T, T]
  float* dth = dtheta.data<float>();  // [2, H]
  for (int64_t h = 0; h < H; ++h) {
    float* gh = pg + h * T * T;
    double col = 0.0;
    for (int64_t j = 0; j < T; ++j) gh[j] = 0.0f;
    for (int64_t i = 1; i < T; ++i) {
      col += gh[i * T];
      gh[i * T] = 0.0f;
    }
    dth[H + h] += static_cast<float>(col);
  }
}

}  // namespace rotor::ops
