// The CPU ops' own elementary functions (ops/cpu_math.h): tanh within 3 ulp
// of the true value over every float exponent, NaN, infinities and signed
// zeros as tanh has them; exp within 2 ulp wherever e^x is a normal float;
// and the vector clones (ops/cpu_clones.h) of GELU, the cross-entropy and
// the attention core's softmax rows give exactly what the scalar formulas
// give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ops/cpu_math.h"
#include "ops/cpu_rows.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/rope_rows.h"
#include "support/test_util.h"

namespace rotor {
namespace {

double ulps(float got, double want) {
  const float w = static_cast<float>(want);
  const double ulp = std::fabs(static_cast<double>(std::nextafter(w, 2.0f)) - w);
  return std::fabs(static_cast<double>(got) - want) / (ulp > 0 ? ulp : 1e-45);
}

// The 16-lane double sum of ops/cpu_lanes.h, written out: lane l adds terms
// l, l + 16, ... in order, then the lanes, then the tail.
template <class Term>
double lane_order_sum(int64_t n, Term term) {
  double lanes[16] = {}, s = 0.0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += term(j + l);
  for (int l = 0; l < 16; ++l) s += lanes[l];
  for (; j < n; ++j) s += term(j);
  return s;
}

TEST(CpuMath, ExpWithinTwoUlps) {
  double worst = 0;
  float at = 0;
  // Every 97th float of [-87.3, 88]: e^x is a normal float there.
  for (uint32_t b = 0; b < 0x42B00000u; b += 97) {
    float x;
    std::memcpy(&x, &b, 4);
    for (const float v : {x, -x}) {
      if (v < -87.3f) continue;
      const double u = ulps(ops::detail::exp_f32(v), std::exp(static_cast<double>(v)));
      if (u > worst) worst = u, at = v;
    }
  }
  EXPECT_LE(worst, 2.0) << "at " << at;
  EXPECT_EQ(ops::detail::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(ops::detail::exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(ops::detail::exp_f32(-90.0f), 0.0f);
  EXPECT_EQ(ops::detail::exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(ops::detail::exp_f32(1000.0f), ops::detail::exp_f32(88.0f));
  EXPECT_TRUE(std::isnan(ops::detail::exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

// tanh_row (the label-attention head's tanh): within 2e-7 of tanh in double
// (absolute) over every 97th float below 20 and its negative, exactly odd,
// +-1 for infinities, NaN for NaN, and each element's bits the same whether
// it is computed alone or inside a row of vector clones.
TEST(CpuMath, TanhRowWithinBoundAndTheSameInEveryClone) {
  double worst = 0;
  float at = 0;
  std::vector<float> row;
  for (uint32_t b = 0; b < 0x41A00000u; b += 97) {  // |x| < 20
    float x;
    std::memcpy(&x, &b, 4);
    for (const float v : {x, -x}) {
      float t = v;
      ops::detail::tanh_row(&t, 1);
      const double err = std::fabs(static_cast<double>(t) - std::tanh(static_cast<double>(v)));
      if (err > worst) worst = err, at = v;
      if (row.size() < 1000 && b % 7 == 0) row.push_back(v);
    }
  }
  EXPECT_LE(worst, 2e-7) << "at " << at;
  std::vector<float> alone = row, neg = row;
  for (float& v : alone) ops::detail::tanh_row(&v, 1);
  for (float& v : neg) v = -v;
  ops::detail::tanh_row(row.data(), static_cast<int64_t>(row.size()));
  ops::detail::tanh_row(neg.data(), static_cast<int64_t>(neg.size()));
  for (size_t j = 0; j < row.size(); ++j) {
    ASSERT_EQ(std::memcmp(&row[j], &alone[j], 4), 0) << j;
    ASSERT_EQ(neg[j], -row[j]) << j;
  }
  float special[3] = {std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()};
  ops::detail::tanh_row(special, 3);
  EXPECT_EQ(special[0], 1.0f);
  EXPECT_EQ(special[1], -1.0f);
  EXPECT_TRUE(std::isnan(special[2]));
}

// The cross-entropy's vector clones against the scalar formula, compiled for
// the baseline: its 16 double lanes added in order, its exponentials.
TEST(CpuMath, CrossEntropyClonesGiveTheScalarBits) {
  const int64_t n = 7, v = 1003;  // a tail of 11 after the 16-lane blocks
  const std::vector<float> x = test::random_floats(static_cast<size_t>(n * v), 5, -12.0f, 9.0f);
  const std::vector<int32_t> t = {0, 5, 1002, 17, 999, 1, 500};
  Tensor logits = Tensor::from_floats(x, {n, v}), targets = Tensor::from_ints(t, {n});
  Tensor loss = Tensor::zeros({n}), nll = Tensor::zeros({n}), lse = Tensor::zeros({n});
  const float eps = 0.1f;
  ops::cross_entropy_forward(logits, targets, eps, -1, loss, nll, lse);
  Tensor d = Tensor::zeros({n, v});
  ops::cross_entropy_backward(logits, targets, lse, eps, -1, 2.0f, d);
  const std::vector<float> got_lse = lse.to_floats(), got_loss = loss.to_floats(),
                           got_d = d.to_floats();
  const double on = 1.0 - eps, off = eps / (v - 1.0);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x.data() + i * v;
    float mx = -INFINITY;
    for (int64_t j = 0; j < v; ++j) mx = row[j] > mx ? row[j] : mx;
    double se[16] = {}, sx[16] = {}, s = 0, sum_x = 0;
    int64_t j = 0;
    for (; j + 16 <= v; j += 16)
      for (int l = 0; l < 16; ++l) {
        se[l] += static_cast<double>(ops::detail::exp_f32(row[j + l] - mx));
        sx[l] += static_cast<double>(row[j + l]);
      }
    for (int l = 0; l < 16; ++l) s += se[l], sum_x += sx[l];
    for (; j < v; ++j) {
      s += static_cast<double>(ops::detail::exp_f32(row[j] - mx));
      sum_x += static_cast<double>(row[j]);
    }
    const double l = static_cast<double>(mx) + std::log(s);
    const double nll_i = l - row[t[static_cast<size_t>(i)]];
    const float want_loss = static_cast<float>(on * nll_i + off * ((v * l - sum_x) - nll_i));
    const float want_lse = static_cast<float>(l);
    ASSERT_EQ(std::memcmp(&got_lse[static_cast<size_t>(i)], &want_lse, 4), 0) << i;
    ASSERT_EQ(std::memcmp(&got_loss[static_cast<size_t>(i)], &want_loss, 4), 0) << i;
    // And against the exact value in double.
    double exact = 0;
    for (int64_t k = 0; k < v; ++k) exact += std::exp(static_cast<double>(row[k]) - l);
    EXPECT_NEAR(exact, 1.0, 1e-6) << i;
    for (int64_t k = 0; k < v; ++k) {
      const float p = ops::detail::exp_f32(row[k] - want_lse);
      const float q =
          k == t[static_cast<size_t>(i)] ? static_cast<float>(on) : static_cast<float>(off);
      const float want_d = 2.0f * (p - q);
      ASSERT_EQ(std::memcmp(&got_d[static_cast<size_t>(i * v + k)], &want_d, 4), 0)
          << i << ", " << k << ": " << got_d[static_cast<size_t>(i * v + k)] << " vs " << want_d;
    }
  }
}

// The attention core's softmax row (ops/cpu_rows.h) runs the clone the CPU
// has: the scalar formula's bits (exp_f32, 16 double lanes, one reciprocal),
// within 2e-6 of the softmax in double, rows of every length around the
// 16-lane blocks, and 0 elements left alone.
TEST(CpuMath, SoftmaxRowCloneGivesTheScalarBits) {
  for (const int64_t n : {0, 1, 7, 16, 17, 45, 128, 131}) {
    const std::vector<float> x = test::random_floats(static_cast<size_t>(n) + 1,
                                                     static_cast<uint64_t>(n) + 9, -30.0f, 12.0f);
    std::vector<float> got = x;
    ops::detail::softmax_row(got.data(), n);
    EXPECT_EQ(got[static_cast<size_t>(n)], x[static_cast<size_t>(n)]) << "past the row, n " << n;
    if (n == 0) continue;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
    std::vector<float> e(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) e[j] = ops::detail::exp_f32(x[j] - mx);
    const double sum = lane_order_sum(n, [&](int64_t j) { return static_cast<double>(e[j]); });
    const float inv = static_cast<float>(1.0 / sum);
    double exact_sum = 0;
    for (int64_t k = 0; k < n; ++k) exact_sum += std::exp(static_cast<double>(x[k]) - mx);
    for (int64_t k = 0; k < n; ++k) {
      const float want = e[k] * inv;
      ASSERT_EQ(std::memcmp(&got[k], &want, 4), 0) << "n " << n << ", " << k;
      EXPECT_NEAR(got[k], std::exp(static_cast<double>(x[k]) - mx) / exact_sum, 2e-6)
          << "n " << n << ", " << k;
    }
  }
}

// The row maximum of the FAVOR+ stabilizers and the softmax and
// cross-entropy rows (ops/cpu_lanes.h lane_max, vector clones) against the
// sequential rule m = x > m ? x : m: NaNs skipped, -inf for an empty row or
// one of NaNs, infinities kept; equal values (a zero of either sign may come
// back for a row whose maximum is zero).
TEST(CpuMath, MaxRowIsTheSequentialMax) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  for (const int64_t n : {0, 1, 5, 15, 16, 17, 31, 32, 110, 131}) {
    for (int variant = 0; variant < 5; ++variant) {
      std::vector<float> x = test::random_floats(
          static_cast<size_t>(n) + 1, static_cast<uint64_t>(n * 5 + variant), -9.0f, 3.0f);
      const float past = 1e30f;  // past the row: never read
      x[static_cast<size_t>(n)] = past;
      if (variant == 1)  // NaNs at the row's ends and in a lane's first slot
        for (const int64_t j : {int64_t{0}, n - 1, n / 2}) {
          if (j >= 0 && j < n) x[static_cast<size_t>(j)] = nan;
        }
      if (variant == 2)
        for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = nan;
      if (variant == 3 && n > 2) {  // the maximum in the tail, then +inf
        x[static_cast<size_t>(n - 1)] = 50.0f;
        x[1] = inf;
      }
      if (variant == 4)  // zeros of both signs and -inf below them
        for (int64_t j = 0; j < n; ++j)
          x[static_cast<size_t>(j)] = j % 3 == 0 ? -0.0f : (j % 3 == 1 ? 0.0f : -inf);
      float want = -inf;
      for (int64_t j = 0; j < n; ++j) want = x[j] > want ? x[j] : want;
      const float got = ops::detail::max_row(x.data(), n);
      EXPECT_EQ(got, want) << "n " << n << ", variant " << variant;
      EXPECT_FALSE(std::isnan(got)) << "n " << n << ", variant " << variant;
    }
  }
}

// The softmax backward's row sum (ops/cpu_rows.h): masked keys (p = 0)
// zeroed, NaN there included, and the scalar formula's bits.
TEST(CpuMath, MaskedDotRowCloneGivesTheScalarBits) {
  for (const int64_t n : {0, 5, 16, 33, 130}) {
    std::vector<float> p =
        test::random_floats(static_cast<size_t>(n), static_cast<uint64_t>(n) + 3, 0.0f, 1.0f);
    const std::vector<float> dp0 =
        test::random_floats(static_cast<size_t>(n), static_cast<uint64_t>(n) + 4, -2.0f, 2.0f);
    std::vector<float> dp = dp0;
    for (int64_t j = 0; j < n; j += 3) {
      p[static_cast<size_t>(j)] = 0.0f;
      dp[static_cast<size_t>(j)] = std::numeric_limits<float>::quiet_NaN();
    }
    const double got = ops::detail::masked_dot_row(p.data(), dp.data(), n);
    const double want = lane_order_sum(
        n, [&](int64_t k) { return p[k] == 0.0f ? 0.0 : static_cast<double>(dp0[k]) * p[k]; });
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0)
        << "n " << n << ": " << got << " vs " << want;
    for (int64_t k = 0; k < n; ++k)
      EXPECT_EQ(dp[k], p[k] == 0.0f ? 0.0f : dp0[k]) << "n " << n << ", " << k;
  }
}

// Linear attention's exponentials (ops/cpu_rows.h): the scalar formula's bits.
TEST(CpuMath, ExpRowClonesGiveTheScalarBits) {
  for (const int64_t n : {0, 3, 16, 110, 131}) {
    const std::vector<float> x =
        test::random_floats(static_cast<size_t>(n), static_cast<uint64_t>(n) + 5, -20.0f, 5.0f);
    const std::vector<float> c =
        test::random_floats(static_cast<size_t>(n), static_cast<uint64_t>(n) + 6, -3.0f, 1.0f);
    std::vector<float> a = x, b = x;
    ops::detail::exp_scale_row(a.data(), n, 0.3f);
    ops::detail::mul_exp_row(b.data(), c.data(), 0.5f, 0.7f, n);
    for (int64_t j = 0; j < n; ++j) {
      const float wa = ops::detail::exp_f32(x[j]) * 0.3f;
      const float wb = x[j] * (ops::detail::exp_f32(c[j] - 0.5f) * 0.7f);
      ASSERT_EQ(std::memcmp(&a[j], &wa, 4), 0) << "exp_scale_row n " << n << ", " << j;
      ASSERT_EQ(std::memcmp(&b[j], &wb, 4), 0) << "mul_exp_row n " << n << ", " << j;
    }
  }
}

// FAVOR+'s per-row shifts and backward row sums over blocks of rows
// (ops/cpu_rows.h): each row gets the bits of the row-by-row scalar
// formulas, for every stabilizer and for row widths with and without a
// vector tail.
TEST(CpuMath, FavorRowBlocksGiveTheScalarBits) {
  using ops::detail::RowShift;
  for (const int64_t M : {int64_t{16}, int64_t{110}, int64_t{7}})
    for (const int64_t D : {int64_t{32}, int64_t{5}})
      for (const RowShift stab :
           {RowShift::None, RowShift::Row, RowShift::Global, RowShift::Prefix}) {
        const int64_t n = 9;
        const auto seed = static_cast<uint64_t>(M * 100 + D * 10 + static_cast<int>(stab));
        const std::vector<float> logits0 =
            test::random_floats(static_cast<size_t>(n * M), seed, -6.0f, 6.0f);
        const std::vector<float> x =
            test::random_floats(static_cast<size_t>(n * D), seed + 1, -2.0f, 2.0f);
        std::vector<float> got = logits0, c(static_cast<size_t>(n), -1.0f);
        ops::detail::favor_shift_rows(got.data(), x.data(), n, M, D, stab, 2.5f, c.data());
        float running = -INFINITY;
        for (int64_t r = 0; r < n; ++r) {
          const float* lr = logits0.data() + r * M;
          float big = -INFINITY;
          for (int64_t j = 0; j < M; ++j) big = lr[j] > big ? lr[j] : big;
          float c0 = stab == RowShift::Global ? 2.5f : 0.0f;
          if (stab == RowShift::Row) c0 = big;
          if (stab == RowShift::Prefix) c0 = running = std::max(running, big);
          ASSERT_EQ(c[r], c0) << "M " << M << " D " << D << " row " << r;
          const double sq = lane_order_sum(
              D, [&](int64_t j) { return static_cast<double>(x[r * D + j]) * x[r * D + j]; });
          const float shift = static_cast<float>(0.5 * sq) + c0;
          for (int64_t j = 0; j < M; ++j) {
            const float want = lr[j] - shift;
            ASSERT_EQ(std::memcmp(&got[r * M + j], &want, 4), 0)
                << "M " << M << " D " << D << " row " << r << ", " << j;
          }
        }
        // The backward's row sums and update.
        const std::vector<float> phi =
            test::random_floats(static_cast<size_t>(n * M), seed + 2, 0.0f, 1.0f);
        const std::vector<float> dphi0 =
            test::random_floats(static_cast<size_t>(n * M), seed + 3, -1.0f, 1.0f);
        std::vector<float> t = dphi0;
        std::vector<double> sums(static_cast<size_t>(n));
        ops::detail::mul_sum_rows(phi.data(), t.data(), n, M, sums.data());
        const std::vector<float> dx0 =
            test::random_floats(static_cast<size_t>(n * D), seed + 4, -1.0f, 1.0f);
        std::vector<float> dx = dx0;
        ops::detail::sub_scaled_rows(dx.data(), sums.data(), x.data(), n, D);
        for (int64_t r = 0; r < n; ++r) {
          const double want = lane_order_sum(
              M, [&](int64_t j) { return static_cast<double>(dphi0[r * M + j] * phi[r * M + j]); });
          ASSERT_EQ(std::memcmp(&sums[r], &want, 8), 0) << "M " << M << " row " << r;
          for (int64_t j = 0; j < M; ++j) {
            const float tw = dphi0[r * M + j] * phi[r * M + j];
            ASSERT_EQ(std::memcmp(&t[r * M + j], &tw, 4), 0) << "M " << M << " row " << r;
          }
          const float a = -static_cast<float>(want);
          for (int64_t j = 0; j < D; ++j) {
            const float w = dx0[r * D + j] + a * x[r * D + j];
            ASSERT_EQ(std::memcmp(&dx[r * D + j], &w, 4), 0) << "D " << D << " row " << r;
          }
        }
      }
}

// Linear attention's elementwise feature maps (ops/cpu_rows.h): elu(x) + 1
// and relu with their backward, the scalar formulas' bits; NaN stays NaN.
TEST(CpuMath, FeatureMapRowClonesGiveTheScalarBits) {
  for (const int64_t n : {0, 3, 16, 110, 131}) {
    std::vector<float> x =
        test::random_floats(static_cast<size_t>(n), static_cast<uint64_t>(n) + 7, -30.0f, 4.0f);
    const std::vector<float> g =
        test::random_floats(static_cast<size_t>(n), static_cast<uint64_t>(n) + 8, -1.0f, 1.0f);
    if (n > 3) {
      x[1] = 0.0f;
      x[2] = -0.0f;
    }
    std::vector<float> e(x.size()), de(x.size()), r(x.size()), dr(x.size());
    ops::detail::elu1_row(x.data(), e.data(), n);
    ops::detail::elu1_grad_row(x.data(), e.data(), g.data(), de.data(), n);
    ops::detail::relu_row(x.data(), r.data(), n);
    ops::detail::relu_grad_row(x.data(), g.data(), dr.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      const float we = x[j] > 0.0f ? x[j] + 1.0f : ops::detail::exp_f32(x[j]);
      const float wde = x[j] > 0.0f ? g[j] : g[j] * we;
      const float wr = x[j] > 0.0f ? x[j] : 0.0f, wdr = x[j] > 0.0f ? g[j] : 0.0f;
      ASSERT_EQ(std::memcmp(&e[j], &we, 4), 0) << "elu1_row n " << n << ", " << j;
      ASSERT_EQ(std::memcmp(&de[j], &wde, 4), 0) << "elu1_grad_row n " << n << ", " << j;
      ASSERT_EQ(std::memcmp(&r[j], &wr, 4), 0) << "relu_row n " << n << ", " << j;
      ASSERT_EQ(std::memcmp(&dr[j], &wdr, 4), 0) << "relu_grad_row n " << n << ", " << j;
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float phi = 0.0f;
  ops::detail::elu1_row(&nan, &phi, 1);
  EXPECT_TRUE(std::isnan(phi));
}

// RoPE over rows (ops/rope_rows.h rope_rows, vector clones) against the
// pair-by-pair rope_row: both layouts, partial rotation, YaRN's factor,
// forward and back, in place and not, bit for bit.
TEST(CpuMath, RopeRowsGiveRopeRowsBits) {
  for (const rope::Layout layout : {rope::Layout::Interleaved, rope::Layout::Half})
    for (const double fraction : {1.0, 0.5})
      for (const bool yarn : {false, true})
        for (const int64_t width :
             {8, 32, 108, 116, 160}) {  // R even; 116: 7 vectors of 8 pairs + 2
          rope::Params p;
          p.layout = layout;
          p.fraction = fraction;
          p.theta = 500.0;
          if (yarn) {
            p.scaling = rope::Scaling::Yarn;
            p.factor = 4.0;
            p.original_max_positions = 16;
          }
          const int64_t n = 9, pos0 = 5;
          const std::vector<rope::Rotation> table = ops::rope_table(p, width, pos0, n);
          const int64_t half = rope::rotated_dims(p, width) / 2;
          const std::vector<float> x = test::random_floats(
              static_cast<size_t>(n * width), static_cast<uint64_t>(width), -2.0f, 2.0f);
          for (const bool back : {false, true}) {
            std::vector<float> want(x.size()), got(x.size()), inplace = x;
            for (int64_t r = 0; r < n; ++r)
              ops::rope_row(p, width, table.data() + r * half, x.data() + r * width,
                            want.data() + r * width, back);
            ops::rope_rows(p, width, table.data(), x.data(), got.data(), n, back);
            ops::rope_rows(p, width, table.data(), inplace.data(), inplace.data(), n, back);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), 4 * want.size()), 0)
                << "layout " << static_cast<int>(layout) << " fraction " << fraction << " yarn "
                << yarn << " width " << width << " back " << back;
            ASSERT_EQ(std::memcmp(inplace.data(), want.data(), 4 * want.size()), 0) << "in place";
          }
          // The table made per pair's frequency once equals rope::rotation's.
          for (int64_t t = 0; t < n; ++t)
            for (int64_t i = 0; i < half; ++i) {
              const rope::Rotation w = rope::rotation(rope::at_length(p, width, pos0 + n), pos0 + t,
                                                      i, rope::rotated_dims(p, width));
              ASSERT_EQ(std::memcmp(&table[t * half + i], &w, sizeof w), 0) << t << ", " << i;
            }
        }
}

// transpose_block (ops/cpu_rows.h): every element in its place for blocks
// of whole 16 x 16 tiles, with overlapping last tiles (110 columns), below
// one tile (the scalar path), and strides wider than the block; nothing
// written outside the block.
TEST(CpuMath, TransposeBlockPutsEveryElementInPlace) {
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {128, 110}, {110, 32}, {16, 16}, {17, 33}, {5, 40}, {40, 3}, {0, 7}})
    for (const int64_t pad : {int64_t{0}, int64_t{3}}) {
      const int64_t ld_in = cols + pad, ld_out = rows + pad;
      std::vector<float> in(static_cast<size_t>(std::max<int64_t>(rows * ld_in, 1)));
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) + 0.5f;
      std::vector<float> out(static_cast<size_t>(std::max<int64_t>(cols * ld_out, 1)), -1.0f);
      ops::detail::transpose_block(in.data(), rows, cols, ld_in, out.data(), ld_out);
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < ld_out; ++r) {
          const float want = r < rows ? in[static_cast<size_t>(r * ld_in + c)] : -1.0f;
          ASSERT_EQ(out[static_cast<size_t>(c * ld_out + r)], want)
              << rows << " x " << cols << " pad " << pad << " at " << c << ", " << r;
        }
    }
}

// The kept tables (ops/rope_rows.h shared_rope_table): rope_table's
// factors, the same table again for the same request, a new one for any
// other setting, position or length, and nothing kept past 1 MiB.
TEST(CpuMath, SharedRopeTablesAreRopeTables) {
  rope::Params p;
  p.theta = 700.0;
  const auto a = ops::shared_rope_table(p, 110, 0, 128);
  const std::vector<rope::Rotation> want = ops::rope_table(p, 110, 0, 128);
  ASSERT_EQ(a->size(), want.size());
  EXPECT_EQ(std::memcmp(a->data(), want.data(), want.size() * sizeof(rope::Rotation)), 0);
  EXPECT_EQ(ops::shared_rope_table(p, 110, 0, 128).get(), a.get());
  EXPECT_NE(ops::shared_rope_table(p, 110, 1, 128).get(), a.get());
  EXPECT_NE(ops::shared_rope_table(p, 110, 0, 127).get(), a.get());
  EXPECT_NE(ops::shared_rope_table(p, 108, 0, 128).get(), a.get());
  rope::Params q = p;
  q.theta = 701.0;
  const auto b = ops::shared_rope_table(q, 110, 0, 128);
  EXPECT_NE(b.get(), a.get());
  EXPECT_NE(std::memcmp(b->data(), a->data(), a->size() * sizeof(rope::Rotation)), 0);
  // 8 more distinct requests push the first out; a held table stays valid.
  for (int64_t t = 1; t <= 8; ++t) ops::shared_rope_table(p, 110, 0, 128 + t);
  EXPECT_NE(ops::shared_rope_table(p, 110, 0, 128).get(), a.get());
  EXPECT_EQ(std::memcmp(a->data(), want.data(), want.size() * sizeof(rope::Rotation)), 0);
  // Over 1 MiB (131072 rotations): made each time.
  const auto big = ops::shared_rope_table(p, 128, 0, 4096);
  EXPECT_NE(ops::shared_rope_table(p, 128, 0, 4096).get(), big.get());
}

// Layer normalization's row loops (ops/cpu_rows.h) against the scalar
// formulas with the same 16 double lanes: forward, dx (in place too) and
// the parameter columns, bit for bit.
TEST(CpuMath, LayerNormRowClonesGiveTheScalarBits) {
  const auto lanes = [](int64_t n, auto term) { return lane_order_sum(n, term); };
  for (const int64_t n : {1, 7, 16, 33, 128}) {
    const auto u = static_cast<uint64_t>(n);
    const std::vector<float> x = test::random_floats(static_cast<size_t>(n), u + 1, -3.0f, 4.0f);
    const std::vector<float> g = test::random_floats(static_cast<size_t>(n), u + 2, 0.5f, 1.5f);
    const std::vector<float> b = test::random_floats(static_cast<size_t>(n), u + 3, -1.0f, 1.0f);
    const std::vector<float> dy = test::random_floats(static_cast<size_t>(n), u + 4, -1.0f, 1.0f);
    std::vector<float> y(static_cast<size_t>(n));
    float mean = 0, rstd = 0;
    ops::detail::layer_norm_row(x.data(), g.data(), b.data(), n, 1e-5f, y.data(), mean, rstd);
    const double mu = lanes(n, [&](int64_t j) { return double{x[j]}; }) / static_cast<double>(n);
    const double ss = lanes(n, [&](int64_t j) { return (x[j] - mu) * (x[j] - mu); });
    const float wm = static_cast<float>(mu);
    const float wr = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5f));
    ASSERT_EQ(std::memcmp(&mean, &wm, 4), 0) << "mean, n " << n;
    ASSERT_EQ(std::memcmp(&rstd, &wr, 4), 0) << "rstd, n " << n;
    for (int64_t j = 0; j < n; ++j) {
      const float want = (x[j] - wm) * wr * g[j] + b[j];
      ASSERT_EQ(std::memcmp(&y[j], &want, 4), 0) << "y, n " << n << ", " << j;
    }
    std::vector<float> dx(static_cast<size_t>(n)), inplace = dy, added(static_cast<size_t>(n));
    const std::vector<float> res = test::random_floats(static_cast<size_t>(n), u + 5);
    ops::detail::layer_norm_dx_row(dy.data(), x.data(), g.data(), mean, rstd, n, nullptr,
                                   dx.data());
    ops::detail::layer_norm_dx_row(inplace.data(), x.data(), g.data(), mean, rstd, n, nullptr,
                                   inplace.data());
    ops::detail::layer_norm_dx_row(dy.data(), x.data(), g.data(), mean, rstd, n, res.data(),
                                   added.data());
    const double sg = lanes(n, [&](int64_t j) { return static_cast<double>(dy[j]) * g[j]; });
    const double sgx = lanes(
        n, [&](int64_t j) { return static_cast<double>(dy[j]) * g[j] * (x[j] - mean) * rstd; });
    const float mg = static_cast<float>(sg / n), mgx = static_cast<float>(sgx / n);
    for (int64_t j = 0; j < n; ++j) {
      const float want = rstd * (dy[j] * g[j] - mg - (x[j] - mean) * rstd * mgx);
      ASSERT_EQ(std::memcmp(&dx[j], &want, 4), 0) << "dx, n " << n << ", " << j;
      ASSERT_EQ(std::memcmp(&inplace[j], &want, 4), 0) << "dx in place, n " << n << ", " << j;
      const float plus = res[j] + want;
      ASSERT_EQ(std::memcmp(&added[j], &plus, 4), 0) << "dx + residual, n " << n << ", " << j;
    }
  }
  // Parameter columns: 5 rows of 40, the 23 columns from 9 on.
  const int64_t rows = 5, n = 40, j0 = 9, w = 23;
  const std::vector<float> x = test::random_floats(rows * n, 21, -2.0f, 2.0f);
  const std::vector<float> dy = test::random_floats(rows * n, 22, -1.0f, 1.0f);
  const std::vector<float> mean = test::random_floats(rows, 23, -0.5f, 0.5f);
  const std::vector<float> rstd = test::random_floats(rows, 24, 0.5f, 2.0f);
  std::vector<double> dg(w, 0.25), db(w, -0.5);
  ops::detail::layer_norm_param_rows(dy.data() + j0, x.data() + j0, mean.data(), rstd.data(), rows,
                                     n, w, dg.data(), db.data());
  for (int64_t j = 0; j < w; ++j) {
    double wg = 0.25, wb = -0.5;
    for (int64_t r = 0; r < rows; ++r) {
      const float d = dy[r * n + j0 + j];
      wg += d * ((x[r * n + j0 + j] - mean[r]) * static_cast<double>(rstd[r]));
      wb += d;
    }
    ASSERT_EQ(std::memcmp(&dg[j], &wg, 8), 0) << "dgamma column " << j;
    ASSERT_EQ(std::memcmp(&db[j], &wb, 8), 0) << "dbeta column " << j;
  }
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
    const float m2u = -2.0f * c * (v + k * v * v * v);
    const float e = ops::detail::exp_f32(m2u < 80.0f ? m2u : 80.0f), s = 1.0f / (1.0f + e);
    const float want_y = v / (1.0f + e);
    const float want_dx = 1.5f * (s + v * (e * s * s) * (2.0f * c) * (1.0f + 3.0f * k * (v * v)));
    ASSERT_EQ(std::memcmp(&y[i], &want_y, 4), 0) << i << ": " << y[i] << " vs " << want_y;
    ASSERT_EQ(std::memcmp(&dx[i], &want_dx, 4), 0) << i << ": " << dx[i] << " vs " << want_dx;
  }
}

}  // namespace
}  // namespace rotor
