// CUDA glue for rotary position embedding (src/ops/rope.h).
#if ROTOR_WITH_CUDA

#include "kernels/host_glue.h"
#include "kernels/rope.cuh"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {
void rotate(const Tensor& in, Tensor& out, float base, int64_t offset, double sign, const char* op) {
  cuda_glue::DeviceScope s(out, op);
  cuda_glue::require_on(in, s.index(), op);
  cuda_glue::require_floating(in, op);
  if (in.dim() != 4 || in.size(3) % 2 != 0)
    ROTOR_FAIL("{}: expected [B, T, H, D] with D even, got {}", op, in.str());
  if (in.shape() != out.shape() || in.dtype() != out.dtype())
    ROTOR_FAIL("{}: {} does not match {}", op, out.str(), in.str());
  if (!(base > 0.0f)) ROTOR_FAIL("{}: base must be > 0, got {}", op, base);
  ROTOR_CUDA_CHECK(kernels::rope_apply(in.raw(), out.raw(), in.dtype(), in.size(0), in.size(1),
                                       in.size(2), in.size(3), base, offset, sign, s.stream()));
}
}  // namespace

void rope_forward(const Tensor& x, Tensor& y, float base, int64_t position_offset) {
  rotate(x, y, base, position_offset, 1.0, "rope_forward");
}

void rope_backward(const Tensor& dy, Tensor& dx, float base, int64_t position_offset) {
  rotate(dy, dx, base, position_offset, -1.0, "rope_backward");
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
