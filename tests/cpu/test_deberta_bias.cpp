// DeBERTa's disentangled terms (core/deberta_bias.h, ops/deberta_bias.h):
// the log buckets at known distances and odd in the distance; the rows
// clamped at both ends; the dense bias against the paper's terms written
// out in double; its gradients against finite differences; and the terms
// depend only on i - j.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/deberta_bias.h"
#include "core/error.h"
#include "ops/deberta_bias.h"
#include "support/test_util.h"

namespace rotor {
namespace {

TEST(DebertaBias, LogBucketsAtKnownDistances) {
  // 256 buckets reaching 512 (DeBERTa-v3's settings): exact within 128.
  for (int64_t r : {0, 1, -1, 127, -127, 128, -128}) EXPECT_EQ(deberta::log_bucket(r, 256, 512), r);
  // Beyond: 128 + ceil(log(|r| / 128) / log(511 / 128) * 127).
  for (int64_t r : {129, 200, 300, 511, 512, 5000}) {
    const double want =
        128 + std::ceil(std::log(r / 128.0) / std::log(511.0 / 128.0) * 127.0 - 1e-9);
    EXPECT_NEAR(deberta::log_bucket(r, 256, 512), want, 1.0) << r;
    EXPECT_EQ(deberta::log_bucket(-r, 256, 512), -deberta::log_bucket(r, 256, 512)) << r;
  }
  EXPECT_EQ(deberta::log_bucket(511, 256, 512), 255);
  // Monotone in |r|.
  for (int64_t r = 1; r < 3000; ++r)
    EXPECT_LE(deberta::log_bucket(r, 32, 100), deberta::log_bucket(r + 1, 32, 100)) << r;
}

TEST(DebertaBias, RowsAreClampedShiftedBuckets) {
  // No buckets: the distance, clamped to [-span, span - 1], plus span.
  EXPECT_EQ(deberta::relative_row(0, 0, 8), 8);
  EXPECT_EQ(deberta::relative_row(-3, 0, 8), 5);
  EXPECT_EQ(deberta::relative_row(7, 0, 8), 15);
  EXPECT_EQ(deberta::relative_row(8, 0, 8), 15);
  EXPECT_EQ(deberta::relative_row(-9, 0, 8), 0);
  // Buckets: span = position_buckets.
  EXPECT_EQ(deberta::relative_row(3, 16, 40), 19);
  const auto rows = deberta::relative_rows(3, 5, 2, 0, 8);  // queries at 2, 3, 4
  ASSERT_EQ(rows.size(), 15u);
  EXPECT_EQ(rows[0], 10);  // query 2, key 0: distance 2
  EXPECT_EQ(rows[2 * 5 + 4], 8);
}

struct Inputs {
  int64_t B, H, Tq, Tk, D, S;
  Tensor q, k, kr, qr;
  Tensor rows;  // i32 [T, T]
};

Inputs inputs(int64_t B, int64_t H, int64_t T, int64_t D, int64_t span, uint64_t seed) {
  Inputs x{B, H, T, T, D, 2 * span, {}, {}, {}, {}, {}};
  x.q = test::random_tensor({B, H, T, D}, seed);
  x.k = test::random_tensor({B, H, T, D}, seed + 1);
  x.kr = test::random_tensor({2 * span, H * D}, seed + 2);
  x.qr = test::random_tensor({2 * span, H * D}, seed + 3);
  x.rows = Tensor::from_ints(deberta::relative_rows(T, T, 0, 0, span), {T, T});
  return x;
}

TEST(DebertaBias, ForwardIsTheDisentangledTerms) {
  const Inputs x = inputs(2, 3, 7, 4, 3, 10);  // distances past the span: clamped rows
  const float scale = 0.25f;
  Tensor bias = Tensor::full({2, 3, 7, 7}, 9.0f);
  ops::deberta_bias_forward(x.q, x.k, x.kr, x.qr, x.rows, scale, bias);
  const auto q = test::to_double(x.q), k = test::to_double(x.k), kr = test::to_double(x.kr),
             qr = test::to_double(x.qr);
  const auto got = bias.to_floats();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < 7; ++i)
        for (int64_t j = 0; j < 7; ++j) {
          const int64_t row = std::clamp<int64_t>(i - j, -3, 2) + 3;
          double want = 0;
          for (int64_t c = 0; c < 4; ++c)
            want += q[((b * 3 + h) * 7 + i) * 4 + c] * kr[row * 12 + h * 4 + c] +
                    scale * k[((b * 3 + h) * 7 + j) * 4 + c] * qr[row * 12 + h * 4 + c];
          EXPECT_NEAR(got[((b * 3 + h) * 7 + i) * 7 + j], want, 2e-5) << b << h << i << j;
        }
}

TEST(DebertaBias, BackwardMatchesFiniteDifferences) {
  Inputs x = inputs(2, 2, 6, 3, 2, 20);
  const float scale = 0.5f;
  const Shape bs{2, 2, 6, 6};
  const auto w = test::to_double(test::random_tensor(bs, 29));
  auto loss = [&]() {
    Tensor bias = Tensor::zeros(bs);
    ops::deberta_bias_forward(x.q, x.k, x.kr, x.qr, x.rows, scale, bias);
    const auto bv = test::to_double(bias);
    double s = 0;
    for (size_t i = 0; i < bv.size(); ++i) s += bv[i] * w[i];
    return s;
  };
  std::vector<float> wf(w.begin(), w.end());
  Tensor dq = Tensor::full(x.q.shape(), 0.5f), dk = Tensor::full(x.k.shape(), -0.25f);
  Tensor dkr = Tensor::full(x.kr.shape(), 9.0f), dqr = Tensor::full(x.qr.shape(), 9.0f);
  ops::deberta_bias_backward(x.q, x.k, x.kr, x.qr, x.rows, scale, Tensor::from_floats(wf, bs), dq,
                             dk, dkr, dqr);
  const std::vector<std::tuple<Tensor*, Tensor*, float>> pairs = {
      {&x.q, &dq, 0.5f}, {&x.k, &dk, -0.25f}, {&x.kr, &dkr, 0.0f}, {&x.qr, &dqr, 0.0f}};
  for (const auto& [param, grad, start] : pairs) {
    float* p = param->data<float>();
    const auto g = grad->to_floats();
    for (int64_t e = 0; e < param->numel(); ++e) {
      const float keep = p[e];
      p[e] = keep + 1e-2f;
      const double up = loss();
      p[e] = keep - 1e-2f;
      const double down = loss();
      p[e] = keep;
      EXPECT_NEAR(g[e] - start, (up - down) / 2e-2, 2e-3) << param->str() << " " << e;
    }
  }
}

// The composed path CUDA runs (ops::gemm products, deberta_gather and
// deberta_scatter), run here on the CPU, equals the CPU's fused loops: the
// bias, and every gradient added into nonzero buffers, with bucketed rows
// that repeat.
TEST(DebertaBias, TheComposedPathEqualsTheFusedOne) {
  Inputs x = inputs(3, 2, 9, 4, 4, 50);  // S = 8: 4 buckets a side, log-spaced past 2
  x.rows = Tensor::from_ints(deberta::relative_rows(9, 9, 0, 4, 8), {9, 9});
  const float scale = 0.4f;
  const Shape bs{3, 2, 9, 9};
  const Tensor g = test::random_tensor(bs, 59);  // [B, H, T, T]
  std::vector<std::vector<float>> got[2];
  for (int composed = 0; composed < 2; ++composed) {
    Tensor bias = Tensor::full(bs, 7.0f);
    Tensor dq = Tensor::full(x.q.shape(), 0.5f), dk = Tensor::full(x.k.shape(), -0.25f);
    Tensor dkr = Tensor::full(x.kr.shape(), 9.0f), dqr = Tensor::full(x.qr.shape(), 9.0f);
    if (composed) {
      ops::detail::deberta_bias_forward_composed(x.q, x.k, x.kr, x.qr, x.rows, scale, bias);
      ops::detail::deberta_bias_backward_composed(x.q, x.k, x.kr, x.qr, x.rows, scale, g, dq, dk,
                                                  dkr, dqr);
    } else {
      ops::deberta_bias_forward(x.q, x.k, x.kr, x.qr, x.rows, scale, bias);
      ops::deberta_bias_backward(x.q, x.k, x.kr, x.qr, x.rows, scale, g, dq, dk, dkr, dqr);
    }
    for (const Tensor* t : {&bias, &dq, &dk, &dkr, &dqr}) got[composed].push_back(t->to_floats());
  }
  const char* names[] = {"bias", "dq", "dk", "dkr", "dqr"};
  for (size_t t = 0; t < got[0].size(); ++t)
    for (size_t e = 0; e < got[0][t].size(); ++e)
      ASSERT_NEAR(got[1][t][e], got[0][t][e], 2e-5 * std::max(1.0f, std::abs(got[0][t][e])))
          << names[t] << " " << e;
}

// The gather and the scatter refuse a row past the products' S columns in
// one line, rather than reading or writing outside them.
TEST(DebertaBias, RowsOutsideTheTableAreRefused) {
  const Tensor c2p = Tensor::zeros({1, 1, 2, 4}), p2c = Tensor::zeros({1, 1, 2, 4});
  const Tensor rows = Tensor::from_ints({0, 1, 4, 2}, {2, 2});  // 4: one past S
  Tensor bias = Tensor::zeros({1, 1, 2, 2});
  EXPECT_THROW(
      {
        try {
          ops::deberta_gather(c2p, p2c, rows, 1.0f, bias);
        } catch (const Error& e) {
          EXPECT_EQ(std::string(e.what()).rfind("deberta_gather: row 4 outside [0, 4)", 0), 0u)
              << e.what();
          throw;
        }
      },
      Error);
  Tensor dc2p = Tensor::zeros({1, 1, 2, 4}), dp2c = Tensor::zeros({1, 1, 2, 4});
  EXPECT_THROW(ops::deberta_scatter(bias, rows, 1.0f, dc2p, dp2c), Error);
}

// Only i - j matters: the rows of queries at an offset against shifted
// keys are those of the unshifted positions.
TEST(DebertaBias, TermsDependOnlyOnTheDistance) {
  for (int64_t buckets : {0, 8}) {
    const auto a = deberta::relative_rows(6, 6, 0, buckets, 20);
    for (int64_t shift : {1, 5, 300}) {
      // Query i at shift + i against key j at shift + j: rows of i - j.
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t j = 0; j < 6; ++j)
          EXPECT_EQ(deberta::relative_row((shift + i) - (shift + j), buckets, 20), a[i * 6 + j]);
    }
  }
}

}  // namespace
}  // namespace rotor
