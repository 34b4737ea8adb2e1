// Linear attention (ops/linear_attention.h) against a brute-force O(N^2)
// evaluation of its formula in double written here, independently of the
// op's chunked sweeps: for each query m, num = sum_n w_mn v_n and den =
// sum_n phi(q_m).phi(k_n) + eps, with w_mn = (R_m a_m).(R_n b_n) as the
// placement says. Gradients against central finite differences of that
// brute force (the FAVOR stabilizers held at their values at the point, as
// the op holds them constant). Every feature map x every RoPE placement x
// causal / not, chunk sizes that do and do not divide T, padding, Tq != Tk.
// Errors are relative to the largest reference entry of the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/favor.h"
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
    if (o.rope == LinearRope::BeforeFeatureMap) s = rotate(s, pos, o.rope_base);
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
  // Stabilizers of head bh: per query row, then one for the keys (last).
  Vec stabilizers(int64_t bh, const Vec& q, const Vec& k) const {
    Vec s(static_cast<size_t>(c.Tq + 1), 0.0);
    if (o.feature_map != LinearFeatureMap::Favor) return s;
    for (int64_t m = 0; m < c.Tq; ++m) {
      const Vec l = logits(scaled(&q[(bh * c.Tq + m) * c.D], o.rope_q_offset + m));
      s[m] = *std::max_element(l.begin(), l.end());
    }
    s[c.Tq] = -INFINITY;
    for (int64_t n = 0; n < key_len(bh / c.H); ++n) {
      const Vec l = logits(scaled(&k[(bh * c.Tk + n) * c.D], o.rope_k_offset + n));
      s[c.Tq] = std::max(s[c.Tq], *std::max_element(l.begin(), l.end()));
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
        const Vec pk = phi(scaled(&k[(bh * c.Tk + n) * c.D], pn), stab[c.Tq]);
        const double w =
            after ? dot(rotate(pq, pm, o.rope_base), rotate(pk, pn, o.rope_base)) : dot(pq, pk);
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
  o.rope_base = 10.0f;
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
  EXPECT_LT(rel_error(out.to_floats(), out_ref), 1e-5) << "out";
  EXPECT_LT(rel_error(dq.to_floats(), dq_ref), 1e-5) << "dq";
  EXPECT_LT(rel_error(dk.to_floats(), dk_ref), 1e-5) << "dk";
  EXPECT_LT(rel_error(dv.to_floats(), dv_ref), 1e-5) << "dv";
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

}  // namespace
}  // namespace rotor
