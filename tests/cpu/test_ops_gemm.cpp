// GEMM on the CPU against a naive double-precision product, every option.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "ops/cpu_gemm.h"
#include "ops/gemm.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::Activation;
using ops::GemmOptions;

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

struct RefResult {
  std::vector<double> c, pre;
};

// C[batch, M, N] from A (batched or 2-D), B (batched or 2-D), the initial C.
RefResult gemm_ref(const Tensor& a, const Tensor& b, const Tensor& c0, const GemmOptions& o) {
  const auto A = a.to_floats(), B = b.to_floats(), C = c0.to_floats();
  const int64_t M = c0.size(-2), N = c0.size(-1);
  const int64_t K = o.trans_a ? a.size(-2) : a.size(-1);
  const int64_t batch = c0.numel() / (M * N);
  const bool ab = a.dim() > 2, bb = b.dim() > 2;
  std::vector<float> bias = o.bias.defined() ? o.bias.to_floats() : std::vector<float>(N, 0.0f);
  RefResult r{std::vector<double>(C.size()), std::vector<double>(C.size())};
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) {
          double av =
              o.trans_a ? A[(ab ? p * M * K : 0) + k * M + i] : A[(ab ? p * M * K : 0) + i * K + k];
          double bv =
              o.trans_b ? B[(bb ? p * K * N : 0) + j * K + k] : B[(bb ? p * K * N : 0) + k * N + j];
          s += av * bv;
        }
        const size_t idx = static_cast<size_t>((p * M + i) * N + j);
        const double pre = o.alpha * s + o.beta * C[idx] + bias[j];
        r.pre[idx] = pre;
        r.c[idx] = act_ref(pre, o.activation);
      }
  return r;
}

Shape with_batch(const Shape& batch, int64_t r, int64_t c) {
  Shape s = batch;
  s.push_back(r);
  s.push_back(c);
  return s;
}

void run_case(bool ta, bool tb, const Shape& batch, bool batch_a, bool batch_b, float alpha,
              float beta, bool bias, Activation act, uint64_t seed) {
  const int64_t M = 5, N = 7, K = 6;
  Tensor a =
      test::random_tensor(with_batch(batch_a ? batch : Shape{}, ta ? K : M, ta ? M : K), seed);
  Tensor b =
      test::random_tensor(with_batch(batch_b ? batch : Shape{}, tb ? N : K, tb ? K : N), seed + 1);
  Tensor c = test::random_tensor(with_batch(batch, M, N), seed + 2);  // [..., M, N]
  GemmOptions o;
  o.trans_a = ta;
  o.trans_b = tb;
  o.alpha = alpha;
  o.beta = beta;
  o.activation = act;
  if (bias) o.bias = test::random_tensor({N}, seed + 3);
  o.pre_activation = Tensor::zeros(c.shape());
  RefResult ref = gemm_ref(a, b, c, o);
  ops::gemm(a, b, c, o);
  SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb << " batch=" << shape_str(batch)
                                    << " act=" << ops::activation_name(act));
  EXPECT_LT(test::max_rel_error(c.to_floats(), ref.c), 1e-5);
  EXPECT_LT(test::max_rel_error(o.pre_activation.to_floats(), ref.pre), 1e-5);
}

TEST(Gemm, AllTransposes2D) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      run_case(ta, tb, {}, false, false, 1.0f, 0.0f, false, Activation::None, 1);
}

TEST(Gemm, AlphaBetaBiasActivations) {
  uint64_t seed = 10;
  for (Activation act : {Activation::None, Activation::ReLU, Activation::GELU})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        run_case(ta, tb, {}, false, false, 0.5f, 0.75f, true, act, seed++);
}

TEST(Gemm, Batched) {
  uint64_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // Both batched, A batched with a shared B (the linear layer), and the reverse.
      run_case(ta, tb, {2, 3}, true, true, 1.0f, 0.5f, true, Activation::GELU, seed++);
      run_case(ta, tb, {4}, true, false, 2.0f, 0.0f, true, Activation::ReLU, seed++);
      run_case(ta, tb, {3}, false, true, 1.0f, 1.0f, false, Activation::None, seed++);
    }
}

TEST(Gemm, GeluIsTheTanhApproximation) {
  Tensor a = Tensor::from_floats({1.0f, -0.5f, 3.0f}, {3, 1});
  Tensor b = Tensor::from_floats({1.0f}, {1, 1});
  Tensor c = Tensor::zeros({3, 1});
  GemmOptions o;
  o.activation = Activation::GELU;
  ops::gemm(a, b, c, o);
  auto v = c.to_floats();
  EXPECT_NEAR(v[0], 0.841191990607, 1e-6);  // exact erf GELU would be 0.841344746
  EXPECT_NEAR(v[1], -0.154285990, 1e-6);
  EXPECT_NEAR(v[2], 2.996362, 1e-5);
}

TEST(Gemm, EmptyInnerDimensionScalesC) {
  Tensor a = Tensor::zeros({2, 0});
  Tensor b = Tensor::zeros({0, 3});
  Tensor c = Tensor::full({2, 3}, 2.0f);
  GemmOptions o;
  o.beta = 0.5f;
  ops::gemm(a, b, c, o);
  EXPECT_EQ(c.to_floats(), std::vector<float>(6, 1.0f));
}

TEST(Gemm, ActivationNames) {
  for (Activation a : {Activation::None, Activation::ReLU, Activation::GELU})
    EXPECT_EQ(ops::parse_activation(ops::activation_name(a)), a);
  EXPECT_THROW(ops::parse_activation("swish"), Error);
}

TEST(Gemm, ShapeErrorsNameTheOp) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5}), c = Tensor::zeros({2, 5});
  try {
    ops::gemm(a, b, c);
    FAIL() << "inner dimension mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm"), std::string::npos);
  }
  Tensor b2 = Tensor::zeros({3, 5});
  Tensor bad_c = Tensor::zeros({2, 4});
  EXPECT_THROW(ops::gemm(a, b2, bad_c), Error);
  GemmOptions o;
  o.bias = Tensor::zeros({4});
  EXPECT_THROW(ops::gemm(a, b2, c, o), Error);
  o.bias = Tensor();
  o.pre_activation = Tensor::zeros({5, 2});
  EXPECT_THROW(ops::gemm(a, b2, c, o), Error);
  Tensor batched_a = Tensor::zeros({3, 2, 3});
  Tensor c_wrong_batch = Tensor::zeros({4, 2, 5});
  EXPECT_THROW(ops::gemm(batched_a, b2, c_wrong_batch), Error);
  Tensor half_a = Tensor::zeros({2, 3}, DType::F16);
  EXPECT_THROW(ops::gemm(half_a, b2, c), Error);
  // All-16-bit GEMMs are emulated on the CPU (f32 compute, one rounding).
  Tensor ha = Tensor::full({2, 3}, 1.0f, DType::F16), hb = Tensor::full({3, 5}, 1.0f, DType::F16),
         hc = Tensor::zeros({2, 5}, DType::F16);
  ops::gemm(ha, hb, hc);
  EXPECT_EQ(hc.to_floats(), std::vector<float>(10, 3.0f));
}

// The small-matrix kernels (ops/cpu_gemm.h, libxsmm where the build has
// it): linear attention's shapes and a few odd ones, strided rows, beta 0
// over NaNs (C is not read) and beta 1 accumulating, against a product in
// double; nothing is written past a row's end. Where there is no kernel
// (no libxsmm, or a shape past its size) the call says so and leaves C alone.
TEST(SmallGemm, MatchesAProductInDoubleOnStridedRows) {
  const std::string name = ops::cpu_small_gemm_name();
  const int lda = 140, ldb = 150, ldc = 136;  // strided rows, a different stride each
  for (const auto [M, N, K] : {std::array{32, 32, 110},
                               {128, 110, 32},
                               {110, 32, 32},
                               {32, 110, 32},
                               {128, 32, 110},
                               {1, 1, 1},
                               {3, 5, 7},
                               {17, 33, 9}}) {
    const std::vector<float> a = test::random_floats(static_cast<size_t>(M * lda), 201);
    const std::vector<float> b = test::random_floats(static_cast<size_t>(K * ldb), 202);
    const std::vector<float> c0 = test::random_floats(static_cast<size_t>(M * ldc), 203);
    for (const float beta : {0.0f, 1.0f}) {
      SCOPED_TRACE(::testing::Message() << M << " x " << N << " x " << K << ", beta " << beta);
      std::vector<float> c = c0;
      if (beta == 0.0f)
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) c[static_cast<size_t>(i * ldc + j)] = NAN;
      const std::vector<float> before = c;
      const bool ran =
          ops::cpu_small_sgemm(M, N, K, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      // libxsmm makes kernels up to a size its build sets (this one: every
      // shape here); the smallest ones any build has.
      if (name != "none" && M * N * K <= 32 * 32 * 32) {
        EXPECT_TRUE(ran) << name;
      }
      if (!ran) {
        EXPECT_EQ(std::memcmp(c.data(), before.data(), c.size() * sizeof(float)), 0);
        continue;
      }
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          double want = beta == 1.0f ? c0[static_cast<size_t>(i * ldc + j)] : 0.0;
          for (int p = 0; p < K; ++p)
            want += static_cast<double>(a[static_cast<size_t>(i * lda + p)]) *
                    b[static_cast<size_t>(p * ldb + j)];
          const float got = c[static_cast<size_t>(i * ldc + j)];
          ASSERT_NEAR(got, want, 1e-5 * (1.0 + std::fabs(want))) << "(" << i << ", " << j << ")";
        }
      for (int i = 0; i < M; ++i)  // the rest of each row untouched
        for (int j = N; j < ldc; ++j)
          ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], before[static_cast<size_t>(i * ldc + j)])
              << "written past row " << i << "'s end";
    }
  }
}

}  // namespace
}  // namespace rotor
