// The head split with RoPE fused in (ops::split_heads_forward/backward, the
// code training runs) and the head merge: the RoPE test vectors of
// REFERENCE.md, the relative-position property, offset invariance, inversion
// and the backward as the transpose, against a double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/rope.h"
#include "ops/heads.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Vec = std::vector<double>;
using ops::SplitHeadsOptions;

const std::vector<float> kQ = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
const std::vector<float> kK = {1.0f, 0.9f, 0.8f, 0.7f, 0.6f, 0.5f, 0.4f, 0.3f};

struct Dims {
  int64_t B, T, P, H, D;
  int64_t numel() const { return B * T * P * H * D; }
};

SplitHeadsOptions options(int64_t heads, int rope_parts, int64_t offset, float scale = 1.0f,
                          float base = 10000.0f) {
  SplitHeadsOptions o;
  o.n_heads = heads;
  o.rope_parts = rope_parts;
  o.rope.theta = base;
  o.position_offset = offset;
  o.part0_scale = scale;
  return o;
}

// x [B, T, P*H*D] -> its P parts [B, H, T, D], as float vectors.
std::vector<std::vector<float>> split(const std::vector<float>& x, const Dims& d,
                                      const SplitHeadsOptions& o) {
  std::vector<Tensor> parts;
  for (int64_t p = 0; p < d.P; ++p) parts.push_back(Tensor::zeros({d.B, d.H, d.T, d.D}));
  ops::split_heads_forward(Tensor::from_floats(x, {d.B, d.T, d.P * d.H * d.D}), parts, o);
  std::vector<std::vector<float>> out;
  for (const Tensor& p : parts) out.push_back(p.to_floats());
  return out;
}

// The double reference: part p of x, rotated when p < rotary parts (pair i of
// position t by (t + offset) base^(-2i/D), interleaved pairs), part 0 scaled.
std::vector<Vec> split_ref(const Vec& x, const Dims& d, const SplitHeadsOptions& o) {
  std::vector<Vec> parts(static_cast<size_t>(d.P), Vec(static_cast<size_t>(d.B * d.H * d.T * d.D)));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t p = 0; p < d.P; ++p)
        for (int64_t h = 0; h < d.H; ++h)
          for (int64_t i = 0; i < d.D / 2; ++i) {
            const size_t from =
                static_cast<size_t>((((b * d.T + t) * d.P + p) * d.H + h) * d.D + 2 * i);
            const size_t to = static_cast<size_t>(((b * d.H + h) * d.T + t) * d.D + 2 * i);
            const double a = p < o.rope_parts
                                 ? (t + o.position_offset) * std::pow(o.rope.theta, -2.0 * i / d.D)
                                 : 0.0;
            const double s = p == 0 ? o.part0_scale : 1.0;
            Vec& out = parts[static_cast<size_t>(p)];
            out[to] = s * (x[from] * std::cos(a) - x[from + 1] * std::sin(a));
            out[to + 1] = s * (x[from + 1] * std::cos(a) + x[from] * std::sin(a));
          }
  return parts;
}

Vec to_double(const std::vector<float>& v) {
  return Vec(v.begin(), v.end());
}

// One head vector rotated to position m by the offset of a one-position split.
std::vector<float> rotate_at(const std::vector<float>& x, int64_t m) {
  return split(x, {1, 1, 1, 1, 8}, options(1, 1, m))[0];
}

void expect_near_vec(const std::vector<float>& a, const Vec& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "element " << i;
}

const std::pair<int64_t, Vec> kVectors[] = {
    {0, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8}},
    {1,
     {-0.114263966, 0.192207560, 0.258567883, 0.427951691, 0.493975100, 0.604969917, 0.699199650,
      0.800699600}},
    {5,
     {0.220151073, -0.039159990, 0.071504553, 0.494860686, 0.469387629, 0.624239741, 0.695991267,
      0.803489985}},
    {100,
     {0.187505015, 0.121827210, -0.034113014, -0.498834945, -0.234731438, 0.744916876, 0.616636182,
      0.865886724}},
};

TEST(SplitHeadsRope, ReferenceTestVectors) {
  for (const auto& [m, want] : kVectors) {
    SCOPED_TRACE(testing::Message() << "m = " << m);
    // Position m reached by the offset (incremental decoding) ...
    const double tol = m == 0 ? 1e-7 : 1e-6;
    expect_near_vec(rotate_at(kQ, m), want, tol);
    // ... and as row m of a sequence.
    std::vector<float> x(static_cast<size_t>((m + 1) * 8), 0.0f);
    std::copy(kQ.begin(), kQ.end(), x.end() - 8);
    const auto rows = split(x, {1, m + 1, 1, 1, 8}, options(1, 1, 0))[0];
    expect_near_vec(std::vector<float>(rows.end() - 8, rows.end()), want, tol);
  }
  // q and k of two heads are rotated alike; v is not.
  const Dims d{1, 1, 3, 2, 8};
  std::vector<float> x;
  for (int slot = 0; slot < 6; ++slot) x.insert(x.end(), kQ.begin(), kQ.end());
  const auto parts = split(x, d, options(2, 2, 5));
  for (int h = 0; h < 2; ++h) {
    const auto head = [&](int p) {
      return std::vector<float>(parts[p].begin() + 8 * h, parts[p].begin() + 8 * (h + 1));
    };
    expect_near_vec(head(0), kVectors[2].second, 1e-6);
    expect_near_vec(head(1), kVectors[2].second, 1e-6);
    EXPECT_EQ(head(2), kQ);
  }
}

TEST(SplitHeadsRope, IsNotTheHalfSplitLayout) {
  const Vec half_split = {0.507828356, -0.112138811, 0.264639660, 0.395995017,
                          0.045938665, 0.622434645,  0.714118933, 0.801989992};
  const auto y = rotate_at(kQ, 5);
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(y[i] - half_split[i]));
  EXPECT_GT(worst, 0.1);
}

// q at position m and k at m - 2 of one sequence: q.k depends on the offset only.
TEST(SplitHeadsRope, ScoreDependsOnlyOnOffset) {
  double unrotated = 0;
  for (size_t i = 0; i < 8; ++i) unrotated += static_cast<double>(kQ[i]) * kK[i];
  EXPECT_NEAR(unrotated, 1.92, 1e-6);
  const Dims d{1, 103, 2, 1, 8};
  std::vector<float> x(static_cast<size_t>(d.numel()), 0.0f);  // [T, 2, 8]
  const int64_t ms[] = {3, 12, 102};
  for (int64_t m : ms) {
    std::copy(kQ.begin(), kQ.end(), x.begin() + m * 16);            // q at m
    std::copy(kK.begin(), kK.end(), x.begin() + (m - 2) * 16 + 8);  // k at m - 2
  }
  const auto parts = split(x, d, options(1, 2, 0));
  for (int64_t m : ms) {
    double s = 0;
    for (int64_t i = 0; i < 8; ++i)
      s += static_cast<double>(parts[0][m * 8 + i]) * parts[1][(m - 2) * 8 + i];
    EXPECT_NEAR(s, 1.388696273717, 1e-6) << "m = " << m;
  }
}

TEST(SplitHeadsRope, ForwardMatchesDoubleReferenceAtLongPositions) {
  const Dims d{2, 64, 3, 3, 16};
  const auto x = test::random_floats(static_cast<size_t>(d.numel()), 1);
  // Angles up to ~1563 rad; q scaled by 1/sqrt(D); another base is honoured.
  for (const SplitHeadsOptions& o : {options(3, 2, 1500, 0.25f), options(3, 2, 0, 1.0f, 500.0f)}) {
    const auto got = split(x, d, o);
    const auto want = split_ref(to_double(x), d, o);
    for (int64_t p = 0; p < d.P; ++p)
      EXPECT_LT(test::max_rel_error(got[p], want[p]), 2e-6) << "part " << p;
  }
}

TEST(SplitHeadsRope, BackwardUndoesForwardAndIsTheTranspose) {
  const Dims d{2, 9, 3, 2, 8};
  const Shape packed = {d.B, d.T, d.P * d.H * d.D}, heads = {d.B, d.H, d.T, d.D};
  const auto x = test::random_floats(static_cast<size_t>(d.numel()), 2);
  // Rotating back by -theta undoes the rotation.
  const SplitHeadsOptions o = options(2, 2, 4);
  const auto parts = split(x, d, o);
  std::vector<Tensor> dparts;
  for (const auto& p : parts) dparts.push_back(Tensor::from_floats(p, heads));
  Tensor back = Tensor::full(packed, 7.0f);  // written, not accumulated
  ops::split_heads_backward(dparts, back, o);
  EXPECT_LT(test::max_rel_error(back.to_floats(), x), 1e-6);
  const auto unrotated = split(x, d, options(2, 0, 4));
  EXPECT_GT(test::max_rel_error(parts[0], unrotated[0]), 1e-2);  // it did rotate

  // Gradient of L = sum_p <dparts_p, split(x)_p> by central differences of
  // the reference, with the query scale.
  const SplitHeadsOptions os = options(2, 2, 4, 0.5f);
  std::vector<Vec> g;
  dparts.clear();
  for (int64_t p = 0; p < d.P; ++p) {
    const auto v = test::random_floats(static_cast<size_t>(shape_numel(heads)), 3 + p);
    g.push_back(to_double(v));
    dparts.push_back(Tensor::from_floats(v, heads));
  }
  Vec xv = to_double(x), fd(xv.size());
  const double h = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    auto loss = [&](double v) {
      Vec xp = xv;
      xp[i] = v;
      const auto y = split_ref(xp, d, os);
      double l = 0;
      for (int64_t p = 0; p < d.P; ++p)
        for (size_t j = 0; j < y[p].size(); ++j) l += g[p][j] * y[p][j];
      return l;
    };
    fd[i] = (loss(xv[i] + h) - loss(xv[i] - h)) / (2 * h);
  }
  Tensor dx = Tensor::zeros(packed);
  ops::split_heads_backward(dparts, dx, os);
  EXPECT_LT(test::max_rel_error(dx.to_floats(), fd), 1e-6);
}

// The split runs the vector rows of ops/rope_rows.h: bit for bit the pair-by-
// pair rotation (rope::rotate, rope::rotate_back) with the query scale after
// it (forward) or before it (backward), for both layouts, partial rotation,
// explicit positions and scales of 1 and not.
TEST(SplitHeadsRope, GivesThePairByPairBits) {
  const Dims d{2, 5, 3, 2, 36};  // 18 pairs: two vectors of 8 and a tail
  const Shape packed = {d.B, d.T, d.P * d.H * d.D}, heads = {d.B, d.H, d.T, d.D};
  const auto x = test::random_floats(static_cast<size_t>(d.numel()), 21, -2.0f, 2.0f);
  const std::vector<int32_t> positions = {0, 1, 1, 2, 7, 3, 0, 4, 4, 9};
  for (const rope::Layout layout : {rope::Layout::Interleaved, rope::Layout::Half})
    for (const double fraction : {1.0, 0.5})
      for (const float scale : {1.0f, 0.3f})
        for (const bool explicit_positions : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "layout " << static_cast<int>(layout) << " fraction " << fraction
                       << " scale " << scale << " explicit " << explicit_positions);
          SplitHeadsOptions o = options(d.H, 2, 3, scale, 500.0f);
          o.rope.layout = layout;
          o.rope.fraction = fraction;
          if (explicit_positions) o.positions = &positions;
          const int64_t rotated = rope::rotated_dims(o.rope, d.D);
          const rope::Params at = rope::at_length(o.rope, d.D, explicit_positions ? 10 : 3 + d.T);
          // Part p of head h at token (b, t): the packed row, its position.
          auto row = [&](int64_t b, int64_t t, int64_t p, int64_t h) {
            return ((b * d.T + t) * d.P + p) * d.H * d.D + h * d.D;
          };
          auto position = [&](int64_t b, int64_t t) {
            return explicit_positions ? positions[static_cast<size_t>(b * d.T + t)] : 3 + t;
          };
          const auto parts = split(x, d, o);
          std::vector<Tensor> dparts;
          for (const auto& part : parts) dparts.push_back(Tensor::from_floats(part, heads));
          Tensor dx = Tensor::empty(packed);
          ops::split_heads_backward(dparts, dx, o);
          const auto back = dx.to_floats();
          for (int64_t b = 0; b < d.B; ++b)
            for (int64_t t = 0; t < d.T; ++t)
              for (int64_t p = 0; p < d.P; ++p)
                for (int64_t h = 0; h < d.H; ++h) {
                  const float s = p == 0 ? scale : 1.0f;
                  const float* in = x.data() + row(b, t, p, h);
                  const float* got = parts[p].data() + ((b * d.H + h) * d.T + t) * d.D;
                  const float* split_row = got;  // the backward's input row
                  const float* got_back = back.data() + row(b, t, p, h);
                  for (int64_t j = 0; j < d.D / 2; ++j) {
                    int64_t i0, i1;
                    rope::slot_dims(layout, rotated, j, i0, i1);
                    float y0 = in[i0], y1 = in[i1], z0 = split_row[i0] * s, z1 = split_row[i1] * s;
                    if (p < 2 && 2 * j < rotated) {
                      const rope::Rotation r = rope::rotation(at, position(b, t), j, rotated);
                      rope::rotate(in[i0], in[i1], r, y0, y1);
                      rope::rotate_back(split_row[i0] * s, split_row[i1] * s, r, z0, z1);
                    }
                    ASSERT_EQ(got[i0], y0 * s) << b << t << p << h << j;
                    ASSERT_EQ(got[i1], y1 * s) << b << t << p << h << j;
                    ASSERT_EQ(got_back[i0], z0) << b << t << p << h << j;
                    ASSERT_EQ(got_back[i1], z1) << b << t << p << h << j;
                  }
                }
        }
}

TEST(SplitHeadsRope, ShiftingAllPositionsLeavesScoresUnchanged) {
  const Dims d{1, 12, 2, 2, 16};
  const auto x = test::random_floats(static_cast<size_t>(d.numel()), 4);
  auto scores = [&](int64_t offset) {
    const auto parts = split(x, d, options(d.H, 2, offset));
    std::vector<float> out;
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t i = 0; i < d.T; ++i)
        for (int64_t j = 0; j < d.T; ++j) {
          double s = 0;
          for (int64_t c = 0; c < d.D; ++c)
            s += double(parts[0][(h * d.T + i) * d.D + c]) * parts[1][(h * d.T + j) * d.D + c];
          out.push_back(static_cast<float>(s));
        }
    return out;
  };
  const auto base = scores(0);
  for (int64_t offset : {1, 37, 1000})
    EXPECT_LT(test::max_rel_error(scores(offset), base), 1e-5) << "offset " << offset;
}

// 16-bit storage: the f32 computation of the rounded inputs, rounded once.
TEST(SplitHeads, SixteenBitStorageRoundsOnce) {
  const Dims d{2, 5, 3, 2, 8};
  const auto x = test::random_floats(static_cast<size_t>(d.numel()), 5);
  const SplitHeadsOptions o = options(2, 2, 3, 0.35f);
  for (DType dt : {DType::F16, DType::BF16}) {
    const Tensor x16 = Tensor::from_floats(x, {d.B, d.T, d.P * d.H * d.D}, dt);
    std::vector<Tensor> parts;
    for (int64_t p = 0; p < d.P; ++p) parts.push_back(Tensor::zeros({d.B, d.H, d.T, d.D}, dt));
    ops::split_heads_forward(x16, parts, o);
    const auto want = split(x16.to_floats(), d, o);
    for (int64_t p = 0; p < d.P; ++p) {
      const auto rounded =
          Tensor::from_floats(want[p], {static_cast<int64_t>(want[p].size())}, dt).to_floats();
      EXPECT_EQ(parts[p].to_floats(), rounded) << dtype_name(dt) << " part " << p;
    }
  }
}

TEST(MergeHeads, ForwardAndBackwardArePermutations) {
  const int64_t B = 2, H = 3, T = 4, D = 5;
  const auto x = test::random_floats(static_cast<size_t>(B * H * T * D), 6);
  Tensor y = Tensor::zeros({B, T, H * D});
  ops::merge_heads_forward(Tensor::from_floats(x, {B, H, T, D}), y);
  const auto yv = y.to_floats();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < D; ++i)
          ASSERT_EQ(yv[((b * T + t) * H + h) * D + i], x[((b * H + h) * T + t) * D + i]);
  Tensor back = Tensor::zeros({B, H, T, D});
  ops::merge_heads_backward(y, back);
  EXPECT_EQ(back.to_floats(), x);
}

TEST(SplitHeads, RejectsBadArguments) {
  auto parts_of = [](int n, const Shape& s, DType dt = DType::F32) {
    std::vector<Tensor> p;
    for (int i = 0; i < n; ++i) p.push_back(Tensor::zeros(s, dt));
    return p;
  };
  const Tensor x = Tensor::zeros({1, 2, 3 * 2 * 8});
  auto q = parts_of(3, {1, 2, 2, 8});
  EXPECT_NO_THROW(ops::split_heads_forward(x, q, options(2, 2, 0)));
  // An odd head dim cannot be rotated (but may be split).
  const Tensor odd = Tensor::zeros({1, 2, 7});
  auto p7 = parts_of(1, {1, 1, 2, 7});
  EXPECT_THROW(ops::split_heads_forward(odd, p7, options(1, 1, 0)), Error);
  EXPECT_NO_THROW(ops::split_heads_forward(odd, p7, options(1, 0, 0)));
  // x must be [B, T, P*H*D], its width divisible by parts x heads.
  auto p4 = parts_of(3, {1, 2, 1, 2, 8});
  EXPECT_THROW(ops::split_heads_forward(Tensor::zeros({1, 2, 3, 16}), p4, options(2, 2, 0)), Error);
  EXPECT_THROW(ops::split_heads_forward(Tensor::zeros({1, 2, 47}), q, options(2, 2, 0)), Error);
  // Parts of the wrong shape, dtype, count; rotary parts outside [0, P].
  auto wrong = parts_of(3, {1, 2, 8, 2});
  EXPECT_THROW(ops::split_heads_forward(x, wrong, options(2, 2, 0)), Error);
  auto half = parts_of(3, {1, 2, 2, 8}, DType::BF16);
  EXPECT_THROW(ops::split_heads_forward(x, half, options(2, 2, 0)), Error);
  auto four = parts_of(4, {1, 2, 2, 6});
  EXPECT_THROW(ops::split_heads_forward(Tensor::zeros({1, 2, 4 * 2 * 6}), four, options(2, 0, 0)),
               Error);
  EXPECT_THROW(ops::split_heads_forward(x, q, options(2, 4, 0)), Error);
  EXPECT_THROW(ops::split_heads_forward(x, q, options(2, -1, 0)), Error);
  EXPECT_THROW(ops::split_heads_forward(x, q, options(2, 2, 0, 1.0f, 0.0f)), Error);
  EXPECT_THROW(ops::split_heads_forward(x, q, options(0, 2, 0)), Error);
  // Integer tensors, and the backward's checks are the forward's.
  auto ints = parts_of(3, {1, 2, 2, 8}, DType::I32);
  EXPECT_THROW(
      ops::split_heads_forward(Tensor::zeros({1, 2, 48}, DType::I32), ints, options(2, 2, 0)),
      Error);
  Tensor dx = Tensor::zeros({1, 2, 3 * 2 * 8});
  EXPECT_THROW(ops::split_heads_backward(wrong, dx, options(2, 2, 0)), Error);
  // The merge: [B, H, T, D] against [B, T, H*D] of the same dtype.
  Tensor y = Tensor::zeros({1, 3, 2 * 4});
  EXPECT_NO_THROW(ops::merge_heads_forward(Tensor::zeros({1, 2, 3, 4}), y));
  EXPECT_THROW(ops::merge_heads_forward(Tensor::zeros({1, 3, 2, 4}), y), Error);
  EXPECT_THROW(ops::merge_heads_forward(Tensor::zeros({1, 2, 3, 4}, DType::BF16), y), Error);
  Tensor dx4 = Tensor::zeros({2, 3, 4});
  EXPECT_THROW(ops::merge_heads_backward(y, dx4), Error);
}

}  // namespace
}  // namespace rotor
