// CUDA glue for label-smoothed cross-entropy (src/ops/cross_entropy.h).
// Targets stay on the device: an out-of-range target yields NaN (loss, nll,
// gradient row) rather than an error that would need a host synchronization.
#if ROTOR_WITH_CUDA

#include "kernels/cross_entropy.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {
int64_t check(const Tensor& logits, const Tensor& targets, int dev, const char* op) {
  cuda_glue::require_on(targets, dev, op);
  cuda_glue::require_floating(logits, op);
  cuda_glue::require_dtype(targets, DType::I32, op);
  if (logits.dim() != 2) ROTOR_FAIL("{}: logits must be [N, V], got {}", op, logits.str());
  if (targets.numel() != logits.size(0))
    ROTOR_FAIL("{}: targets {} do not match logits {}", op, targets.str(), logits.str());
  return logits.size(0);
}
void require_rows(const Tensor& t, int64_t n, int dev, const char* what) {
  cuda_glue::require_on(t, dev, what);
  cuda_glue::require_dtype(t, DType::F32, what);
  if (t.numel() != n) ROTOR_FAIL("{}: expected f32 [{}], got {}", what, n, t.str());
}
}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, float smoothing,
                           int ignore_index, Tensor& loss, Tensor& nll, Tensor& lse) {
  cuda_glue::DeviceScope s(logits, "cross_entropy_forward");
  const int64_t n = check(logits, targets, s.index(), "cross_entropy_forward");
  require_rows(loss, n, s.index(), "cross_entropy_forward: loss");
  require_rows(nll, n, s.index(), "cross_entropy_forward: nll");
  require_rows(lse, n, s.index(), "cross_entropy_forward: lse");
  ROTOR_CUDA_CHECK(kernels::cross_entropy_forward(
      logits.raw(), logits.dtype(), targets.data<int32_t>(), n, logits.size(1), smoothing,
      ignore_index, loss.data<float>(), nll.data<float>(), lse.data<float>(), s.stream()));
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            float smoothing, int ignore_index, float grad_scale, Tensor& dlogits) {
  cuda_glue::DeviceScope s(logits, "cross_entropy_backward");
  const int64_t n = check(logits, targets, s.index(), "cross_entropy_backward");
  require_rows(lse, n, s.index(), "cross_entropy_backward: lse");
  cuda_glue::require_on(dlogits, s.index(), "cross_entropy_backward: dlogits");
  if (dlogits.shape() != logits.shape() || dlogits.dtype() != logits.dtype())
    ROTOR_FAIL("cross_entropy_backward: dlogits {} must match logits {}", dlogits.str(),
               logits.str());
  ROTOR_CUDA_CHECK(kernels::cross_entropy_backward(
      logits.raw(), logits.dtype(), targets.data<int32_t>(), lse.data<float>(), n, logits.size(1),
      smoothing, ignore_index, grad_scale, dlogits.raw(), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
