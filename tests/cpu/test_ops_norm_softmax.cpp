// Softmax, layer norm and RMSNorm: forward against double references,
// backward against central differences of those references (loss = sum(dy * y)).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "ops/elementwise.h"
#include "ops/layer_norm.h"
#include "ops/softmax.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Vec = std::vector<double>;

using test::fd_grad;
using test::to_double;

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double norm(const Vec& a) {
  return std::sqrt(dot(a, a));
}

Vec softmax_ref(const Vec& x, int64_t n) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[r * n + j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(x[r * n + j] - mx);
    for (int64_t j = 0; j < n; ++j) y[r * n + j] = std::exp(x[r * n + j] - mx) / s;
  }
  return y;
}

TEST(Softmax, ForwardMatchesDoubleReference) {
  Tensor x = test::random_tensor({2, 3, 17}, 1, -5.0f, 5.0f);
  Tensor y = Tensor::zeros(x.shape());
  ops::softmax_forward(x, y);
  EXPECT_LT(test::max_rel_error(y.to_floats(), softmax_ref(to_double(x), 17)), 1e-6);
  // Large logits do not overflow (max subtraction).
  Tensor big = Tensor::from_floats({1000.0f, 1001.0f}, {1, 2});
  Tensor yb = Tensor::zeros({1, 2});
  ops::softmax_forward(big, yb);
  EXPECT_NEAR(yb.to_floats()[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

TEST(Softmax, FullyMaskedRowIsZero) {
  const float ninf = -std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_floats({ninf, ninf, 0.0f, ninf}, {2, 2});
  Tensor y = Tensor::zeros({2, 2});
  ops::softmax_forward(x, y);
  EXPECT_EQ(y.to_floats(), (std::vector<float>{0, 0, 1, 0}));
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  const int64_t n = 9;
  Tensor x = test::random_tensor({4, n}, 2, -2.0f, 2.0f);
  Tensor dy = test::random_tensor({4, n}, 3);
  const Vec dyv = to_double(dy);
  Vec fd = fd_grad([&](const Vec& xv) { return dot(dyv, softmax_ref(xv, n)); }, to_double(x));
  Tensor y = Tensor::zeros(x.shape()), dx = Tensor::zeros(x.shape());
  ops::softmax_forward(x, y);
  ops::softmax_backward(y, dy, dx);
  EXPECT_GT(norm(fd), 0.1);
  EXPECT_LT(test::max_rel_error(dx.to_floats(), fd), 1e-5);
  ops::softmax_backward(y, dy, dy);  // dx may alias dy
  EXPECT_EQ(dy.to_floats(), dx.to_floats());
}

struct LnRef {
  Vec y, mean, rstd;
};

LnRef layer_norm_ref(const Vec& x, const Vec& g, const Vec& b, int64_t n, double eps) {
  LnRef r{Vec(x.size()), {}, {}};
  for (size_t row = 0; row < x.size() / n; ++row) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mu += x[row * n + j];
    mu /= n;
    for (int64_t j = 0; j < n; ++j) var += (x[row * n + j] - mu) * (x[row * n + j] - mu);
    var /= n;  // biased, as PyTorch
    const double rs = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j) r.y[row * n + j] = (x[row * n + j] - mu) * rs * g[j] + b[j];
    r.mean.push_back(mu);
    r.rstd.push_back(rs);
  }
  return r;
}

TEST(LayerNorm, ForwardMatchesDoubleReference) {
  const int64_t n = 24;
  Tensor x = test::random_tensor({2, 5, n}, 4, -3.0f, 5.0f);  // non-zero mean
  Tensor g = test::random_tensor({n}, 5, 0.5f, 1.5f), b = test::random_tensor({n}, 6);
  Tensor y = Tensor::zeros(x.shape()), mean = Tensor::zeros({10}), rstd = Tensor::zeros({10});
  ops::layer_norm_forward(x, g, b, 1e-5f, y, mean, rstd);
  LnRef ref = layer_norm_ref(to_double(x), to_double(g), to_double(b), n, 1e-5);
  EXPECT_LT(test::max_rel_error(y.to_floats(), ref.y), 2e-6);
  EXPECT_LT(test::max_rel_error(mean.to_floats(), ref.mean), 1e-6);
  EXPECT_LT(test::max_rel_error(rstd.to_floats(), ref.rstd), 1e-6);
}

TEST(LayerNorm, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t rows = 6, n = 10;
  const double eps = 1e-5;
  Tensor x = test::random_tensor({rows, n}, 7, -2.0f, 3.0f);
  Tensor g = test::random_tensor({n}, 8, 0.5f, 1.5f), b = test::random_tensor({n}, 9);
  Tensor dy = test::random_tensor({rows, n}, 10);
  const Vec xv = to_double(x), gv = to_double(g), bv = to_double(b), dyv = to_double(dy);
  Vec fdx =
      fd_grad([&](const Vec& v) { return dot(dyv, layer_norm_ref(v, gv, bv, n, eps).y); }, xv);
  Vec fdg =
      fd_grad([&](const Vec& v) { return dot(dyv, layer_norm_ref(xv, v, bv, n, eps).y); }, gv);
  Vec fdb =
      fd_grad([&](const Vec& v) { return dot(dyv, layer_norm_ref(xv, gv, v, n, eps).y); }, bv);

  Tensor y = Tensor::zeros(x.shape()), mean = Tensor::zeros({rows}), rstd = Tensor::zeros({rows});
  ops::layer_norm_forward(x, g, b, static_cast<float>(eps), y, mean, rstd);
  Tensor dx = Tensor::zeros(x.shape());
  Tensor dg = Tensor::full({n}, 0.25f), db = Tensor::full({n}, -0.5f);  // accumulated into
  ops::layer_norm_backward(dy, x, g, mean, rstd, dx, dg, db);
  for (auto& v : fdg) v += 0.25;
  for (auto& v : fdb) v -= 0.5;
  EXPECT_GT(norm(fdx), 0.1);
  EXPECT_LT(test::max_rel_error(dx.to_floats(), fdx), 2e-5);
  EXPECT_LT(test::max_rel_error(dg.to_floats(), fdg), 2e-5);
  EXPECT_LT(test::max_rel_error(db.to_floats(), fdb), 2e-5);
}

// RMSNorm (rms): y = x / sqrt(mean(x^2) + eps) * g, no mean, no bias.
Vec rms_norm_ref(const Vec& x, const Vec& g, int64_t n, double eps, Vec* rstd = nullptr) {
  Vec y(x.size());
  for (size_t row = 0; row < x.size() / n; ++row) {
    double ms = 0;
    for (int64_t j = 0; j < n; ++j) ms += x[row * n + j] * x[row * n + j];
    const double rs = 1 / std::sqrt(ms / n + eps);
    for (int64_t j = 0; j < n; ++j) y[row * n + j] = x[row * n + j] * rs * g[j];
    if (rstd) rstd->push_back(rs);
  }
  return y;
}

// rms: the forward against double (mean written 0, a zero beta adds
// nothing), the backward against central differences, dx alone and added
// to a residual, in f32 and (one rounding) bf16.
TEST(LayerNorm, RmsNormForwardAndBackward) {
  const int64_t rows = 7, n = 40;
  const double eps = 1e-6;
  Tensor x = test::random_tensor({rows, n}, 27, -2.0f, 3.0f);  // a non-zero mean
  Tensor g = test::random_tensor({n}, 28, 0.5f, 1.5f), zero = Tensor::zeros({n});
  Tensor dy = test::random_tensor({rows, n}, 29);
  const Vec xv = to_double(x), gv = to_double(g), dyv = to_double(dy);
  Vec rstd_ref;
  const Vec yref = rms_norm_ref(xv, gv, n, eps, &rstd_ref);
  Tensor y = Tensor::zeros(x.shape()), mean = Tensor::full({rows}, 7.0f),
         rstd = Tensor::zeros({rows});
  ops::layer_norm_forward(x, g, zero, static_cast<float>(eps), y, mean, rstd, true);
  EXPECT_LT(test::max_rel_error(y.to_floats(), yref), 2e-6);
  EXPECT_LT(test::max_rel_error(rstd.to_floats(), rstd_ref), 1e-6);
  EXPECT_EQ(mean.to_floats(), std::vector<float>(rows, 0.0f));
  // The layer norm of the same x differs (the mean is not subtracted).
  Tensor yln = Tensor::zeros(x.shape()), m2 = Tensor::zeros({rows}), r2 = Tensor::zeros({rows});
  ops::layer_norm_forward(x, g, zero, static_cast<float>(eps), yln, m2, r2);
  EXPECT_GT(test::max_rel_error(yln.to_floats(), yref), 1e-2);

  const Vec fdx = fd_grad([&](const Vec& v) { return dot(dyv, rms_norm_ref(v, gv, n, eps)); }, xv);
  Vec fdg = fd_grad([&](const Vec& v) { return dot(dyv, rms_norm_ref(xv, v, n, eps)); }, gv);
  Tensor dx = Tensor::zeros(x.shape()), dg = Tensor::full({n}, 0.25f), db = Tensor::zeros({n});
  ops::layer_norm_backward(dy, x, g, mean, rstd, dx, dg, db, true);
  for (auto& v : fdg) v += 0.25;
  EXPECT_GT(norm(fdx), 0.1);
  EXPECT_LT(test::max_rel_error(dx.to_floats(), fdx), 2e-5);
  EXPECT_LT(test::max_rel_error(dg.to_floats(), fdg), 2e-5);
  // backward_add: the same dx plus the residual.
  Tensor res = test::random_tensor({rows, n}, 30), dx2 = Tensor::zeros(x.shape());
  Tensor dg2 = Tensor::full({n}, 0.25f), db2 = Tensor::zeros({n});
  ops::layer_norm_backward_add(dy, x, g, mean, rstd, res, dx2, dg2, db2, true);
  const auto a = dx.to_floats(), r = res.to_floats(), sum = dx2.to_floats();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(sum[i], a[i] + r[i]) << i;
  EXPECT_EQ(dg2.to_floats(), dg.to_floats());
  // bf16 activations: the f32 op's result rounded once.
  Tensor xb = Tensor::from_floats(x.to_floats(), x.shape(), DType::BF16);
  Tensor yb = Tensor::zeros(x.shape(), DType::BF16), mb = Tensor::zeros({rows}),
         rb = Tensor::zeros({rows});
  ops::layer_norm_forward(xb, g, zero, static_cast<float>(eps), yb, mb, rb, true);
  Tensor y32 = Tensor::zeros(x.shape()), m32 = Tensor::zeros({rows}), r32 = Tensor::zeros({rows});
  ops::layer_norm_forward(Tensor::from_floats(xb.to_floats(), x.shape()), g, zero,
                          static_cast<float>(eps), y32, m32, r32, true);
  EXPECT_EQ(yb.to_floats(),
            Tensor::from_floats(y32.to_floats(), x.shape(), DType::BF16).to_floats());
}

// The fused residual (a pre-norm block's input gradient) against the
// unfused chain: layer_norm_backward, then ops::add. In f32 the same bits
// for dx, dgamma and dbeta, with dx fresh, aliasing residual or aliasing
// dy; in bf16 within one rounding of the f32 result (the fused op rounds
// once). A residual of another shape or dtype is an error.
TEST(LayerNorm, BackwardAddIsBackwardThenAdd) {
  const int64_t rows = 37, n = 130;  // past a vector's width, with a tail
  Tensor x = test::random_tensor({rows, n}, 17, -2.0f, 3.0f);
  Tensor g = test::random_tensor({n}, 18, 0.5f, 1.5f), b = test::random_tensor({n}, 19);
  Tensor dy = test::random_tensor({rows, n}, 20), res = test::random_tensor({rows, n}, 21);
  Tensor y = Tensor::zeros(x.shape()), mean = Tensor::zeros({rows}), rstd = Tensor::zeros({rows});
  ops::layer_norm_forward(x, g, b, 1e-5f, y, mean, rstd);
  Tensor want = Tensor::zeros(x.shape());
  Tensor dg0 = Tensor::full({n}, 0.25f), db0 = Tensor::full({n}, -0.5f);
  ops::layer_norm_backward(dy, x, g, mean, rstd, want, dg0, db0);
  ops::add(res, want, want);
  for (const int alias : {0, 1, 2}) {  // dx fresh, dx = residual, dx = dy
    SCOPED_TRACE(alias);
    Tensor r = res.clone(), d = dy.clone();
    Tensor dx = alias == 1 ? r : (alias == 2 ? d : Tensor::zeros(x.shape()));
    Tensor dg = Tensor::full({n}, 0.25f), db = Tensor::full({n}, -0.5f);
    ops::layer_norm_backward_add(d, x, g, mean, rstd, r, dx, dg, db);
    EXPECT_EQ(dx.to_floats(), want.to_floats());
    EXPECT_EQ(dg.to_floats(), dg0.to_floats());
    EXPECT_EQ(db.to_floats(), db0.to_floats());
  }
  const auto lp = [](const Tensor& t) {
    return Tensor::from_floats(t.to_floats(), t.shape(), DType::BF16);
  };
  Tensor x16 = lp(x), dy16 = lp(dy), res16 = lp(res), dx16 = Tensor::zeros(x.shape(), DType::BF16);
  Tensor m16 = Tensor::zeros({rows}), r16 = Tensor::zeros({rows}), y16 = lp(y);
  ops::layer_norm_forward(x16, g, b, 1e-5f, y16, m16, r16);
  Tensor dg = Tensor::zeros({n}), db = Tensor::zeros({n});
  ops::layer_norm_backward_add(dy16, x16, g, m16, r16, res16, dx16, dg, db);
  Tensor ref = Tensor::zeros(x.shape()), dgr = Tensor::zeros({n}), dbr = Tensor::zeros({n});
  const Tensor x32 = Tensor::from_floats(x16.to_floats(), x.shape());
  const Tensor dy32 = Tensor::from_floats(dy16.to_floats(), x.shape());
  ops::layer_norm_backward(dy32, x32, g, m16, r16, ref, dgr, dbr);
  ops::add(Tensor::from_floats(res16.to_floats(), x.shape()), ref, ref);
  EXPECT_EQ(dx16.to_floats(), lp(ref).to_floats());
  Tensor bad = Tensor::zeros({rows, n - 1});
  EXPECT_THROW(ops::layer_norm_backward_add(dy, x, g, mean, rstd, bad, dx16, dg, db), Error);
  Tensor dx = Tensor::zeros(x.shape());
  EXPECT_THROW(ops::layer_norm_backward_add(dy, x, g, mean, rstd, res16, dx, dg, db), Error);
}

TEST(LayerNorm, ShapeErrors) {
  Tensor x = Tensor::zeros({3, 4}), g = Tensor::zeros({4}), b = Tensor::zeros({5});
  Tensor y = Tensor::zeros({3, 4}), m = Tensor::zeros({3}), r = Tensor::zeros({3});
  EXPECT_THROW(ops::layer_norm_forward(x, g, b, 1e-5f, y, m, r), Error);
  Tensor b4 = Tensor::zeros({4}), m2 = Tensor::zeros({2});
  EXPECT_THROW(ops::layer_norm_forward(x, g, b4, 1e-5f, y, m2, r), Error);
  Tensor y2 = Tensor::zeros({4, 3});
  EXPECT_THROW(ops::layer_norm_forward(x, g, b4, 1e-5f, y2, m, r), Error);
}

}  // namespace
}  // namespace rotor
