// CUDA glue for DeBERTa's relative rows (src/ops/deberta_bias.h;
// kernels/deberta_rows.cu). The products around them are ops::gemm's.
#if ROTOR_WITH_CUDA

#include "kernels/deberta_rows.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void deberta_gather(const Tensor& c2p, const Tensor& p2c, const Tensor& rows, float scale,
                    Tensor& bias) {
  cuda_glue::DeviceScope s(bias);
  ROTOR_CUDA_CHECK(kernels::deberta_gather(
      c2p.data<float>(), p2c.data<float>(), rows.data<int32_t>(), scale, bias.data<float>(),
      bias.size(0) * bias.size(1), bias.size(2), bias.size(3), c2p.size(3), s.stream()));
}

void deberta_scatter(const Tensor& dbias, const Tensor& rows, float scale, Tensor& dc2p,
                     Tensor& dp2c) {
  cuda_glue::DeviceScope s(dbias);
  ROTOR_CUDA_CHECK(kernels::deberta_scatter(
      dbias.data<float>(), rows.data<int32_t>(), scale, dc2p.data<float>(), dp2c.data<float>(),
      dbias.size(0) * dbias.size(1), dbias.size(2), dbias.size(3), dc2p.size(3), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
