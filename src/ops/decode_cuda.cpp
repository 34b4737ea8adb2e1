// CUDA glue for the decoding ops (src/ops/decode.h, kernels/decode_attention.cu).
#if ROTOR_WITH_CUDA

#include "kernels/decode_attention.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void kv_cache_write(const Tensor& src, Tensor& cache, int64_t position) {
  cuda_glue::DeviceScope s(src);
  const int64_t BH = cache.size(0) * cache.size(1);
  ROTOR_CUDA_CHECK(kernels::kv_cache_write(src.raw(), cache.raw(), BH, cache.size(2), cache.size(3),
                                           position, src.dtype(), s.stream()));
}

void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t length,
                      Tensor& out, bool alibi, const Tensor& rel_bias, int64_t rel_max) {
  cuda_glue::DeviceScope s(q);
  const int64_t D = k_cache.size(3);
  kernels::DecodeBias bias;
  bias.alibi_heads = alibi ? k_cache.size(1) : 0;
  if (rel_bias.defined()) {
    bias.rel = rel_bias.data<float>();
    bias.rel_max = rel_max;
    bias.heads = k_cache.size(1);
  }
  ROTOR_CUDA_CHECK(kernels::decode_attention(q.raw(), k_cache.raw(), v_cache.raw(), out.raw(),
                                             k_cache.size(0) * k_cache.size(1), k_cache.size(2), D,
                                             length, q.dtype(), s.stream(), bias));
}

void index_select(const Tensor& src, const Tensor& index, Tensor& dst) {
  cuda_glue::DeviceScope s(src);
  const int64_t rows = src.size(0);
  const size_t row_bytes = rows ? src.nbytes() / static_cast<size_t>(rows) : 0;
  const Tensor dev_index = index.is_cuda() ? index : index.to(src.device());
  ROTOR_CUDA_CHECK(kernels::index_select_rows(src.raw(), dev_index.data<int32_t>(), dst.raw(),
                                              index.size(0), row_bytes, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
