// CPU token embedding lookup and its (accumulating) backward.
#include "ops/embedding.h"

#include <algorithm>

#include "ops/cpu_f32.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {
// Checks ids i32 [n], table [V, d] and rows [n, d] (any leading shape); returns n.
// The backward may accumulate 16-bit rows into an f32 table gradient.
int64_t check_embedding(const Tensor& ids, const Tensor& table, const Tensor& rows, const char* op,
                        bool mixed = false) {
  if (ids.dtype() != DType::I32) ROTOR_FAIL("{}: ids must be i32, got {}", op, ids.str());
  if (table.dim() != 2) ROTOR_FAIL("{}: table must be [V, d], got {}", op, table.str());
  const int64_t d = table.size(1);
  if (rows.dim() < 1 || rows.size(-1) != d || rows.numel() != ids.numel() * d)
    ROTOR_FAIL("{}: {} ids with a table {} need rows [{}, {}], got {}", op, ids.numel(),
               shape_str(table.shape()), ids.numel(), d, shape_str(rows.shape()));
  if (!is_floating(table.dtype()) || !is_floating(rows.dtype()) ||
      (rows.dtype() != table.dtype() && !(mixed && table.dtype() == DType::F32)))
    ROTOR_FAIL("{}: dtypes differ: table {} vs {}", op, dtype_name(table.dtype()),
               dtype_name(rows.dtype()));
  check_same_device(ids, table, op);
  check_same_device(rows, table, op);
  return ids.numel();
}

void check_ids_in_range(const int32_t* ids, int64_t n, int64_t vocab, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      ROTOR_FAIL("{}: id {} at position {} is outside the vocabulary [0, {})", op, ids[i], i,
                 vocab);
}
}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  const int64_t n = check_embedding(ids, table, out, "embedding_forward");
  ROTOR_DISPATCH_CUDA(table, embedding_forward(ids, table, scale, out));
  if (detail::F32Compute::needed({&table})) {
    detail::F32Compute f;
    Tensor out32 = f.output(out);
    embedding_forward(ids, f.input(table), scale, out32);
    f.commit();
    return;
  }
  const int64_t vocab = table.size(0), d = table.size(1);
  const int32_t* pid = ids.data<int32_t>();  // [n]
  const float* pt = table.data<float>();     // [V, d]
  float* po = out.data<float>();             // [n, d]
  check_ids_in_range(pid, n, vocab, "embedding_forward");
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = pt + static_cast<int64_t>(pid[i]) * d;
    for (int64_t j = 0; j < d; ++j) po[i * d + j] = row[j] * scale;
  }
}

void embedding_backward(const Tensor& ids, const Tensor& dout, float scale, Tensor& dtable,
                        int pad_id) {
  const int64_t n = check_embedding(ids, dtable, dout, "embedding_backward", true);
  ROTOR_DISPATCH_CUDA(dtable, embedding_backward(ids, dout, scale, dtable, pad_id));
  if (detail::F32Compute::needed({&dout, &dtable})) {
    detail::F32Compute f;
    Tensor dtable32 = f.output(dtable, true);
    embedding_backward(ids, f.input(dout), scale, dtable32, pad_id);
    f.commit();
    return;
  }
  const int64_t vocab = dtable.size(0), d = dtable.size(1);
  const int32_t* pid = ids.data<int32_t>();  // [n]
  const float* pd = dout.data<float>();      // [n, d]
  float* pt = dtable.data<float>();          // [V, d]
  check_ids_in_range(pid, n, vocab, "embedding_backward");
  // Repeated ids write the same row, so threads split the embedding columns,
  // not the tokens: no races and a fixed summation order (reproducible).
  // Blocks of 64 columns keep each row access contiguous.
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (d + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t j0 = b * kBlock, j1 = std::min(d, j0 + kBlock);
    for (int64_t i = 0; i < n; ++i) {
      if (pid[i] == pad_id) continue;
      float* row = pt + static_cast<int64_t>(pid[i]) * d;
      for (int64_t j = j0; j < j1; ++j) row[j] += pd[i * d + j] * scale;
    }
  }
}

}  // namespace rotor::ops
