// Element-wise ops and reductions against double references; activation
// backward against central differences of the double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::Activation;

std::vector<double> to_double(const Tensor& t) {
  auto f = t.to_floats();
  return {f.begin(), f.end()};
}

double act_ref(double x, Activation a) {
  switch (a) {
    case Activation::None:
      return x;
    case Activation::ReLU:
      return x > 0 ? x : 0;
    case Activation::GELU:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0;
}

TEST(Elementwise, FillCastAddMulScaleAxpby) {
  Tensor x = Tensor::zeros({3, 4});
  ops::fill(x, 1.5f);
  EXPECT_EQ(x.to_floats(), std::vector<float>(12, 1.5f));
  Tensor h = Tensor::zeros({2}, DType::F16);
  ops::fill(h, 0.1f);
  EXPECT_EQ(h.data<Half>()[1].bits, 0x2e66);

  Tensor a = test::random_tensor({3, 4}, 1), b = test::random_tensor({3, 4}, 2);
  auto av = to_double(a), bv = to_double(b);
  Tensor out = Tensor::zeros({3, 4});
  ops::add(a, b, out);
  std::vector<double> ref(12);
  for (size_t i = 0; i < 12; ++i) ref[i] = av[i] + bv[i];
  EXPECT_LT(test::max_rel_error(out.to_floats(), ref), 1e-7);
  ops::mul(a, b, out);
  for (size_t i = 0; i < 12; ++i) ref[i] = av[i] * bv[i];
  EXPECT_LT(test::max_rel_error(out.to_floats(), ref), 1e-7);
  ops::add(a, b, a);  // aliasing output
  for (size_t i = 0; i < 12; ++i) ref[i] = av[i] + bv[i];
  EXPECT_LT(test::max_rel_error(a.to_floats(), ref), 1e-7);
  ops::scale(a, -2.0f);
  for (size_t i = 0; i < 12; ++i) ref[i] *= -2.0;
  EXPECT_LT(test::max_rel_error(a.to_floats(), ref), 1e-7);
  Tensor y = b.clone();
  ops::axpby(0.5f, a, 3.0f, y);
  for (size_t i = 0; i < 12; ++i) ref[i] = 0.5 * ref[i] + 3.0 * bv[i];
  EXPECT_LT(test::max_rel_error(y.to_floats(), ref), 1e-6);
  // beta = 0 overwrites: a NaN already in y does not survive.
  ops::fill(y, std::numeric_limits<float>::quiet_NaN());
  ops::axpby(1.0f, b, 0.0f, y);
  EXPECT_EQ(y.to_floats(), b.to_floats());

  // cast f32 -> f16 -> bf16 -> f32 rounds at each step.
  Tensor src = Tensor::from_floats({1.0f, 0.1f, 65520.0f, -3.0f}, {4});
  Tensor f16 = Tensor::zeros({4}, DType::F16), b16 = Tensor::zeros({2, 2}, DType::BF16);
  ops::cast(src, f16);
  EXPECT_EQ(f16.data<Half>()[1].bits, 0x2e66);
  EXPECT_EQ(f16.data<Half>()[2].bits, 0x7c00);
  ops::cast(f16, b16);
  Tensor back = Tensor::zeros({4});
  ops::cast(b16, back);
  auto bk = back.to_floats();
  EXPECT_EQ(bk[0], 1.0f);
  EXPECT_EQ(bk[1], bf16_bits_to_float(float_to_bf16_bits(half_bits_to_float(0x2e66))));
  EXPECT_TRUE(std::isinf(bk[2]));
  EXPECT_EQ(bk[3], -3.0f);
}

TEST(Elementwise, AddBias) {
  Tensor x = test::random_tensor({2, 3, 5}, 3), bias = test::random_tensor({5}, 4);
  auto xv = to_double(x), bv = to_double(bias);
  ops::add_bias(x, bias);
  std::vector<double> ref(xv.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = xv[i] + bv[i % 5];
  EXPECT_LT(test::max_rel_error(x.to_floats(), ref), 1e-7);
  Tensor wrong = Tensor::zeros({4});
  EXPECT_THROW(ops::add_bias(x, wrong), Error);
}

TEST(Elementwise, ActivationForwardAndBackward) {
  // Keep values away from 0 so the ReLU kink is not inside a difference step.
  auto vals = test::random_floats(64, 5, -3.0f, 3.0f);
  for (auto& v : vals)
    if (std::abs(v) < 0.01f) v = 0.5f;
  Tensor x = Tensor::from_floats(vals, {8, 8});
  Tensor dy = test::random_tensor({8, 8}, 6);
  auto dyv = to_double(dy);
  for (Activation act : {Activation::None, Activation::ReLU, Activation::GELU}) {
    SCOPED_TRACE(ops::activation_name(act));
    Tensor y = Tensor::zeros({8, 8}), dx = Tensor::zeros({8, 8});
    ops::activation_forward(x, y, act);
    std::vector<double> ref(64), fd(64);
    const double h = 1e-6;
    for (size_t i = 0; i < 64; ++i) {
      ref[i] = act_ref(vals[i], act);
      // d/dx_i of sum(dy * act(x)) by central differences in double.
      fd[i] = dyv[i] * (act_ref(vals[i] + h, act) - act_ref(vals[i] - h, act)) / (2 * h);
    }
    EXPECT_LT(test::max_rel_error(y.to_floats(), ref), 1e-6);
    ops::activation_backward(dy, x, dx, act);
    EXPECT_LT(test::max_rel_error(dx.to_floats(), fd), 1e-5);
    double norm = 0;
    for (double g : fd) norm += g * g;
    EXPECT_GT(norm, 1.0);  // the check is not vacuous
  }
  // In-place forward (y aliases x).
  Tensor z = x.clone();
  ops::activation_forward(z, z, Activation::ReLU);
  for (float v : z.to_floats()) EXPECT_GE(v, 0.0f);
}

// GELU (tanh approximation) against the double formula over its whole
// useful range, tails included: every value and derivative within 1e-5
// relative. x / (1 + e^(-2u)) keeps the negative tail, where 0.5 x (1 +
// tanh u) in float is lost to cancellation (1 + tanh u is below float's
// resolution near -1 there), and non-finite inputs stay what they were.
TEST(Elementwise, GeluKeepsItsRelativeAccuracyInTheTails) {
  std::vector<float> vals;
  for (float v = -9.0f; v <= 9.0f; v += 0.0625f) vals.push_back(v);
  const int64_t n = static_cast<int64_t>(vals.size());
  Tensor x = Tensor::from_floats(vals, {n});
  Tensor y = Tensor::zeros({n}), dx = Tensor::zeros({n});
  Tensor ones = Tensor::zeros({n});
  ops::fill(ones, 1.0f);
  ops::activation_forward(x, y, Activation::GELU);
  ops::activation_backward(ones, x, dx, Activation::GELU);
  const auto yv = y.to_floats(), dv = dx.to_floats();
  const double c = std::sqrt(2 / M_PI), a = 0.044715;
  for (int64_t i = 0; i < n; ++i) {
    const double v = vals[static_cast<size_t>(i)];
    const double u = c * (v + a * v * v * v), s = 1 / (1 + std::exp(-2 * u));
    const double want = v * s;
    const double dwant = s + v * s * (1 - s) * 2 * c * (1 + 3 * a * v * v);
    EXPECT_LE(std::abs(yv[static_cast<size_t>(i)] - want), 1e-5 * std::abs(want)) << "x " << v;
    EXPECT_LE(std::abs(dv[static_cast<size_t>(i)] - dwant), 1e-5 * std::abs(dwant) + 1e-30)
        << "x " << v;
  }
  const float inf = std::numeric_limits<float>::infinity();
  Tensor odd = Tensor::from_floats({inf, std::numeric_limits<float>::quiet_NaN(), -30.0f}, {3});
  Tensor oy = Tensor::zeros({3});
  ops::activation_forward(odd, oy, Activation::GELU);
  const auto ov = oy.to_floats();
  EXPECT_EQ(ov[0], inf);
  EXPECT_TRUE(std::isnan(ov[1]));
  EXPECT_LE(ov[2], 0.0f);
  EXPECT_GT(ov[2], -1e-30f);
}

// tanh and its gradient from the output (BERT's pooler, label attention):
// against double, by central differences, in place, with a tensor large
// enough to be split over threads, and in bf16 (f32 compute, one rounding).
TEST(Elementwise, TanhForwardAndBackward) {
  std::vector<float> vals = test::random_floats(5000, 7, -6.0f, 6.0f);
  const float edges[] = {0.0f, 1e-4f, -1e-4f, 20.0f, -20.0f, 0.5f};
  std::copy(std::begin(edges), std::end(edges), vals.begin());
  const int64_t n = static_cast<int64_t>(vals.size());
  Tensor x = Tensor::from_floats(vals, {n});
  Tensor dy = test::random_tensor({n}, 8);
  Tensor y = Tensor::zeros({n}), dx = Tensor::zeros({n});
  ops::tanh_forward(x, y);
  ops::tanh_backward(dy, y, dx);
  const auto yv = y.to_floats(), dxv = dx.to_floats(), dyv = dy.to_floats();
  const double h = 1e-6;
  double norm = 0;
  for (size_t i = 0; i < vals.size(); ++i) {
    const double v = vals[i];
    EXPECT_LE(std::abs(yv[i] - std::tanh(v)), 2e-7) << "x " << v;
    const double fd = dyv[i] * (std::tanh(v + h) - std::tanh(v - h)) / (2 * h);
    EXPECT_LE(std::abs(dxv[i] - fd), 2e-6 * std::max(1.0, std::abs(static_cast<double>(dyv[i]))))
        << "x " << v;
    norm += fd * fd;
  }
  EXPECT_GT(norm, 1.0);  // not vacuous
  EXPECT_EQ(yv[3], 1.0f);
  EXPECT_EQ(yv[4], -1.0f);
  // In place: the same bits.
  Tensor z = x.clone();
  ops::tanh_forward(z, z);
  EXPECT_EQ(z.to_floats(), yv);
  Tensor g = dy.clone();
  ops::tanh_backward(g, y, g);
  EXPECT_EQ(g.to_floats(), dxv);
  // bf16: the f32 result rounded once.
  Tensor xb = Tensor::from_floats(vals, {n}, DType::BF16), yb = Tensor::zeros({n}, DType::BF16);
  ops::tanh_forward(xb, yb);
  Tensor y32 = Tensor::zeros({n});
  ops::tanh_forward(Tensor::from_floats(xb.to_floats(), {n}), y32);
  EXPECT_EQ(yb.to_floats(), Tensor::from_floats(y32.to_floats(), {n}, DType::BF16).to_floats());
  Tensor mismatched = Tensor::zeros({n + 1});
  EXPECT_THROW(ops::tanh_forward(x, mismatched), Error);
  EXPECT_THROW(ops::tanh_backward(dy, mismatched, dx), Error);
}

// SiLU against x / (1 + e^-x) in double, and its gradient against central
// differences; GELU's tails test covers the shared exp_f32.
TEST(Elementwise, SiluForwardAndBackward) {
  std::vector<float> vals = test::random_floats(5000, 17, -12.0f, 12.0f);
  const float edges[] = {0.0f, -0.0f, 1e-4f, -1e-4f, 90.0f, -90.0f, -20.0f};
  std::copy(std::begin(edges), std::end(edges), vals.begin());
  const int64_t n = static_cast<int64_t>(vals.size());
  Tensor x = Tensor::from_floats(vals, {n});
  Tensor dy = test::random_tensor({n}, 18);
  Tensor y = Tensor::zeros({n}), dx = Tensor::zeros({n});
  ops::activation_forward(x, y, ops::Activation::SiLU);
  ops::activation_backward(dy, x, dx, ops::Activation::SiLU);
  const auto yv = y.to_floats(), dxv = dx.to_floats(), dyv = dy.to_floats();
  const auto silu = [](double v) { return v / (1.0 + std::exp(-v)); };
  const double h = 1e-5;
  double norm = 0;
  for (size_t i = 0; i < vals.size(); ++i) {
    const double v = vals[i];
    EXPECT_LE(std::abs(yv[i] - silu(v)), 4e-7 * std::max(1.0, std::abs(silu(v)))) << "x " << v;
    const double fd = dyv[i] * (silu(v + h) - silu(v - h)) / (2 * h);
    EXPECT_LE(std::abs(dxv[i] - fd), 2e-6 * std::max(1.0, std::abs(static_cast<double>(dyv[i]))))
        << "x " << v;
    norm += fd * fd;
  }
  EXPECT_GT(norm, 1.0);  // not vacuous
  EXPECT_EQ(yv[4], 90.0f);
  EXPECT_LE(std::abs(yv[5]), 1e-30f);
  // The GEMM epilogue applies the same function.
  Tensor a = Tensor::from_floats(vals, {n, 1}), one = Tensor::from_floats({1.0f}, {1, 1});
  Tensor c = Tensor::zeros({n, 1}), pre = Tensor::zeros({n, 1});
  ops::GemmOptions o;
  o.activation = ops::Activation::SiLU;
  o.pre_activation = pre;
  ops::gemm(a, one, c, o);
  EXPECT_EQ(c.to_floats(), yv);
  EXPECT_EQ(pre.to_floats(), vals);
}

// The gated linear unit: act(gate) * value against its definition, for every
// activation, its gradient against central differences, and bf16 as the f32
// result rounded once.
TEST(Elementwise, GluForwardAndBackward) {
  const int64_t rows = 7, F = 33;
  std::vector<float> hv = test::random_floats(static_cast<size_t>(rows * 2 * F), 21, -4.0f, 4.0f);
  Tensor h = Tensor::from_floats(hv, {rows, 2 * F});
  Tensor dy = test::random_tensor({rows, F}, 22);
  const auto dyv = dy.to_floats();
  for (ops::Activation act : {ops::Activation::None, ops::Activation::ReLU, ops::Activation::GELU,
                              ops::Activation::SiLU}) {
    SCOPED_TRACE(ops::activation_name(act));
    // act(x) by the plain activation op, element by element.
    const auto act_of = [&](float v) {
      Tensor t = Tensor::from_floats({v}, {1}), u = Tensor::zeros({1});
      ops::activation_forward(t, u, act);
      return static_cast<double>(u.to_floats()[0]);
    };
    Tensor y = Tensor::zeros({rows, F}), dh = Tensor::zeros({rows, 2 * F});
    ops::glu_forward(h, y, act);
    ops::glu_backward(dy, h, dh, act);
    const auto yv = y.to_floats(), dhv = dh.to_floats();
    const double step = 1e-3;
    double norm = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const size_t g = static_cast<size_t>(r * 2 * F + j), v = g + static_cast<size_t>(F);
        const size_t o = static_cast<size_t>(r * F + j);
        EXPECT_FLOAT_EQ(yv[o], static_cast<float>(act_of(hv[g]) * hv[v]));
        const double d_gate =
            dyv[o] * hv[v] * (act_of(hv[g] + step) - act_of(hv[g] - step)) / (2 * step);
        if (act != ops::Activation::ReLU || std::abs(hv[g]) > 2 * step)
          EXPECT_NEAR(dhv[g], d_gate, 2e-3 * std::max(1.0, std::abs(d_gate)));
        EXPECT_NEAR(dhv[v], dyv[o] * act_of(hv[g]), 1e-6);
        norm += d_gate * d_gate;
      }
    EXPECT_GT(norm, 1.0);  // not vacuous
    // In place (dh over h): the same bits.
    Tensor inplace = h.clone();
    ops::glu_backward(dy, inplace, inplace, act);
    EXPECT_EQ(inplace.to_floats(), dhv);
    // bf16: the f32 results rounded once.
    Tensor hb = Tensor::from_floats(hv, {rows, 2 * F}, DType::BF16);
    Tensor yb = Tensor::zeros({rows, F}, DType::BF16), y32 = Tensor::zeros({rows, F});
    ops::glu_forward(hb, yb, act);
    ops::glu_forward(Tensor::from_floats(hb.to_floats(), {rows, 2 * F}), y32, act);
    EXPECT_EQ(yb.to_floats(),
              Tensor::from_floats(y32.to_floats(), {rows, F}, DType::BF16).to_floats());
  }
  Tensor wrong = Tensor::zeros({rows, F + 1});
  EXPECT_THROW(ops::glu_forward(h, wrong, ops::Activation::SiLU), Error);
  Tensor dwrong = Tensor::zeros({rows, F});
  EXPECT_THROW(ops::glu_backward(dy, h, dwrong, ops::Activation::SiLU), Error);
}

TEST(Elementwise, MismatchedSizesFail) {
  Tensor a = Tensor::zeros({4}), b = Tensor::zeros({5}), out = Tensor::zeros({4});
  EXPECT_THROW(ops::add(a, b, out), Error);
  EXPECT_THROW(ops::mul(a, b, out), Error);
  EXPECT_THROW(ops::axpby(1.0f, a, 1.0f, b), Error);
  Tensor i = Tensor::from_ints({1, 2, 3, 4}, {4});
  EXPECT_THROW(ops::scale(i, 2.0f), Error);
  // 16-bit tensors are emulated on the CPU (f32 compute, one rounding).
  Tensor h = Tensor::from_floats({1.0f, 2.0f, 3.0f, 4.0f}, {4}, DType::F16);
  Tensor hs = Tensor::zeros({4}, DType::F16);
  ops::add(h, h, hs);
  EXPECT_EQ(hs.to_floats(), (std::vector<float>{2, 4, 6, 8}));
}

TEST(Reduce, SumRowsSumMaxAbs) {
  Tensor x = test::random_tensor({3, 4, 6}, 7);  // rows = 12, n = 6
  auto xv = to_double(x);
  std::vector<double> ref(6, 0.0);
  double total = 0, mx = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    ref[i % 6] += xv[i];
    total += xv[i];
    mx = std::max(mx, std::abs(xv[i]));
  }
  Tensor out = Tensor::full({6}, 100.0f);
  ops::sum_rows(x, out, false);
  EXPECT_LT(test::max_rel_error(out.to_floats(), ref), 1e-6);
  ops::sum_rows(x, out, true);  // accumulates
  for (auto& r : ref) r *= 2;
  EXPECT_LT(test::max_rel_error(out.to_floats(), ref), 1e-6);
  EXPECT_NEAR(ops::sum(x), total, 1e-9);
  EXPECT_EQ(ops::max_abs(x), static_cast<float>(mx));
  x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(ops::max_abs(x)));
  Tensor wrong = Tensor::zeros({5});
  EXPECT_THROW(ops::sum_rows(x, wrong, false), Error);
}

}  // namespace
}  // namespace rotor
