// CPU AdamW, step for step PyTorch's torch.optim.AdamW (foreach=False).
#include "ops/adamw.h"

#include <cmath>
#include <initializer_list>

#include "ops/cpu_clones.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {

struct Step {
  float grad_multiplier, l2, b1, b2, bc2_sqrt, eps, decay, step_size;
};

// The update of n elements, in vector clones (ops/cpu_clones.h): sqrt and
// division are correctly rounded in every width, and the file builds
// without FMA contraction (CMakeLists.txt), so every clone gives the
// baseline's bits; -fno-math-errno lets the sqrt vectorize (v >= 0 here).
ROTOR_CPU_CLONES void adamw_span(const Step& s, float* pp, const float* pg, float* pm, float* pv,
                                 int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = pg[i] * s.grad_multiplier + s.l2 * pp[i];
    pm[i] = s.b1 * pm[i] + (1.0f - s.b1) * g;
    pv[i] = s.b2 * pv[i] + (1.0f - s.b2) * g * g;
    const float denom = std::sqrt(pv[i]) / s.bc2_sqrt + s.eps;
    pp[i] = pp[i] * s.decay - s.step_size * pm[i] / denom;
  }
}

}  // namespace

void adamw_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const AdamWOptions& o) {
  const int64_t n = params.numel();
  for (const Tensor* t : std::initializer_list<const Tensor*>{&grads, &m, &v}) {
    if (t->numel() != n)
      ROTOR_FAIL("adamw_step: params has {} elements but a grad/moment tensor {} has {}", n,
                 shape_str(t->shape()), t->numel());
    check_same_device(params, *t, "adamw_step");
  }
  for (const Tensor* t : std::initializer_list<const Tensor*>{&params, &grads, &m, &v})
    if (t->dtype() != DType::F32) ROTOR_FAIL("adamw_step: f32 tensors expected, got {}", t->str());
  if (o.step < 1) ROTOR_FAIL("adamw_step: step is 1-based, got {}", o.step);
  if (!(o.beta1 >= 0.0f && o.beta1 < 1.0f && o.beta2 >= 0.0f && o.beta2 < 1.0f))
    ROTOR_FAIL("adamw_step: betas must be in [0, 1), got {} and {}", o.beta1, o.beta2);
  if (o.device_scale.defined()) {
    if (o.device_scale.dtype() != DType::F32 || o.device_scale.numel() != 1)
      ROTOR_FAIL("adamw_step: device_scale must be f32 [1], got {}", o.device_scale.str());
    check_same_device(params, o.device_scale, "adamw_step device_scale");
  }
  ROTOR_DISPATCH_CUDA(params, adamw_step(params, grads, m, v, o));

  float grad_multiplier = o.grad_multiplier;
  if (o.device_scale.defined()) grad_multiplier *= o.device_scale.data<float>()[0];
  // Bias corrections in double, as PyTorch computes them on the host.
  const double bc1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(o.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(o.step));
  const float step_size = static_cast<float>(o.lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = 1.0f - o.lr * o.weight_decay;
  const float b1 = o.beta1, b2 = o.beta2, eps = o.eps, l2 = o.l2;
  float* pp = params.data<float>();
  const float* pg = grads.data<float>();
  float* pm = m.data<float>();
  float* pv = v.data<float>();
  const Step step{grad_multiplier, l2, b1, b2, bc2_sqrt, eps, decay, step_size};
  detail::for_chunks(
      n, [&](int64_t b, int64_t e) { adamw_span(step, pp + b, pg + b, pm + b, pv + b, e - b); });
}

}  // namespace rotor::ops
