// CPU reductions, accumulated in double so that results do not depend on the
// number of OpenMP threads in any way that matters for a test tolerance.
#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu_f32.h"
#include "ops/cpu_rows.h"
#include "ops/dispatch.h"

// ROTOR_DISPATCH_CUDA for ops that return a value: cuda_impl fills `out`.
#if ROTOR_WITH_CUDA
#define ROTOR_DISPATCH_CUDA_VALUE(tensor, call, value) \
  ROTOR_PROFILE_OP(call);                              \
  do {                                                 \
    if ((tensor).is_cuda()) {                          \
      ::rotor::ops::cuda_impl::call;                   \
      return value;                                    \
    }                                                  \
  } while (0)
#else
#define ROTOR_DISPATCH_CUDA_VALUE(tensor, call, value) ROTOR_DISPATCH_CUDA(tensor, call)
#endif

namespace rotor::ops {

void sum_rows(const Tensor& x, Tensor& out, bool accumulate) {
  if (x.dim() < 1) ROTOR_FAIL("sum_rows: x must have at least 1 dimension, got a scalar");
  require_floating(x, "sum_rows");
  const int64_t n = x.size(-1);
  if (out.numel() != n)
    ROTOR_FAIL("sum_rows: out has {} elements, x {} needs {}", out.numel(), shape_str(x.shape()),
               n);
  if (out.dtype() != DType::F32) ROTOR_FAIL("sum_rows: out must be f32, got {}", out.str());
  check_same_device(x, out, "sum_rows");
  ROTOR_DISPATCH_CUDA(x, sum_rows(x, out, accumulate));
  if (detail::F32Compute::needed({&x})) {  // 16-bit rows, f32 sums (bias gradients)
    sum_rows(detail::F32Compute().input(x), out, accumulate);
    return;
  }
  const int64_t rows = n ? x.numel() / n : 0;
  const float* px = x.data<float>();  // [rows, n]
  float* po = out.data<float>();      // [n]
  // Work items of kRows rows by kBlock columns: each sums its rows in order
  // into double partials (contiguous reads), and each column adds its
  // partials in chunk order. The chunks are fixed by the shape, never by the
  // thread count, so the sums are the same for any number of threads; a
  // bias gradient of d_model columns (one block) still spreads over the
  // threads by its rows.
  constexpr int64_t kBlock = 256, kRows = 256;
  const int64_t blocks = (n + kBlock - 1) / kBlock,
                chunks = std::max<int64_t>(1, (rows + kRows - 1) / kRows);
  std::vector<double> partial(static_cast<size_t>(chunks * n));
#pragma omp parallel for collapse(2) schedule(static) if (chunks * blocks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t j0 = blk * kBlock, j1 = std::min(n, j0 + kBlock);
      double acc[kBlock] = {};
      const int64_t r0 = c * kRows, r1 = std::min(rows, (c + 1) * kRows);
      detail::add_rows_f64(px + r0 * n + j0, n, r1 - r0, j1 - j0, acc);
      std::copy(acc, acc + (j1 - j0), partial.data() + c * n + j0);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    double acc = accumulate ? po[j] : 0.0;
    for (int64_t c = 0; c < chunks; ++c) acc += partial[static_cast<size_t>(c * n + j)];
    po[j] = static_cast<float>(acc);
  }
}

double sum(const Tensor& x) {
  require_floating(x, "sum");
#if ROTOR_WITH_CUDA
  if (x.is_cuda()) {
    double result = 0.0;
    cuda_impl::sum(x, result);
    return result;
  }
#else
  if (x.is_cuda()) ROTOR_FAIL("sum: a CUDA tensor reached a CPU-only rotor build");
#endif
  if (detail::F32Compute::needed({&x})) return sum(detail::F32Compute().input(x));
  const float* p = x.data<float>();
  const int64_t n = x.numel();
  double acc = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += p[i];
  return acc;
}

float max_abs(const Tensor& x) {
  require_floating(x, "max_abs");
#if ROTOR_WITH_CUDA
  if (x.is_cuda()) {
    float result = 0.0f;
    cuda_impl::max_abs(x, result);
    return result;
  }
#else
  if (x.is_cuda()) ROTOR_FAIL("max_abs: a CUDA tensor reached a CPU-only rotor build");
#endif
  if (detail::F32Compute::needed({&x})) return max_abs(detail::F32Compute().input(x));
  const float* p = x.data<float>();
  const int64_t n = x.numel();
  float best = 0.0f;
  bool nan = false;
#pragma omp parallel for schedule(static) reduction(max : best) reduction(|| : nan)
  for (int64_t i = 0; i < n; ++i) {
    float a = std::fabs(p[i]);
    if (std::isnan(a))
      nan = true;
    else if (a > best)
      best = a;
  }
  // A NaN anywhere is reported rather than silently skipped by the comparison.
  return nan ? std::numeric_limits<float>::quiet_NaN() : best;
}

namespace {
// The common device of a list of floating tensors (CPU for an empty list).
Device list_device(const std::vector<Tensor>& tensors, const char* op) {
  Device d = tensors.empty() ? Device::cpu() : tensors[0].device();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) ROTOR_FAIL("{}: tensor {} is undefined", op, i);
    require_floating(tensors[i], op);
    if (tensors[i].device() != d)
      ROTOR_FAIL("{}: tensor {} is on {}, tensor 0 on {}", op, i, tensors[i].device().str(),
                 d.str());
  }
  return d;
}
}  // namespace

Tensor global_norm(const std::vector<Tensor>& tensors) {
  Device device = list_device(tensors, "global_norm");
  Tensor out = Tensor::empty({1}, DType::F32, device);  // [1]
  ROTOR_DISPATCH_CUDA_VALUE(out, global_norm(tensors, out), out);
  double acc = 0.0;
  for (const Tensor& t16 : tensors) {
    const Tensor t = detail::F32Compute().input(t16);
    const float* p = t.data<float>();
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) reduction(+ : acc)
    for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(p[i]) * p[i];
  }
  out.data<float>()[0] = static_cast<float>(std::sqrt(acc));
  return out;
}

Tensor any_nonfinite(const std::vector<Tensor>& tensors) {
  Device device = list_device(tensors, "any_nonfinite");
  Tensor out = Tensor::empty({1}, DType::U8, device);  // [1]
  ROTOR_DISPATCH_CUDA_VALUE(out, any_nonfinite(tensors, out), out);
  bool bad = false;
  for (const Tensor& t16 : tensors) {
    const Tensor t = detail::F32Compute().input(t16);  // inf and NaN survive the conversion
    const float* p = t.data<float>();
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) reduction(|| : bad)
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) bad = true;
  }
  out.data<uint8_t>()[0] = bad ? 1 : 0;
  return out;
}

}  // namespace rotor::ops
