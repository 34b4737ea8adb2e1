// CUDA glue for ops/heads.h (kernels/heads.cu).
#if ROTOR_WITH_CUDA

#include "kernels/heads.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {
// packed [B, T, P*H*D] split into `parts` parts of `heads` heads.
kernels::HeadsShape shape_of(const Tensor& packed, size_t parts, int64_t heads) {
  const int64_t P = static_cast<int64_t>(parts);
  return {packed.size(0), packed.size(1), P, heads, packed.size(2) / (P * heads)};
}
}  // namespace

void split_heads_forward(const Tensor& x, std::vector<Tensor>& parts, const SplitHeadsOptions& o) {
  cuda_glue::DeviceScope s(x);
  void* ptrs[3] = {nullptr, nullptr, nullptr};  // the public op allows at most 3 parts
  for (size_t i = 0; i < parts.size(); ++i) ptrs[i] = parts[i].raw();
  const kernels::HeadsShape hs = shape_of(x, parts.size(), o.n_heads);
  const size_t bytes = kernels::split_heads_workspace(hs, o.rope_parts, o.rope);
  cuda_glue::Scratch table(bytes, s.index());
  ROTOR_CUDA_CHECK(kernels::split_heads_forward(x.raw(), ptrs, hs, x.dtype(), o.rope_parts, o.rope,
                                                o.position_offset, o.part0_scale, table.get(),
                                                bytes, s.stream()));
}

void split_heads_backward(const std::vector<Tensor>& dparts, Tensor& dx,
                          const SplitHeadsOptions& o) {
  cuda_glue::DeviceScope s(dx);
  const void* ptrs[3] = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < dparts.size(); ++i) ptrs[i] = dparts[i].raw();
  const kernels::HeadsShape hs = shape_of(dx, dparts.size(), o.n_heads);
  const size_t bytes = kernels::split_heads_workspace(hs, o.rope_parts, o.rope);
  cuda_glue::Scratch table(bytes, s.index());
  ROTOR_CUDA_CHECK(kernels::split_heads_backward(ptrs, dx.raw(), hs, dx.dtype(), o.rope_parts,
                                                 o.rope, o.position_offset, o.part0_scale,
                                                 table.get(), bytes, s.stream()));
}

void merge_heads_forward(const Tensor& x, Tensor& y) {
  cuda_glue::DeviceScope s(x);
  ROTOR_CUDA_CHECK(kernels::merge_heads(x.raw(), y.raw(), x.size(0), x.size(1), x.size(2),
                                        x.size(3), x.dtype(), true, s.stream()));
}

void merge_heads_backward(const Tensor& dy, Tensor& dx) {
  cuda_glue::DeviceScope s(dy);
  ROTOR_CUDA_CHECK(kernels::merge_heads(dy.raw(), dx.raw(), dx.size(0), dx.size(1), dx.size(2),
                                        dx.size(3), dy.dtype(), false, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
