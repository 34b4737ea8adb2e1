// CUDA glue for the embedding (src/ops/embedding.h). Ids stay on the device:
// checking their range would need a host synchronization every step, so the
// kernels treat an out-of-range id as a zero row (forward) / no update
// (backward) instead of raising, and the CPU path remains the checked one.
#if ROTOR_WITH_CUDA

#include "kernels/embedding.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {
// rows have table's dtype, or (the backward, mixed precision) are 16-bit with an f32 table.
void check(const Tensor& ids, const Tensor& table, const Tensor& rows, int dev, const char* op,
           bool mixed = false) {
  cuda_glue::require_on(ids, dev, op);
  cuda_glue::require_on(rows, dev, op);
  cuda_glue::require_dtype(ids, DType::I32, op);
  cuda_glue::require_floating(table, op);
  if (table.dim() != 2) ROTOR_FAIL("{}: table must be [V, d], got {}", op, table.str());
  cuda_glue::require_floating(rows, op);
  if ((rows.dtype() != table.dtype() && !(mixed && table.dtype() == DType::F32)) ||
      rows.numel() != ids.numel() * table.size(1))
    ROTOR_FAIL("{}: rows {} do not match ids {} and table {}", op, rows.str(), ids.str(),
               table.str());
}
}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  cuda_glue::DeviceScope s(table, "embedding_forward");
  check(ids, table, out, s.index(), "embedding_forward");
  ROTOR_CUDA_CHECK(kernels::embedding_forward(ids.data<int32_t>(), ids.numel(), table.raw(),
                                              table.dtype(), table.size(0), table.size(1), scale,
                                              out.raw(), s.stream()));
}

void embedding_backward(const Tensor& ids, const Tensor& dout, float scale, Tensor& dtable,
                        int pad_id) {
  cuda_glue::DeviceScope s(dtable, "embedding_backward");
  check(ids, dtable, dout, s.index(), "embedding_backward", true);
  const int64_t n = ids.numel(), vocab = dtable.size(0);
  const size_t bytes = kernels::embedding_backward_workspace(n, vocab);
  cuda_glue::Scratch ws(bytes, s.index());
  ROTOR_CUDA_CHECK(kernels::embedding_backward(
      ids.data<int32_t>(), n, dout.raw(), dout.dtype(), scale, dtable.raw(), dtable.dtype(), vocab,
      dtable.size(1), pad_id, ws.get(), bytes, s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
