// CUDA glue for label-smoothed cross-entropy (src/ops/cross_entropy.h).
// Targets stay on the device: an out-of-range target yields NaN (loss, nll,
// gradient row) rather than an error that would need a host synchronization.
#if ROTOR_WITH_CUDA

#include "kernels/cross_entropy.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, float smoothing,
                           int ignore_index, Tensor& loss, Tensor& nll, Tensor& lse) {
  cuda_glue::DeviceScope s(logits);
  const int64_t n = logits.size(0);
  ROTOR_CUDA_CHECK(kernels::cross_entropy_forward(
      logits.raw(), logits.dtype(), targets.data<int32_t>(), n, logits.size(1), smoothing,
      ignore_index, loss.data<float>(), nll.data<float>(), lse.data<float>(), s.stream()));
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            float smoothing, int ignore_index, float loss_scale, Tensor& dlogits) {
  cuda_glue::DeviceScope s(logits);
  const int64_t n = logits.size(0);
  ROTOR_CUDA_CHECK(kernels::cross_entropy_backward(
      logits.raw(), logits.dtype(), targets.data<int32_t>(), lse.data<float>(), n, logits.size(1),
      smoothing, ignore_index, loss_scale, dlogits.raw(), s.stream()));
}

void top1_hits(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& hits) {
  cuda_glue::DeviceScope s(logits);
  ROTOR_CUDA_CHECK(kernels::top1_hits(logits.raw(), logits.dtype(), targets.data<int32_t>(),
                                      logits.size(0), logits.size(1), ignore_index,
                                      hits.data<int32_t>(), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
