// CUDA glue for dropout (src/ops/dropout.h): the Philox mask of the CPU path.
#if ROTOR_WITH_CUDA

#include "kernels/dropout.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {
void apply(const Tensor& in, Tensor& out, float p, uint64_t seed, uint64_t stream_id) {
  cuda_glue::DeviceScope s(out);
  ROTOR_CUDA_CHECK(kernels::dropout_apply(in.raw(), out.raw(), out.dtype(), out.numel(), p, seed,
                                          stream_id, s.stream()));
}
}  // namespace

void dropout_forward(const Tensor& x, Tensor& y, float p, uint64_t seed, uint64_t stream) {
  apply(x, y, p, seed, stream);
}

void dropout_backward(const Tensor& dy, Tensor& dx, float p, uint64_t seed, uint64_t stream) {
  apply(dy, dx, p, seed, stream);
}

void dropout_add_forward(const Tensor& residual, const Tensor& x, float p, uint64_t seed,
                         uint64_t stream, Tensor& out) {
  cuda_glue::DeviceScope s(out);
  ROTOR_CUDA_CHECK(kernels::dropout_add(residual.raw(), x.raw(), out.raw(), out.dtype(),
                                        out.numel(), p, seed, stream, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
