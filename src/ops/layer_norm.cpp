// CPU layer normalization over the last dimension, its row loops in vector
// clones (ops/cpu_rows.h). Statistics in double (row sums in 16 fixed
// lanes, ops/cpu_lanes.h), biased variance (as PyTorch), rstd =
// 1/sqrt(var + eps). 16-bit x, y, dy, dx
// go through f32 copies (ops/cpu_f32.h); gamma and beta have x's dtype or f32,
// dgamma and dbeta any floating dtype (f32 in mixed-precision training).
#include "ops/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "ops/cpu_f32.h"
#include "ops/cpu_rows.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {
// Checks x[rows, n] against gamma/beta [n] and mean/rstd [rows]; returns n.
int64_t check_layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& rstd, const char* op) {
  if (x.dim() < 1) ROTOR_FAIL("{}: x must have at least 1 dimension", op);
  const int64_t n = x.size(-1);
  const int64_t rows = n ? x.numel() / n : 0;
  if (gamma.dim() != 1 || gamma.size(0) != n)
    ROTOR_FAIL("{}: gamma must be [{}], got {}", op, n, shape_str(gamma.shape()));
  if (beta.dim() != 1 || beta.size(0) != n)
    ROTOR_FAIL("{}: beta/dbeta must be [{}], got {}", op, n, shape_str(beta.shape()));
  if (mean.numel() != rows || rstd.numel() != rows)
    ROTOR_FAIL("{}: mean and rstd need {} elements (rows of x {}), got {} and {}", op, rows,
               shape_str(x.shape()), mean.numel(), rstd.numel());
  if (mean.dtype() != DType::F32 || rstd.dtype() != DType::F32)
    ROTOR_FAIL("{}: mean and rstd must be f32", op);
  if (!is_floating(x.dtype()) || (gamma.dtype() != x.dtype() && gamma.dtype() != DType::F32))
    ROTOR_FAIL("{}: gamma must be f32 or x's dtype, got x {} and gamma {}", op,
               dtype_name(x.dtype()), dtype_name(gamma.dtype()));
  if (!is_floating(beta.dtype()))
    ROTOR_FAIL("{}: beta/dbeta must be floating, got {}", op, beta.str());
  for (const Tensor* t : std::initializer_list<const Tensor*>{&gamma, &beta, &mean, &rstd})
    check_same_device(x, *t, op);
  return n;
}

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd, bool rms) {
  const int64_t n = check_layer_norm(x, gamma, beta, mean, rstd, "layer_norm_forward");
  check_shape(y, x.shape(), "layer_norm_forward y");
  if (y.dtype() != x.dtype()) ROTOR_FAIL("layer_norm_forward: y dtype must match x");
  if (beta.dtype() != gamma.dtype()) ROTOR_FAIL("layer_norm_forward: beta dtype must match gamma");
  check_same_device(x, y, "layer_norm_forward");
  if (!(eps >= 0.0f)) ROTOR_FAIL("layer_norm_forward: eps must be >= 0, got {}", eps);
  ROTOR_DISPATCH_CUDA(x, layer_norm_forward(x, gamma, beta, eps, y, mean, rstd, rms));
  if (detail::F32Compute::needed({&x, &gamma})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    layer_norm_forward(f.input(x), f.input(gamma), f.input(beta), eps, y32, mean, rstd, rms);
    f.commit();
    return;
  }
  const int64_t rows = mean.numel();
  const float* px = x.data<float>();  // [rows, n]
  const float* pg = gamma.data<float>();
  const float* pb = beta.data<float>();
  float* py = y.data<float>();     // [rows, n]
  float* pm = mean.data<float>();  // [rows]
  float* pr = rstd.data<float>();  // [rows]
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    detail::layer_norm_row(px + r * n, pg, pb, n, eps, py + r * n, pm[r], pr[r], rms);
}

namespace {

// The names the backward ops' errors give: the op, then its arguments.
struct BackwardNames {
  const char *op, *dy, *dx, *dgamma, *residual;
};
constexpr BackwardNames kBackward{"layer_norm_backward", "layer_norm_backward dy",
                                  "layer_norm_backward dx", "layer_norm_backward dgamma", ""};
constexpr BackwardNames kBackwardAdd{"layer_norm_backward_add", "layer_norm_backward_add dy",
                                     "layer_norm_backward_add dx", "layer_norm_backward_add dgamma",
                                     "layer_norm_backward_add residual"};

// The checks of layer_norm_backward (residual null) and _add; returns n.
int64_t check_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                       const Tensor& rstd, const Tensor* residual, const Tensor& dx,
                       const Tensor& dgamma, const Tensor& dbeta, const BackwardNames& names) {
  const char* op = names.op;
  const int64_t n = check_layer_norm(x, gamma, dbeta, mean, rstd, op);
  check_shape(dy, x.shape(), names.dy);
  check_shape(dx, x.shape(), names.dx);
  check_shape(dgamma, gamma.shape(), names.dgamma);
  if (dy.dtype() != x.dtype() || dx.dtype() != x.dtype() || !is_floating(dgamma.dtype()))
    ROTOR_FAIL("{}: dy and dx must match x, dgamma be floating", op);
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy, &dx, &dgamma})
    check_same_device(x, *t, op);
  if (residual) {
    check_shape(*residual, x.shape(), names.residual);
    if (residual->dtype() != x.dtype()) ROTOR_FAIL("{}: residual must match x's dtype", op);
    check_same_device(x, *residual, op);
  }
  return n;
}

// The CPU backward, checked: dx = (residual +) the normalization's dx.
void backward_cpu(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                  const Tensor& rstd, const Tensor* residual, Tensor& dx, Tensor& dgamma,
                  Tensor& dbeta, int64_t n, bool rms) {
  if (detail::F32Compute::needed({&x, &gamma, &dgamma, &dbeta})) {
    detail::F32Compute f;
    Tensor dx32 = f.output(dx), dg32 = f.output(dgamma, true), db32 = f.output(dbeta, true);
    const Tensor res32 = residual ? f.input(*residual) : Tensor();
    backward_cpu(f.input(dy), f.input(x), f.input(gamma), mean, rstd, residual ? &res32 : nullptr,
                 dx32, dg32, db32, n, rms);
    f.commit();
    return;
  }
  const int64_t rows = mean.numel();
  const float* pdy = dy.data<float>();  // [rows, n]
  const float* px = x.data<float>();    // [rows, n]
  const float* pg = gamma.data<float>();
  const float* pm = mean.data<float>();
  const float* pr = rstd.data<float>();
  const float* pres = residual ? residual->data<float>() : nullptr;  // [rows, n]
  float* pdx = dx.data<float>();                                     // [rows, n]
  float* pdg = dgamma.data<float>();                                 // [n]
  float* pdb = dbeta.data<float>();                                  // [n]

  // Parameter gradients first (dx may alias dy). Columns are independent:
  // each thread owns a block of them and walks the rows in order, reading
  // each row's slice contiguously (a column at a time would stride through
  // the whole [rows, n] matrix once per column); every column's sum is the
  // same sequence of additions as one column at a time.
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kBlock, w = std::min(kBlock, n - j0);
    double dg[kBlock] = {}, db[kBlock] = {};
    detail::layer_norm_param_rows(pdy + j0, px + j0, pm, pr, rows, n, w, dg, db);
    for (int64_t j = 0; j < w; ++j) {
      pdg[j0 + j] += static_cast<float>(dg[j]);
      pdb[j0 + j] += static_cast<float>(db[j]);
    }
  }

  // dx = (residual +) rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    detail::layer_norm_dx_row(pdy + r * n, px + r * n, pg, pm[r], pr[r], n,
                              pres ? pres + r * n : nullptr, pdx + r * n, rms);
}

}  // namespace

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool rms) {
  const int64_t n = check_backward(dy, x, gamma, mean, rstd, nullptr, dx, dgamma, dbeta, kBackward);
  ROTOR_DISPATCH_CUDA(x, layer_norm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rms));
  backward_cpu(dy, x, gamma, mean, rstd, nullptr, dx, dgamma, dbeta, n, rms);
}

void layer_norm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                             const Tensor& mean, const Tensor& rstd, const Tensor& residual,
                             Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool rms) {
  const int64_t n =
      check_backward(dy, x, gamma, mean, rstd, &residual, dx, dgamma, dbeta, kBackwardAdd);
  ROTOR_DISPATCH_CUDA(
      x, layer_norm_backward_add(dy, x, gamma, mean, rstd, residual, dx, dgamma, dbeta, rms));
  backward_cpu(dy, x, gamma, mean, rstd, &residual, dx, dgamma, dbeta, n, rms);
}

}  // namespace rotor::ops
