// CUDA glue for dropout (src/ops/dropout.h): the Philox mask of the CPU path.
#if ROTOR_WITH_CUDA

#include "kernels/dropout.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {
void apply(const Tensor& in, Tensor& out, float p, uint64_t seed, uint64_t stream_id,
           const char* op) {
  cuda_glue::DeviceScope s(out, op);
  cuda_glue::require_on(in, s.index(), op);
  cuda_glue::require_floating(in, op);
  cuda_glue::require_same_numel(in, out, op);
  if (in.dtype() != out.dtype()) ROTOR_FAIL("{}: dtypes differ: {} vs {}", op, in.str(), out.str());
  if (!(p >= 0.0f && p < 1.0f)) ROTOR_FAIL("{}: probability must be in [0, 1), got {}", op, p);
  ROTOR_CUDA_CHECK(kernels::dropout_apply(in.raw(), out.raw(), out.dtype(), out.numel(), p, seed,
                                          stream_id, s.stream()));
}
}  // namespace

void dropout_forward(const Tensor& x, Tensor& y, float p, uint64_t seed, uint64_t stream) {
  apply(x, y, p, seed, stream, "dropout_forward");
}

void dropout_backward(const Tensor& dy, Tensor& dx, float p, uint64_t seed, uint64_t stream) {
  apply(dy, dx, p, seed, stream, "dropout_backward");
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
