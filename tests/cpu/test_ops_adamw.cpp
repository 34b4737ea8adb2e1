// AdamW against a double-precision PyTorch-formula reference over several
// steps; global norm and the non-finite check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/adamw.h"
#include "ops/reduce.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Vec = std::vector<double>;

TEST(AdamW, MatchesReferenceOverSteps) {
  const int64_t n = 257;
  Tensor p = test::random_tensor({n}, 1), m = Tensor::zeros({n}), v = Tensor::zeros({n});
  auto pf = p.to_floats();
  Vec rp(pf.begin(), pf.end()), rm(n, 0.0), rv(n, 0.0);
  ops::AdamWOptions o;
  o.lr = 1e-2f;
  o.beta1 = 0.9f;
  o.beta2 = 0.98f;
  o.eps = 1e-8f;
  o.weight_decay = 0.1f;
  o.device_scale = Tensor::from_floats({0.5f}, {1});
  for (int64_t step = 1; step <= 5; ++step) {
    Tensor g = test::random_tensor({n}, 100 + step, -3.0f, 3.0f);
    auto gf = g.to_floats();
    o.step = step;
    o.grad_multiplier = 0.25f * static_cast<float>(step);
    ops::adamw_step(p, g, m, v, o);
    const double scale = 0.5 * o.grad_multiplier;
    for (int64_t i = 0; i < n; ++i) {
      const double gi = gf[i] * scale;
      rm[i] = o.beta1 * rm[i] + (1 - static_cast<double>(o.beta1)) * gi;
      rv[i] = o.beta2 * rv[i] + (1 - static_cast<double>(o.beta2)) * gi * gi;
      rp[i] -= static_cast<double>(o.lr) * o.weight_decay * rp[i];
      const double mhat = rm[i] / (1 - std::pow(static_cast<double>(o.beta1), step));
      const double vhat = rv[i] / (1 - std::pow(static_cast<double>(o.beta2), step));
      rp[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
    }
  }
  EXPECT_LT(test::max_rel_error(p.to_floats(), rp), 1e-5);
  EXPECT_LT(test::max_rel_error(m.to_floats(), rm), 1e-5);
  EXPECT_LT(test::max_rel_error(v.to_floats(), rv), 1e-5);
  // The parameters moved by about lr per step (Adam's normalized update).
  double moved = 0;
  for (int64_t i = 0; i < n; ++i) moved = std::max(moved, std::abs(rp[i] - pf[i]));
  EXPECT_GT(moved, 0.02);
}

TEST(AdamW, FirstStepIsSignTimesLr) {
  // With bias correction, step 1 moves each weight by lr * g/|g| (eps aside).
  Tensor p = Tensor::from_floats({1.0f, -2.0f, 0.5f}, {3});
  Tensor g = Tensor::from_floats({3.0f, -0.001f, 1e3f}, {3});
  Tensor m = Tensor::zeros({3}), v = Tensor::zeros({3});
  ops::AdamWOptions o;
  o.lr = 0.1f;
  ops::adamw_step(p, g, m, v, o);
  auto pv = p.to_floats();
  EXPECT_NEAR(pv[0], 0.9f, 1e-6);
  EXPECT_NEAR(pv[1], -1.9f, 1e-5);
  EXPECT_NEAR(pv[2], 0.4f, 1e-6);
}

TEST(AdamW, ArgumentErrors) {
  Tensor p = Tensor::zeros({4}), g = Tensor::zeros({3}), m = Tensor::zeros({4}),
         v = Tensor::zeros({4});
  EXPECT_THROW(ops::adamw_step(p, g, m, v, {}), Error);
  Tensor g4 = Tensor::zeros({4});
  ops::AdamWOptions o;
  o.step = 0;
  EXPECT_THROW(ops::adamw_step(p, g4, m, v, o), Error);
  o.step = 1;
  o.device_scale = Tensor::zeros({2});
  EXPECT_THROW(ops::adamw_step(p, g4, m, v, o), Error);
}

TEST(GlobalNorm, SumsSquaresOfAllTensors) {
  Tensor a = test::random_tensor({3, 5}, 1), b = test::random_tensor({7}, 2, -10.0f, 10.0f);
  double ss = 0;
  for (float x : a.to_floats()) ss += static_cast<double>(x) * x;
  for (float x : b.to_floats()) ss += static_cast<double>(x) * x;
  Tensor norm = ops::global_norm({a, b});
  EXPECT_EQ(norm.shape(), (Shape{1}));
  EXPECT_EQ(norm.dtype(), DType::F32);
  EXPECT_TRUE(norm.is_cpu());
  EXPECT_NEAR(norm.item(), std::sqrt(ss), 1e-5 * std::sqrt(ss));
  EXPECT_EQ(ops::global_norm({}).item(), 0.0f);
  // Squares summed in double: no overflow for values near sqrt(FLT_MAX).
  Tensor big = Tensor::full({4}, 1e20f);
  EXPECT_NEAR(ops::global_norm({big}).item(), 2e20f, 1e14f);
}

TEST(AnyNonfinite, FlagsInfAndNaN) {
  Tensor a = test::random_tensor({10}, 3), b = test::random_tensor({4, 4}, 4);
  Tensor flag = ops::any_nonfinite({a, b});
  EXPECT_EQ(flag.dtype(), DType::U8);
  EXPECT_EQ(flag.shape(), (Shape{1}));
  EXPECT_EQ(flag.to_ints()[0], 0);
  b.data<float>()[7] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ops::any_nonfinite({a, b}).to_ints()[0], 1);
  b.data<float>()[7] = 0.0f;
  a.data<float>()[9] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(ops::any_nonfinite({a, b}).to_ints()[0], 1);
  EXPECT_EQ(ops::any_nonfinite({b}).to_ints()[0], 0);
}

}  // namespace
}  // namespace rotor
