// CUDA glue for the decoding ops (src/ops/decode.h, kernels/decode_attention.cu).
#if ROTOR_WITH_CUDA

#include <initializer_list>
#include <vector>

#include "kernels/decode_attention.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void kv_cache_write(const Tensor& src, Tensor& cache, int64_t position) {
  cuda_glue::DeviceScope s(src, "kv_cache_write");
  cuda_glue::require_on(cache, s.index(), "kv_cache_write: cache");
  cuda_glue::require_floating(src, "kv_cache_write");
  const int64_t BH = cache.size(0) * cache.size(1);
  ROTOR_CUDA_CHECK(kernels::kv_cache_write(src.raw(), cache.raw(), BH, cache.size(2),
                                           cache.size(3), position, src.dtype(), s.stream()));
}

void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                      int64_t length, Tensor& out) {
  cuda_glue::DeviceScope s(q, "decode_attention");
  cuda_glue::require_floating(q, "decode_attention");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&k_cache, &v_cache, &out}) {
    cuda_glue::require_on(*t, s.index(), "decode_attention");
    if (t->dtype() != q.dtype())
      ROTOR_FAIL("decode_attention: {} differs in dtype from q {}", t->str(), q.str());
  }
  const int64_t D = k_cache.size(3);
  if (D > 256) ROTOR_FAIL("decode_attention: head dim {} above 256 is not supported on CUDA", D);
  ROTOR_CUDA_CHECK(kernels::decode_attention(q.raw(), k_cache.raw(), v_cache.raw(), out.raw(),
                                             k_cache.size(0) * k_cache.size(1), k_cache.size(2), D,
                                             length, q.dtype(), s.stream()));
}

void index_select(const Tensor& src, const Tensor& index, Tensor& dst) {
  cuda_glue::DeviceScope s(src, "index_select");
  cuda_glue::require_on(dst, s.index(), "index_select: dst");
  const int64_t rows = src.size(0), M = index.size(0);
  const size_t row_bytes = rows ? src.nbytes() / static_cast<size_t>(rows) : 0;
  ROTOR_CHECK(dst.nbytes() == row_bytes * static_cast<size_t>(M), "index_select: row size");
  // Validate on the host (the index is small: one entry per hypothesis), then
  // hand the kernel a device copy.
  const std::vector<int32_t> host = index.to_ints();
  for (int32_t i : host)
    ROTOR_CHECK(i >= 0 && i < rows, "index_select: index {} of {}", i, rows);
  Tensor dev_index = index.is_cuda() ? index : index.to(src.device());
  ROTOR_CUDA_CHECK(kernels::index_select_rows(src.raw(), dev_index.data<int32_t>(), dst.raw(), M,
                                              row_bytes, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
