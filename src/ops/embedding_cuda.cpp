// CUDA glue for the embedding (src/ops/embedding.h). Ids stay on the device:
// checking their range would need a host synchronization every step, so the
// kernels treat an out-of-range id as a zero row (forward) / no update
// (backward) instead of raising, and the CPU path remains the checked one.
#if ROTOR_WITH_CUDA

#include "kernels/embedding.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

void embedding_forward(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  cuda_glue::DeviceScope s(table);
  ROTOR_CUDA_CHECK(kernels::embedding_forward(ids.data<int32_t>(), ids.numel(), table.raw(),
                                              table.dtype(), table.size(0), table.size(1), scale,
                                              out.raw(), s.stream()));
}

void embedding_backward(const Tensor& ids, const Tensor& dout, float scale, Tensor& dtable,
                        int pad_id) {
  cuda_glue::DeviceScope s(dtable);
  const int64_t n = ids.numel(), vocab = dtable.size(0);
  const size_t bytes = kernels::embedding_backward_workspace(n, vocab, dtable.size(1));
  cuda_glue::Scratch ws(bytes, s.index());
  ROTOR_CUDA_CHECK(kernels::embedding_backward(
      ids.data<int32_t>(), n, dout.raw(), dout.dtype(), scale, dtable.raw(), dtable.dtype(), vocab,
      dtable.size(1), pad_id, ws.get(), bytes, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
