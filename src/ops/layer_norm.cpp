// CPU layer normalization over the last dimension. Statistics in double
// (row sums in 16 fixed lanes), biased variance (as PyTorch), rstd =
// 1/sqrt(var + eps). 16-bit x, y, dy, dx
// go through f32 copies (ops/cpu_f32.h); gamma and beta have x's dtype or f32,
// dgamma and dbeta any floating dtype (f32 in mixed-precision training).
#include "ops/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "ops/cpu_f32.h"
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

// Row sums in double in a fixed order, whatever the vector width: 16 lanes,
// lane l adding the terms j = l mod 16 in order, then the lanes in order,
// then the tail. Independent lanes let the compiler vectorize the sums (one
// accumulator would chain every addition on the last).
constexpr int64_t kLanes = 16;

template <class Term>
double lane_sum(int64_t n, Term term) {
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  double s = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) s += acc[l];
  for (; j < n; ++j) s += term(j);
  return s;
}

// Two sums of the same terms' halves at once (the backward's g and g xhat).
template <class Terms>
void lane_sum2(int64_t n, Terms terms, double& s1, double& s2) {
  double a[kLanes] = {}, b[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      double u, v;
      terms(j + l, u, v);
      a[l] += u;
      b[l] += v;
    }
  s1 = s2 = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) {
    s1 += a[l];
    s2 += b[l];
  }
  for (; j < n; ++j) {
    double u, v;
    terms(j, u, v);
    s1 += u;
    s2 += v;
  }
}
}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t n = check_layer_norm(x, gamma, beta, mean, rstd, "layer_norm_forward");
  check_shape(y, x.shape(), "layer_norm_forward y");
  if (y.dtype() != x.dtype()) ROTOR_FAIL("layer_norm_forward: y dtype must match x");
  if (beta.dtype() != gamma.dtype()) ROTOR_FAIL("layer_norm_forward: beta dtype must match gamma");
  check_same_device(x, y, "layer_norm_forward");
  if (!(eps >= 0.0f)) ROTOR_FAIL("layer_norm_forward: eps must be >= 0, got {}", eps);
  ROTOR_DISPATCH_CUDA(x, layer_norm_forward(x, gamma, beta, eps, y, mean, rstd));
  if (detail::F32Compute::needed({&x, &gamma})) {
    detail::F32Compute f;
    Tensor y32 = f.output(y);
    layer_norm_forward(f.input(x), f.input(gamma), f.input(beta), eps, y32, mean, rstd);
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
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * n;
    const double mu =
        lane_sum(n, [&](int64_t j) { return double{xr[j]}; }) / static_cast<double>(n);
    // Two passes: sum((x - mu)^2) avoids the cancellation of E[x^2] - mu^2.
    const double ss = lane_sum(n, [&](int64_t j) { return (xr[j] - mu) * (xr[j] - mu); });
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    const float muf = static_cast<float>(mu), rsf = static_cast<float>(rs);
    for (int64_t j = 0; j < n; ++j) py[r * n + j] = (xr[j] - muf) * rsf * pg[j] + pb[j];
    pm[r] = muf;
    pr[r] = rsf;
  }
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const int64_t n = check_layer_norm(x, gamma, dbeta, mean, rstd, "layer_norm_backward");
  check_shape(dy, x.shape(), "layer_norm_backward dy");
  check_shape(dx, x.shape(), "layer_norm_backward dx");
  check_shape(dgamma, gamma.shape(), "layer_norm_backward dgamma");
  if (dy.dtype() != x.dtype() || dx.dtype() != x.dtype() || !is_floating(dgamma.dtype()))
    ROTOR_FAIL("layer_norm_backward: dy and dx must match x, dgamma be floating");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy, &dx, &dgamma})
    check_same_device(x, *t, "layer_norm_backward");
  ROTOR_DISPATCH_CUDA(x, layer_norm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta));
  if (detail::F32Compute::needed({&x, &gamma, &dgamma, &dbeta})) {
    detail::F32Compute f;
    Tensor dx32 = f.output(dx), dg32 = f.output(dgamma, true), db32 = f.output(dbeta, true);
    layer_norm_backward(f.input(dy), f.input(x), f.input(gamma), mean, rstd, dx32, dg32, db32);
    f.commit();
    return;
  }
  const int64_t rows = mean.numel();
  const float* pdy = dy.data<float>();  // [rows, n]
  const float* px = x.data<float>();    // [rows, n]
  const float* pg = gamma.data<float>();
  const float* pm = mean.data<float>();
  const float* pr = rstd.data<float>();
  float* pdx = dx.data<float>();      // [rows, n]
  float* pdg = dgamma.data<float>();  // [n]
  float* pdb = dbeta.data<float>();   // [n]

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
    for (int64_t r = 0; r < rows; ++r) {
      const float* dyr = pdy + r * n + j0;
      const float* xr = px + r * n + j0;
      const float mu = pm[r];
      const double rs = static_cast<double>(pr[r]);
      for (int64_t j = 0; j < w; ++j) {
        const double xhat = (xr[j] - mu) * rs;
        dg[j] += dyr[j] * xhat;
        db[j] += dyr[j];
      }
    }
    for (int64_t j = 0; j < w; ++j) {
      pdg[j0 + j] += static_cast<float>(dg[j]);
      pdb[j0 + j] += static_cast<float>(db[j]);
    }
  }

  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float mu = pm[r], rs = pr[r];
    double sg = 0.0, sgx = 0.0;
    lane_sum2(
        n,
        [&](int64_t j, double& g, double& gx) {
          g = static_cast<double>(pdy[r * n + j]) * pg[j];
          gx = g * (px[r * n + j] - mu) * rs;
        },
        sg, sgx);
    const float mg = static_cast<float>(sg / n), mgx = static_cast<float>(sgx / n);
    for (int64_t j = 0; j < n; ++j) {
      const float xhat = (px[r * n + j] - mu) * rs;
      pdx[r * n + j] = rs * (pdy[r * n + j] * pg[j] - mg - xhat * mgx);
    }
  }
}

}  // namespace rotor::ops
