// CUDA glue for Transformer-XL's relative shift (src/ops/xl_bias.h;
// kernels/xl_shift.cu). The products around it are ops::gemm's.
#if ROTOR_WITH_CUDA

#include "kernels/xl_shift.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void xl_shift_forward(const Tensor& g, const Tensor& gv, const Tensor& cu, int64_t q_offset,
                      Tensor& bias) {
  cuda_glue::DeviceScope s(bias);
  ROTOR_CUDA_CHECK(kernels::xl_shift_forward(g.data<float>(), gv.data<float>(), cu.data<float>(),
                                             bias.data<float>(), bias.size(0), bias.size(1),
                                             bias.size(2), bias.size(3), q_offset, s.stream()));
}

void xl_shift_backward(const Tensor& dbias, int64_t q_offset, Tensor& dg, Tensor& dgv,
                       Tensor& dcu) {
  cuda_glue::DeviceScope s(dbias);
  ROTOR_CUDA_CHECK(kernels::xl_shift_backward(
      dbias.data<float>(), dg.data<float>(), dgv.data<float>(), dcu.data<float>(), dbias.size(0),
      dbias.size(1), dbias.size(2), dbias.size(3), q_offset, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
