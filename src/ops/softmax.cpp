// CPU softmax over the last dimension: max-subtracted, sums in double.
#include "ops/softmax.h"

#include <cmath>
#include <limits>

#include "ops/cpu_f32.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {
void check_rows(const Tensor& a, const Tensor& b, const char* op) {
  if (a.dim() < 1) ROTOR_FAIL("{}: tensors must have at least 1 dimension", op);
  require_floating(a, op);
  if (a.shape() != b.shape())
    ROTOR_FAIL("{}: shapes differ: {} vs {}", op, shape_str(a.shape()), shape_str(b.shape()));
  if (a.dtype() != b.dtype())
    ROTOR_FAIL("{}: dtypes differ: {} vs {}", op, dtype_name(a.dtype()), dtype_name(b.dtype()));
  check_same_device(a, b, op);
}
}  // namespace

void softmax_forward(const Tensor& x, Tensor& y) {
  check_rows(x, y, "softmax_forward");
  ROTOR_DISPATCH_CUDA(y, softmax_forward(x, y));
  if (detail::F32Compute::needed({&x})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    softmax_forward(f.input(x), y32);
    f.commit();
    return;
  }
  const int64_t n = x.size(-1);
  const int64_t rows = n ? x.numel() / n : 0;
  const float* px = x.data<float>();  // [rows, n]
  float* py = y.data<float>();        // [rows, n]
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * n;
    float* yr = py + r * n;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, xr[j]);
    if (mx == -std::numeric_limits<float>::infinity()) {
      // Every entry masked: an all-zero row instead of 0/0 = NaN.
      for (int64_t j = 0; j < n; ++j) yr[j] = 0.0f;
      continue;
    }
    double s = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      float e = std::exp(xr[j] - mx);
      yr[j] = e;
      s += e;
    }
    const float inv = static_cast<float>(1.0 / s);
    for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
  }
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_rows(y, dy, "softmax_backward");
  check_rows(y, dx, "softmax_backward");
  ROTOR_DISPATCH_CUDA(dx, softmax_backward(y, dy, dx));
  if (detail::F32Compute::needed({&y})) {
    detail::F32Compute f;
    Tensor dx32 = f.output(dx);
    softmax_backward(f.input(y), f.input(dy), dx32);
    f.commit();
    return;
  }
  const int64_t n = y.size(-1);
  const int64_t rows = n ? y.numel() / n : 0;
  const float* py = y.data<float>();    // [rows, n]
  const float* pdy = dy.data<float>();  // [rows, n]
  float* pdx = dx.data<float>();        // [rows, n] (may alias dy)
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0.0;
    for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(py[r * n + j]) * pdy[r * n + j];
    const float d = static_cast<float>(dot);
    for (int64_t j = 0; j < n; ++j) pdx[r * n + j] = py[r * n + j] * (pdy[r * n + j] - d);
  }
}

}  // namespace rotor::ops
