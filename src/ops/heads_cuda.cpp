// CUDA glue for ops/heads.h.
#if ROTOR_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda_context.h"
#include "kernels/heads.cuh"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {
cudaStream_t stream_of(const Tensor& t) { return static_cast<cudaStream_t>(cuda::stream(t.device().index)); }
kernels::HeadsShape shape_of(const Tensor& packed, size_t parts, int64_t heads) {
  int64_t D = packed.size(2) / (static_cast<int64_t>(parts) * heads);
  return {packed.size(0), packed.size(1), static_cast<int64_t>(parts), heads, D};
}
}  // namespace

void split_heads_forward(const Tensor& x, std::vector<Tensor>& parts, const SplitHeadsOptions& o) {
  ROTOR_CHECK(parts.size() <= 3, "split_heads_forward: at most 3 parts, got {}", parts.size());
  void* ptrs[3] = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < parts.size(); ++i) ptrs[i] = parts[i].raw();
  ROTOR_CUDA_CHECK(kernels::split_heads_forward(x.raw(), ptrs, shape_of(x, parts.size(), o.n_heads),
                                                x.dtype(), o.rotary_parts, o.rope_base,
                                                o.position_offset, o.part0_scale, stream_of(x)));
}

void split_heads_backward(const std::vector<Tensor>& dparts, Tensor& dx,
                          const SplitHeadsOptions& o) {
  ROTOR_CHECK(dparts.size() <= 3, "split_heads_backward: at most 3 parts, got {}", dparts.size());
  const void* ptrs[3] = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < dparts.size(); ++i) ptrs[i] = dparts[i].raw();
  ROTOR_CUDA_CHECK(kernels::split_heads_backward(ptrs, dx.raw(), shape_of(dx, dparts.size(), o.n_heads),
                                                 dx.dtype(), o.rotary_parts, o.rope_base,
                                                 o.position_offset, o.part0_scale, stream_of(dx)));
}

void merge_heads_forward(const Tensor& x, Tensor& y) {
  ROTOR_CUDA_CHECK(kernels::merge_heads(x.raw(), y.raw(), x.size(0), x.size(1), x.size(2), x.size(3),
                                        x.dtype(), true, stream_of(x)));
}

void merge_heads_backward(const Tensor& dy, Tensor& dx) {
  ROTOR_CUDA_CHECK(kernels::merge_heads(dy.raw(), dx.raw(), dx.size(0), dx.size(1), dx.size(2),
                                        dx.size(3), dy.dtype(), false, stream_of(dy)));
}

}  // namespace rotor::ops::cuda_impl
#endif
