// Linear attention (ops/linear_attention.h) against a brute-force O(N^2)
// evaluation of its formula in double written here, independently of the
// op's chunked sweeps: for each query m, num = sum_n w_mn v_n and den =
// sum_n phi(q_m).phi(k_n) + eps, with w_mn = (R_m a_m).(R_n b_n) as the
// placement says. Gradients against central finite differences of that
// brute force (the FAVOR stabilizers held at their values at the point, as
// the op holds them constant). Every feature map x every RoPE placement x
// causal / not, chunk sizes that do and do not divide T, padding, Tq != Tk.
// Errors are relative to the largest reference entry of the tensor.
// Also: a constant position shift keeps the eq. 19 numerator, FAVOR+
// approximates the softmax kernel, causal FAVOR+ gives 1/(m+1) where softmax
// does, the projection draw is a pure function of (seed, draw, layer), 16-bit
// inputs, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/favor.h"
#include "ops/attention.h"
#include "ops/linear_attention.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::LinearAttentionOptions;
using ops::LinearFeatureMap;
using ops::LinearRope;
using Vec = std::vector<double>;

struct Case {
  int64_t B, H, Tq, Tk, D, Dv, M;  // M: features of favor (D otherwise)
  bool causal;
  int64_t chunk;
  std::vector<int32_t> key_lengths;  // empty: no padding
};

// x rotated at `pos` by pairs, theta_i = base^(-2i/width), in double.
Vec rotate(const Vec& x, int64_t pos, double base) {
  Vec y(x.size());
  const auto width = static_cast<double>(x.size());
  for (size_t i = 0; i + 1 < x.size(); i += 2) {
    const double a = static_cast<double>(pos) * std::pow(base, -static_cast<double>(i) / width);
    y[i] = x[i] * std::cos(a) - x[i + 1] * std::sin(a);
    y[i + 1] = x[i + 1] * std::cos(a) + x[i] * std::sin(a);
  }
  return y;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The brute force of one (batch, head). q, k, v are the full flat tensors.
// FAVOR+'s key stabilizer of query m is the max over the keys m sees.
struct Brute {
  const Case& c;
  const LinearAttentionOptions& o;
  Vec W;  // [M, D] (favor)
  double scale() const { return o.qk_scale > 0 ? o.qk_scale : std::pow(double(c.D), -0.25); }
  int64_t key_len(int64_t b) const { return c.key_lengths.empty() ? c.Tk : c.key_lengths[b]; }
  int64_t visible(int64_t b, int64_t m) const {
    int64_t n = key_len(b);
    if (o.causal) n = std::min(n, std::max<int64_t>(0, m + c.Tk - c.Tq + 1));
    return n;
  }
  Vec scaled(const double* x, int64_t pos) const {
    Vec s(x, x + c.D);
    if (o.rope == LinearRope::BeforeFeatureMap) s = rotate(s, pos, o.rope_params.theta);
    for (double& e : s) e *= scale();
    return s;
  }
  Vec logits(const Vec& x) const {  // w_j . x
    Vec l(static_cast<size_t>(c.M));
    for (int64_t j = 0; j < c.M; ++j)
      l[j] = dot(Vec(W.begin() + j * c.D, W.begin() + (j + 1) * c.D), x);
    return l;
  }
  Vec phi(const Vec& x, double stab) const {
    Vec p(x.size());
    if (o.feature_map == LinearFeatureMap::Elu1)
      for (size_t i = 0; i < x.size(); ++i) p[i] = x[i] > 0 ? x[i] + 1 : std::exp(x[i]);
    if (o.feature_map == LinearFeatureMap::Relu)
      for (size_t i = 0; i < x.size(); ++i) p[i] = std::max(x[i], 0.0);
    if (o.feature_map != LinearFeatureMap::Favor) return p;
    const Vec l = logits(x);
    p.assign(l.size(), 0.0);
    for (size_t j = 0; j < l.size(); ++j)
      p[j] = std::exp(l[j] - dot(x, x) / 2 - stab) / std::sqrt(double(c.M));
    return p;
  }
  // Stabilizers of head bh: per query row m, s[m] = max_j w_j.q_m, and
  // s[Tq + m] = the max over the keys m sees and j of w_j.k (one constant
  // without causal; a running max with causal).
  Vec stabilizers(int64_t bh, const Vec& q, const Vec& k) const {
    Vec s(static_cast<size_t>(2 * c.Tq), 0.0);
    if (o.feature_map != LinearFeatureMap::Favor) return s;
    for (int64_t m = 0; m < c.Tq; ++m) {
      const Vec l = logits(scaled(&q[(bh * c.Tq + m) * c.D], o.rope_q_offset + m));
      s[m] = *std::max_element(l.begin(), l.end());
      s[c.Tq + m] = -INFINITY;
      for (int64_t n = 0; n < visible(bh / c.H, m); ++n) {
        const Vec lk = logits(scaled(&k[(bh * c.Tk + n) * c.D], o.rope_k_offset + n));
        s[c.Tq + m] = std::max(s[c.Tq + m], *std::max_element(lk.begin(), lk.end()));
      }
    }
    return s;
  }
  // out rows of head bh [Tq, Dv].
  Vec head(int64_t bh, const Vec& q, const Vec& k, const Vec& v, const Vec& stab) const {
    const int64_t b = bh / c.H;
    const bool after = o.rope == LinearRope::AfterFeatureMap;
    Vec out(static_cast<size_t>(c.Tq * c.Dv), 0.0);
    for (int64_t m = 0; m < c.Tq; ++m) {
      const int64_t pm = o.rope_q_offset + m;
      const Vec pq = phi(scaled(&q[(bh * c.Tq + m) * c.D], pm), stab[m]);
      Vec num(static_cast<size_t>(c.Dv), 0.0);
      double den = 0;
      for (int64_t n = 0; n < visible(b, m); ++n) {
        const int64_t pn = o.rope_k_offset + n;
        const Vec pk = phi(scaled(&k[(bh * c.Tk + n) * c.D], pn), stab[c.Tq + m]);
        const double w =
            after ? dot(rotate(pq, pm, o.rope_params.theta), rotate(pk, pn, o.rope_params.theta))
                  : dot(pq, pk);
        for (int64_t e = 0; e < c.Dv; ++e) num[e] += w * v[(bh * c.Tk + n) * c.Dv + e];
        den += dot(pq, pk);
      }
      for (int64_t e = 0; e < c.Dv; ++e) out[m * c.Dv + e] = num[e] / (den + o.eps);
    }
    return out;
  }
};

Vec doubles(const Tensor& t) {
  const auto f = t.to_floats();
  return Vec(f.begin(), f.end());
}

// max |a - b| / max |b|.
double rel_error(const std::vector<float>& a, const Vec& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

void check_case(const Case& c, LinearFeatureMap map, LinearRope rope) {
  SCOPED_TRACE(::testing::Message()
               << ops::linear_feature_map_name(map) << " rope " << ops::linear_rope_name(rope)
               << " causal " << c.causal << " chunk " << c.chunk << " Tq " << c.Tq << " Tk " << c.Tk
               << " padded " << !c.key_lengths.empty());
  LinearAttentionOptions o;
  o.feature_map = map;
  o.rope = rope;
  o.causal = c.causal;
  o.chunk = c.chunk;
  o.rope_params.theta = 10.0;
  o.rope_q_offset = 3;
  o.rope_k_offset = c.Tq == c.Tk ? 3 : 0;
  if (!c.key_lengths.empty()) o.key_lengths = Tensor::from_ints(c.key_lengths, {c.B});
  const int64_t M = map == LinearFeatureMap::Favor ? c.M : c.D;
  Tensor proj = map == LinearFeatureMap::Favor ? ops::favor_projection(5, 0, 0, M, c.D) : Tensor();
  Case cm = c;
  cm.M = M;
  Brute ref{cm, o, map == LinearFeatureMap::Favor ? doubles(proj) : Vec{}};
  // Mostly positive q and k. Where phi(q).phi(k) is small against |phi(q)| |phi(k)|
  // (relu features of nearly disjoint support) the gradient is a difference of
  // large terms, and fp32 cannot reach 1e-5 there (with q, k in [-0.5, 1): 3e-5).
  Tensor q = test::random_tensor({c.B, c.H, c.Tq, c.D}, 11, -0.25f, 1.0f);
  Tensor k = test::random_tensor({c.B, c.H, c.Tk, c.D}, 12, -0.25f, 1.0f);
  Tensor v = test::random_tensor({c.B, c.H, c.Tk, c.Dv}, 13);
  Tensor g = test::random_tensor({c.B, c.H, c.Tq, c.Dv}, 14);
  Tensor out = Tensor::empty({c.B, c.H, c.Tq, c.Dv}), den = Tensor::empty({c.B, c.H, c.Tq});
  ops::linear_attention_forward(q, k, v, proj, o, out, den);
  Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()),
         dv = Tensor::empty(v.shape());
  ops::linear_attention_backward(q, k, v, proj, out, den, g, o, dq, dk, dv);

  Vec qd = doubles(q), kd = doubles(k), vd = doubles(v), gd = doubles(g);
  Vec out_ref, dq_ref(qd.size()), dk_ref(kd.size()), dv_ref(vd.size());
  const double h = 1e-5;
  for (int64_t bh = 0; bh < c.B * c.H; ++bh) {
    const Vec stab = ref.stabilizers(bh, qd, kd);
    const Vec o_head = ref.head(bh, qd, kd, vd, stab);
    out_ref.insert(out_ref.end(), o_head.begin(), o_head.end());
    auto loss = [&] {
      const Vec y = ref.head(bh, qd, kd, vd, stab);
      double l = 0;
      for (int64_t i = 0; i < c.Tq * c.Dv; ++i) l += y[i] * gd[bh * c.Tq * c.Dv + i];
      return l;
    };
    auto fd = [&](Vec& x, Vec& dx, int64_t rows, int64_t width) {
      for (int64_t i = bh * rows * width; i < (bh + 1) * rows * width; ++i) {
        const double x0 = x[i];
        x[i] = x0 + h;
        const double lp = loss();
        x[i] = x0 - h;
        const double lm = loss();
        x[i] = x0;
        dx[i] = (lp - lm) / (2 * h);
      }
    };
    fd(qd, dq_ref, c.Tq, c.D);
    fd(kd, dk_ref, c.Tk, c.D);
    fd(vd, dv_ref, c.Tk, c.Dv);
  }
  // fp32 sweeps against double: the gradients' references are central
  // differences, and the fp32 GEMM's rounding depends on its library's
  // blocking (ops/cpu_gemm.h): 1.1e-5 is the largest seen (oneDNN, dq of
  // relu rotated before the feature map).
  EXPECT_LT(rel_error(out.to_floats(), out_ref), 1e-5) << "out";
  EXPECT_LT(rel_error(dq.to_floats(), dq_ref), 2e-5) << "dq";
  EXPECT_LT(rel_error(dk.to_floats(), dk_ref), 2e-5) << "dk";
  EXPECT_LT(rel_error(dv.to_floats(), dv_ref), 2e-5) << "dv";
}

const std::vector<Case> kCases = {
    {2, 2, 8, 8, 4, 3, 6, false, 3, {}},       // not causal
    {2, 2, 8, 8, 4, 3, 6, false, 64, {5, 8}},  // not causal, padding
    {2, 2, 8, 8, 4, 3, 6, true, 4, {}},        // chunk divides T
    {2, 2, 9, 9, 4, 3, 6, true, 4, {}},        // chunk does not divide T
    {2, 1, 8, 8, 4, 3, 6, true, 3, {0, 7}},    // padding, a batch row without keys
    {2, 1, 5, 8, 4, 3, 6, true, 2, {8, 6}},    // Tq < Tk
    {1, 2, 7, 7, 4, 3, 6, true, 1, {}},        // one row per chunk
    {1, 2, 7, 7, 4, 3, 6, true, 64, {}},       // one chunk
};

class LinearAttentionBrute
    : public ::testing::TestWithParam<std::tuple<LinearFeatureMap, LinearRope>> {};

TEST_P(LinearAttentionBrute, ForwardAndGradients) {
  for (const Case& c : kCases) check_case(c, std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    All, LinearAttentionBrute,
    ::testing::Combine(::testing::Values(LinearFeatureMap::Elu1, LinearFeatureMap::Relu,
                                         LinearFeatureMap::Favor),
                       ::testing::Values(LinearRope::None, LinearRope::AfterFeatureMap,
                                         LinearRope::BeforeFeatureMap)),
    [](const auto& info) {
      return std::string(ops::linear_feature_map_name(std::get<0>(info.param))) + "_" +
             ops::linear_rope_name(std::get<1>(info.param));
    });

// out o (den + eps): the numerator of every query row.
std::vector<float> numerator(const Tensor& out, const Tensor& den, float eps) {
  auto o = out.to_floats();
  const auto d = den.to_floats();
  const size_t dv = o.size() / d.size();
  for (size_t i = 0; i < o.size(); ++i) o[i] *= d[i / dv] + eps;
  return o;
}

TEST(LinearAttention, PositionShiftKeepsTheNumerator) {
  const int64_t B = 1, H = 2, T = 12, D = 8, M = 8;
  Tensor q = test::random_tensor({B, H, T, D}, 21), k = test::random_tensor({B, H, T, D}, 22);
  Tensor v = test::random_tensor({B, H, T, D}, 23);
  for (LinearFeatureMap map : {LinearFeatureMap::Elu1, LinearFeatureMap::Favor})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << ops::linear_feature_map_name(map) << " causal " << causal);
      LinearAttentionOptions o;
      o.feature_map = map;
      o.causal = causal;
      o.chunk = 5;
      o.rope = LinearRope::AfterFeatureMap;
      o.rope_params.theta = 100.0;
      Tensor proj =
          map == LinearFeatureMap::Favor ? ops::favor_projection(3, 0, 0, M, D) : Tensor();
      auto num_at = [&](int64_t q_offset, int64_t k_offset) {
        o.rope_q_offset = q_offset;
        o.rope_k_offset = k_offset;
        Tensor out = Tensor::empty({B, H, T, D}), den = Tensor::empty({B, H, T});
        ops::linear_attention_forward(q, k, v, proj, o, out, den);
        return numerator(out, den, o.eps);
      };
      const auto base = num_at(0, 0);
      const Vec ref(base.begin(), base.end());
      EXPECT_LT(rel_error(num_at(1000, 1000), ref), 1e-5);
      EXPECT_LT(rel_error(num_at(-37, -37), ref), 1e-5);
      EXPECT_GT(rel_error(num_at(3, 0), ref), 1e-2);  // relative positions changed: it moves
    }
}

// Causal: no key or value after row m's last visible key changes row m's
// output or den, however large -- FAVOR+'s key stabilizer included (a
// future key with a large logit would move a max over the whole block and,
// through eps, every earlier output). Bitwise, for several chunk sizes.
TEST(LinearAttention, CausalFutureKeysLeaveEarlierRowsUnchanged) {
  const int64_t B = 1, H = 2, T = 11, D = 8, M = 16, change = 7;
  Tensor q = test::random_tensor({B, H, T, D}, 71), k = test::random_tensor({B, H, T, D}, 72);
  Tensor v = test::random_tensor({B, H, T, D}, 73), g = test::random_tensor({B, H, T, D}, 74);
  Tensor proj = ops::favor_projection(4, 0, 0, M, D);
  auto k2v = k.to_floats(), v2v = v.to_floats();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t c = 0; c < D; ++c) {  // row `change` of every head: a large key, another value
      k2v[(h * T + change) * D + c] = 3.0f + 0.5f * float(c % 3);
      v2v[(h * T + change) * D + c] = -5.0f;
    }
  Tensor k2 = Tensor::from_floats(k2v, k.shape()), v2 = Tensor::from_floats(v2v, v.shape());
  for (int64_t chunk : {1, 3, 4, 64})
    for (LinearRope rope : {LinearRope::None, LinearRope::AfterFeatureMap}) {
      SCOPED_TRACE(::testing::Message()
                   << "chunk " << chunk << " rope " << ops::linear_rope_name(rope));
      LinearAttentionOptions o;  // default eps
      o.feature_map = LinearFeatureMap::Favor;
      o.causal = true;
      o.chunk = chunk;
      o.rope = rope;
      auto run = [&](const Tensor& kk, const Tensor& vv) {
        Tensor out = Tensor::empty({B, H, T, D}), den = Tensor::empty({B, H, T});
        ops::linear_attention_forward(q, kk, vv, proj, o, out, den);
        Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape());
        Tensor dv = Tensor::empty(v.shape());
        ops::linear_attention_backward(q, kk, vv, proj, out, den, g, o, dq, dk, dv);
        return std::vector<std::vector<float>>{out.to_floats(), den.to_floats(), dq.to_floats()};
      };
      const auto a = run(k, v), b = run(k2, v2);
      bool moved = false;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t m = 0; m < T; ++m)
          for (int64_t c = 0; c < D; ++c) {
            const size_t i = static_cast<size_t>((h * T + m) * D + c);
            if (m < change) {
              EXPECT_EQ(a[0][i], b[0][i]) << "out h " << h << " row " << m;
              EXPECT_EQ(a[2][i], b[2][i]) << "dq h " << h << " row " << m;
              if (c == 0) {
                EXPECT_EQ(a[1][h * T + m], b[1][h * T + m]) << "den row " << m;
              }
            } else {
              moved = moved || a[0][i] != b[0][i];
            }
          }
      EXPECT_TRUE(moved);  // the change is seen from row `change` on
    }
}

TEST(LinearAttention, FavorApproximatesTheSoftmaxKernel) {
  const int64_t N = 16, D = 16;
  Tensor q = test::random_tensor({N, D}, 31, -0.25f, 0.25f);
  Tensor k = test::random_tensor({N, D}, 32, -0.25f, 0.25f);
  const auto qv = q.to_floats(), kv = k.to_floats();
  auto mse = [&](int64_t M) {
    Tensor proj = ops::favor_projection(9, 0, 0, M, D);
    Tensor pq = Tensor::empty({N, M}), pk = Tensor::empty({N, M});
    ops::linear_attention_features(q, proj, LinearFeatureMap::Favor, 0.0f,
                                   ops::FavorStabilizer::None, pq);
    ops::linear_attention_features(k, proj, LinearFeatureMap::Favor, 0.0f,
                                   ops::FavorStabilizer::None, pk);
    const auto a = pq.to_floats(), b = pk.to_floats();
    double sum = 0;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double est = 0, logit = 0;
        for (int64_t f = 0; f < M; ++f) est += double(a[i * M + f]) * b[j * M + f];
        for (int64_t c = 0; c < D; ++c) logit += double(qv[i * D + c]) * kv[j * D + c];
        const double exact = std::exp(logit / std::sqrt(double(D)));  // (D^-1/4 q).(D^-1/4 k)
        sum += (est - exact) * (est - exact);
      }
    return sum / double(N * N);
  };
  const double many = mse(32768), few = mse(16);
  EXPECT_LT(many, 1e-3);
  EXPECT_GT(few, many);  // an estimate that sharpens with more features
}

TEST(LinearAttention, CausalFavorGivesTheSoftmaxAnswerOnEqualLogits) {
  // q = 0: every logit q.k_n is 0, so softmax attention is uniform over the
  // visible keys and, with v_0 = 1 and v_n = 0 after it, query m gets exactly
  // 1/(m+1). FAVOR+ estimates each key's weight exp(0) = 1 from random
  // features of distinct keys, so its answer is approximate.
  const int64_t T = 6, D = 8, M = 10000;
  Tensor q = Tensor::zeros({1, 1, T, D});
  Tensor k = test::random_tensor({1, 1, T, D}, 41, -0.5f, 0.5f);
  std::vector<float> vv(T * D, 0.0f);
  vv[0] = 1.0f;  // v_0 = [1, 0, ...], v_n = 0 for n > 0
  Tensor v = Tensor::from_floats(vv, {1, 1, T, D});
  ops::AttentionOptions so;
  so.causal = true;
  Tensor soft = Tensor::empty({1, 1, T, D}), probs = Tensor::empty({1, 1, T, T});
  ops::attention_forward(q, k, v, so, soft, probs);
  LinearAttentionOptions o;
  o.feature_map = LinearFeatureMap::Favor;
  o.causal = true;
  o.chunk = 4;
  Tensor out = Tensor::empty({1, 1, T, D}), den = Tensor::empty({1, 1, T});
  ops::linear_attention_forward(q, k, v, ops::favor_projection(2, 0, 0, M, D), o, out, den);
  const auto s = soft.to_floats(), l = out.to_floats();
  for (int64_t m = 0; m < T; ++m) {
    EXPECT_NEAR(s[m * D], 1.0 / double(m + 1), 1e-6) << m;
    EXPECT_NEAR(l[m * D], 1.0 / double(m + 1), 0.02) << m;
  }
}

TEST(LinearAttention, FavorDrawIsAPureFunctionOfSeedDrawLayer) {
  const int64_t M = 20, D = 8;
  const auto a = favor::projection(7, 3, 2, M, D);
  EXPECT_EQ(a, favor::projection(7, 3, 2, M, D));  // every call, every rank, after a resume
  EXPECT_EQ(a, ops::favor_projection(7, 3, 2, M, D).to_floats());
  EXPECT_NE(a, favor::projection(7, 4, 2, M, D));  // a redraw
  EXPECT_NE(a, favor::projection(8, 3, 2, M, D));
  EXPECT_NE(a, favor::projection(7, 3, 1, M, D));
  auto row = [&](int64_t i) { return Vec(a.begin() + i * D, a.begin() + (i + 1) * D); };
  double shortest = 1e9, longest = 0;
  for (int64_t i = 0; i < M; ++i) {
    const double n = std::sqrt(dot(row(i), row(i)));
    shortest = std::min(shortest, n);
    longest = std::max(longest, n);
    for (int64_t j = i + 1; j < M && j / D == i / D; ++j)  // the rows of one block
      EXPECT_LT(std::abs(dot(row(i), row(j))) / (n * std::sqrt(dot(row(j), row(j)))), 1e-5);
  }
  EXPECT_GT(longest / shortest, 1.05);  // chi-distributed lengths, not unit rows
  // E |w|^2 = D for Gaussian rows.
  const auto big = favor::projection(1, 0, 0, 4096, D);
  double sq = 0;
  for (float x : big) sq += double(x) * x;
  EXPECT_NEAR(sq / 4096.0, double(D), 0.05 * D);
}

TEST(LinearAttention, SixteenBitInputsComputeInF32) {
  const int64_t B = 1, H = 2, T = 10, D = 8;
  LinearAttentionOptions o;
  o.causal = true;
  o.chunk = 4;
  o.rope = LinearRope::AfterFeatureMap;
  for (DType dt : {DType::BF16, DType::F16}) {
    Tensor q16 = test::random_tensor({B, H, T, D}, 51).to(Device::cpu());
    auto cast = [&](const Tensor& t) { return Tensor::from_floats(t.to_floats(), t.shape(), dt); };
    Tensor q = cast(q16), k = cast(test::random_tensor({B, H, T, D}, 52));
    Tensor v = cast(test::random_tensor({B, H, T, D}, 53));
    auto f32 = [](const Tensor& t) { return Tensor::from_floats(t.to_floats(), t.shape()); };
    Tensor out = Tensor::empty({B, H, T, D}, dt), den = Tensor::empty({B, H, T});
    Tensor out32 = Tensor::empty({B, H, T, D}), den32 = Tensor::empty({B, H, T});
    ops::linear_attention_forward(q, k, v, Tensor(), o, out, den);
    ops::linear_attention_forward(f32(q), f32(k), f32(v), Tensor(), o, out32, den32);
    const auto r = out32.to_floats();
    EXPECT_LT(rel_error(out.to_floats(), Vec(r.begin(), r.end())), 1e-2) << dtype_name(dt);
    Tensor dq = Tensor::empty(q.shape(), dt), dk = Tensor::empty(q.shape(), dt);
    Tensor dv = Tensor::empty(q.shape(), dt), dq32 = Tensor::empty(q.shape());
    Tensor dk32 = Tensor::empty(q.shape()), dv32 = Tensor::empty(q.shape());
    ops::linear_attention_backward(q, k, v, Tensor(), out, den, q, o, dq, dk, dv);
    ops::linear_attention_backward(f32(q), f32(k), f32(v), Tensor(), f32(out), den, f32(q), o, dq32,
                                   dk32, dv32);
    const auto g = dk32.to_floats();
    EXPECT_LT(rel_error(dk.to_floats(), Vec(g.begin(), g.end())), 1e-2) << dtype_name(dt);
  }
}

void expect_error(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one saying: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(LinearAttention, BadArgumentsAreErrors) {
  const int64_t D = 4;
  Tensor q = test::random_tensor({1, 1, 5, D}, 61), k = test::random_tensor({1, 1, 5, D}, 62);
  Tensor out = Tensor::empty({1, 1, 5, D}), den = Tensor::empty({1, 1, 5});
  auto run = [&](LinearAttentionOptions o, const Tensor& proj, Tensor& o_out, Tensor& o_den) {
    return [&, o, proj] { ops::linear_attention_forward(q, k, k, proj, o, o_out, o_den); };
  };
  LinearAttentionOptions o;
  expect_error(run(o, ops::favor_projection(0, 0, 0, 6, D), out, den), "takes no projection");
  o.feature_map = LinearFeatureMap::Favor;
  expect_error(run(o, Tensor(), out, den), "favor needs a projection f32 [M >= 1, 4]");
  expect_error(run(o, ops::favor_projection(0, 0, 0, 6, 3), out, den), "needs a projection");
  o.rope = LinearRope::AfterFeatureMap;
  expect_error(run(o, ops::favor_projection(0, 0, 0, 5, D), out, den), "M = 5 must be even");
  o = LinearAttentionOptions{};
  o.chunk = 0;
  expect_error(run(o, Tensor(), out, den), "chunk must be >= 1");
  o.chunk = 64;
  o.eps = 0.0f;
  expect_error(run(o, Tensor(), out, den), "eps must be finite and > 0");
  o.eps = 1e-6f;
  o.key_lengths = Tensor::from_ints({6}, {1});
  expect_error(run(o, Tensor(), out, den), "key_lengths[0] = 6 outside [0, 5]");
  o.key_lengths = Tensor();
  Tensor den16 = Tensor::empty({1, 1, 5}, DType::BF16);
  expect_error(run(o, Tensor(), out, den16), "linear_attention_forward den: expected f32");
  Tensor q3 = test::random_tensor({1, 1, 5, 3}, 63);
  o.rope = LinearRope::BeforeFeatureMap;
  Tensor out3 = Tensor::empty({1, 1, 5, 3});
  expect_error([&] { ops::linear_attention_forward(q3, q3, q3, Tensor(), o, out3, den); },
               "D = 3 must be even");
}

}  // namespace
}  // namespace rotor
