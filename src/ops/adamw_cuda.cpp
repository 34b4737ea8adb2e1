// CUDA glue for the AdamW step (src/ops/adamw.h): bias corrections in double
// on the host, exactly as the CPU path computes them.
#if ROTOR_WITH_CUDA

#include <cmath>

#include "kernels/adamw.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void adamw_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWOptions& o) {
  cuda_glue::DeviceScope s(params, "adamw_step");
  for (const Tensor* t : {&m, &v}) {
    cuda_glue::require_on(*t, s.index(), "adamw_step");
    cuda_glue::require_dtype(*t, DType::F32, "adamw_step: moment");
    cuda_glue::require_same_numel(*t, params, "adamw_step");
  }
  cuda_glue::require_dtype(params, DType::F32, "adamw_step: params");
  cuda_glue::require_on(grads, s.index(), "adamw_step: grads");
  cuda_glue::require_floating(grads, "adamw_step: grads");
  cuda_glue::require_same_numel(grads, params, "adamw_step");
  if (o.step < 1) ROTOR_FAIL("adamw_step: step is 1-based, got {}", o.step);
  kernels::AdamWArgs a;
  a.lr = o.lr;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  const double bc1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(o.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(o.step));
  a.step_size = static_cast<float>(o.lr / bc1);
  a.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  a.decay = 1.0f - o.lr * o.weight_decay;
  a.grad_scale = o.grad_scale;
  if (o.device_scale.defined()) {
    cuda_glue::require_on(o.device_scale, s.index(), "adamw_step: device_scale");
    cuda_glue::require_dtype(o.device_scale, DType::F32, "adamw_step: device_scale");
    a.device_scale = o.device_scale.data<float>();
  }
  ROTOR_CUDA_CHECK(kernels::adamw_step(params.data<float>(), grads.raw(), grads.dtype(),
                                       m.data<float>(), v.data<float>(), params.numel(), a,
                                       s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
