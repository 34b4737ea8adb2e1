// CUDA glue for the AdamW step (src/ops/adamw.h): bias corrections in double
// on the host, exactly as the CPU path computes them.
#if ROTOR_WITH_CUDA

#include <cmath>

#include "kernels/adamw.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void adamw_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, const AdamWOptions& o) {
  cuda_glue::DeviceScope s(params);
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
  a.l2 = o.l2;
  a.grad_multiplier = o.grad_multiplier;
  if (o.device_scale.defined()) a.device_scale = o.device_scale.data<float>();
  ROTOR_CUDA_CHECK(kernels::adamw_step(params.data<float>(), grads.raw(), grads.dtype(),
                                       m.data<float>(), v.data<float>(), params.numel(), a,
                                       s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
