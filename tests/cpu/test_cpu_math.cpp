// The CPU ops' own elementary functions (ops/cpu_math.h): tanh within 3 ulp
// of the true value over every float exponent, NaN, infinities and signed
// zeros as tanh has them; and GELU's vector clones (ops/cpu_clones.h) give
// exactly what the scalar formula gives, element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/tensor.h"
#include "ops/cpu_math.h"
#include "ops/elementwise.h"
#include "support/test_util.h"

namespace rotor {
namespace {

double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = std::fabs(static_cast<double>(std::nextafter(w, 2.0f)) - w);
  return std::fabs(static_cast<double>(got) - want) / (ulp > 0 ? ulp : 1e-45);
}

TEST(CpuMath, TanhWithinThreeUlps) {
  double worst = 0;
  float at = 0;
  // Every 1021st float between 1e-8 and 20, both signs: each binade, many
  // points each.
  for (uint32_t b = 0x322BCC77u; b < 0x41A00000u; b += 1021) {
    float x;
    std::memcpy(&x, &b, 4);
    for (const float v : {x, -x}) {
      const double u = ulps(ops::detail::tanh_f32(v), std::tanh(static_cast<double>(v)));
      if (u > worst) worst = u, at = v;
    }
  }
  EXPECT_LE(worst, 3.0) << "at " << at;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(ops::detail::tanh_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(ops::detail::tanh_f32(inf), 1.0f);
  EXPECT_EQ(ops::detail::tanh_f32(-inf), -1.0f);
  EXPECT_EQ(ops::detail::tanh_f32(50.0f), 1.0f);
  EXPECT_EQ(ops::detail::tanh_f32(1e-30f), 1e-30f);
  EXPECT_TRUE(std::signbit(ops::detail::tanh_f32(-0.0f)));
  EXPECT_EQ(ops::detail::exp_nonneg_f32(0.0f), 1.0f);
  EXPECT_LE(ulps(ops::detail::exp_nonneg_f32(10.0f), std::exp(10.0)), 2.0);
}

// The activation ops run the vector clone the CPU has; the scalar formula
// here is compiled for the baseline: the same bits, NaN and infinities too.
TEST(CpuMath, GeluClonesGiveTheScalarBits) {
  const float c = 0.7978845608028654f, k = 0.044715f;
  std::vector<float> x = test::random_floats(100003, 17, -8.0f, 8.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = std::numeric_limits<float>::infinity();
  x[7] = -std::numeric_limits<float>::infinity();
  x[8] = 0.0f;
  const int64_t n = static_cast<int64_t>(x.size());
  Tensor tx = Tensor::from_floats(x, {n}), ty = Tensor::zeros({n}), tdx = Tensor::zeros({n});
  Tensor tdy = Tensor::from_floats(std::vector<float>(x.size(), 1.5f), {n});
  ops::activation_forward(tx, ty, ops::Activation::GELU);
  ops::activation_backward(tdy, tx, tdx, ops::Activation::GELU);
  const std::vector<float> y = ty.to_floats(), dx = tdx.to_floats();
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    const float t = ops::detail::tanh_f32(c * (v + k * v * v * v));
    const float want_y = 0.5f * v * (1.0f + t);
    const float want_dx =
        1.5f * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * c * (1.0f + 3.0f * k * v * v));
    ASSERT_EQ(std::memcmp(&y[i], &want_y, 4), 0) << i << ": " << y[i] << " vs " << want_y;
    ASSERT_EQ(std::memcmp(&dx[i], &want_dx, 4), 0) << i << ": " << dx[i] << " vs " << want_dx;
  }
}

}  // namespace
}  // namespace rotor
