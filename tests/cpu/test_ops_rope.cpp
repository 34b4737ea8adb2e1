// RoPE (RoFormer eq. 34, interleaved pairs): REFERENCE.md test vectors, the
// relative-position property, inversion, offset invariance, and the backward.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/rope.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Vec = std::vector<double>;

const std::vector<float> kQ = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
const std::vector<float> kK = {1.0f, 0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f, 0.3f};

// One head vector [1, 1, 1, 8] rotated to position m.
std::vector<float> rotate_at(const std::vector<float>& x, int64_t m) {
  Tensor t = Tensor::from_floats(x, {1, 1, 1, static_cast<int64_t>(x.size())});
  Tensor y = Tensor::zeros(t.shape());
  ops::rope_forward(t, y, 10000.0f, m);
  return y.to_floats();
}

// Double reference over [B, T, H, D]: position t + offset, interleaved pairs.
Vec rope_ref(const Vec& x, const Shape& s, double base, int64_t offset, double sign = 1) {
  const int64_t B = s[0], T = s[1], H = s[2], D = s[3];
  Vec y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          const double a = sign * (t + offset) * std::pow(base, -2.0 * i / D);
          const size_t k = static_cast<size_t>(((b * T + t) * H + h) * D + 2 * i);
          y[k] = x[k] * std::cos(a) - x[k + 1] * std::sin(a);
          y[k + 1] = x[k + 1] * std::cos(a) + x[k] * std::sin(a);
        }
  return y;
}

void expect_near_vec(const std::vector<float>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "element " << i;
}

TEST(Rope, ReferenceTestVectors) {
  expect_near_vec(rotate_at(kQ, 0), Vec(kQ.begin(), kQ.end()), 1e-7);
  expect_near_vec(rotate_at(kQ, 1),
                  {-0.114263966, 0.192207560, 0.258567883, 0.427951691, 0.493975100, 0.604969917,
                   0.699199650, 0.800699600},
                  1e-6);
  expect_near_vec(rotate_at(kQ, 5),
                  {0.220151073, -0.039159990, 0.071504553, 0.494860686, 0.469387629, 0.624239741,
                   0.695991267, 0.803489985},
                  1e-6);
  expect_near_vec(rotate_at(kQ, 100),
                  {0.187505015, 0.121827210, -0.034113014, -0.498834945, -0.234731438, 0.744916876,
                   0.616636182, 0.865886724},
                  1e-6);
}

TEST(Rope, IsNotTheHalfSplitLayout) {
  const Vec half_split = {0.507828356, -0.112138811, 0.264639660, 0.395995017,
                          0.045938665, 0.622434645,  0.714118933, 0.801989992};
  auto y = rotate_at(kQ, 5);
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(y[i] - half_split[i]));
  EXPECT_GT(worst, 0.1);
}

TEST(Rope, ScoreDependsOnlyOnOffset) {
  double unrotated = 0;
  for (size_t i = 0; i < 8; ++i) unrotated += static_cast<double>(kQ[i]) * kK[i];
  EXPECT_NEAR(unrotated, 1.92, 1e-6);
  for (int64_t m : {3, 12, 102}) {
    auto q = rotate_at(kQ, m), k = rotate_at(kK, m - 2);
    double s = 0;
    for (size_t i = 0; i < 8; ++i) s += static_cast<double>(q[i]) * k[i];
    EXPECT_NEAR(s, 1.388696273717, 1e-6) << "m = " << m;
  }
}

TEST(Rope, ForwardMatchesDoubleReferenceAtLongPositions) {
  const Shape s = {2, 64, 3, 16};
  Tensor x = test::random_tensor(s, 1);
  Tensor y = Tensor::zeros(s);
  ops::rope_forward(x, y, 10000.0f, 1500);  // angles up to ~1563 rad
  auto xv = x.to_floats();
  EXPECT_LT(test::max_rel_error(y.to_floats(), rope_ref(Vec(xv.begin(), xv.end()), s, 1e4, 1500)),
            2e-6);
  // Another base is honoured.
  ops::rope_forward(x, y, 500.0f, 0);
  EXPECT_LT(test::max_rel_error(y.to_floats(), rope_ref(Vec(xv.begin(), xv.end()), s, 500, 0)),
            2e-6);
}

TEST(Rope, BackwardUndoesForwardAndIsTheTranspose) {
  const Shape s = {2, 9, 2, 8};
  Tensor x = test::random_tensor(s, 2);
  Tensor y = Tensor::zeros(s), back = Tensor::zeros(s);
  ops::rope_forward(x, y, 10000.0f, 4);
  ops::rope_backward(y, back, 10000.0f, 4);  // rotate by -theta
  EXPECT_LT(test::max_rel_error(back.to_floats(), x.to_floats()), 1e-6);
  EXPECT_GT(test::max_rel_error(y.to_floats(), x.to_floats()), 1e-2);  // it did rotate

  // Gradient of L = sum(dy * rope(x)) by central differences of the reference.
  Tensor dy = test::random_tensor(s, 3);
  auto dyv = dy.to_floats();
  auto xf = x.to_floats();
  Vec xv(xf.begin(), xf.end()), fd(xv.size());
  const double h = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    auto loss = [&](double v) {
      Vec xp = xv;
      xp[i] = v;
      Vec yp = rope_ref(xp, s, 1e4, 4);
      double l = 0;
      for (size_t j = 0; j < yp.size(); ++j) l += dyv[j] * yp[j];
      return l;
    };
    fd[i] = (loss(xv[i] + h) - loss(xv[i] - h)) / (2 * h);
  }
  Tensor dx = Tensor::zeros(s);
  ops::rope_backward(dy, dx, 10000.0f, 4);
  EXPECT_LT(test::max_rel_error(dx.to_floats(), fd), 1e-6);
  // In place (dx aliases dy).
  ops::rope_backward(dy, dy, 10000.0f, 4);
  EXPECT_EQ(dy.to_floats(), dx.to_floats());
}

TEST(Rope, ShiftingAllPositionsLeavesScoresUnchanged) {
  const int64_t B = 1, T = 12, H = 2, D = 16;
  const Shape s = {B, T, H, D};
  Tensor q = test::random_tensor(s, 4), k = test::random_tensor(s, 5);
  auto scores = [&](int64_t offset) {
    Tensor qr = Tensor::zeros(s), kr = Tensor::zeros(s);
    ops::rope_forward(q, qr, 10000.0f, offset);
    ops::rope_forward(k, kr, 10000.0f, offset);
    auto qv = qr.to_floats(), kv = kr.to_floats();
    std::vector<float> out;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double d = 0;
          for (int64_t c = 0; c < D; ++c) d += qv[(i * H + h) * D + c] * kv[(j * H + h) * D + c];
          out.push_back(static_cast<float>(d));
        }
    return out;
  };
  const auto base = scores(0);
  for (int64_t offset : {1, 37, 1000}) {
    auto shifted = scores(offset);
    EXPECT_LT(test::max_rel_error(shifted, base), 1e-5) << "offset " << offset;
  }
}

TEST(Rope, RejectsBadShapes) {
  Tensor odd = Tensor::zeros({1, 2, 1, 7}), y = Tensor::zeros({1, 2, 1, 7});
  EXPECT_THROW(ops::rope_forward(odd, y, 10000.0f), Error);
  Tensor three_d = Tensor::zeros({2, 1, 8}), y3 = Tensor::zeros({2, 1, 8});
  EXPECT_THROW(ops::rope_forward(three_d, y3, 10000.0f), Error);
  Tensor x = Tensor::zeros({1, 2, 1, 8}), other = Tensor::zeros({1, 1, 2, 8});
  EXPECT_THROW(ops::rope_backward(x, other, 10000.0f), Error);
}

}  // namespace
}  // namespace rotor
