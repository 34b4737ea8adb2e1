// Transformer-XL's relative terms (ops/xl_bias.h) as a dense score bias, and
// the materialized core's dense bias (ops::AttentionOptions::score_bias):
// the bias against eq. 4's terms written out in double; its gradients
// against finite differences; the core's bias gradient is dS / scale; the
// terms depend only on i - j; and the cores that cannot add a dense bias
// refuse it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "ops/xl_bias.h"
#include "support/test_util.h"

namespace rotor {
namespace {

struct Inputs {
  int64_t B, H, Tq, Tk, D, q_offset;
  Tensor q, k, r, u, v;
};

Inputs inputs(int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t D, int64_t q_offset,
              uint64_t seed) {
  Inputs x{B, H, Tq, Tk, D, q_offset, {}, {}, {}, {}, {}};
  x.q = test::random_tensor({B, H, Tq, D}, seed);
  x.k = test::random_tensor({B, H, Tk, D}, seed + 1);
  x.r = test::random_tensor({q_offset + Tq + Tk - 1, H * D}, seed + 2);
  x.u = test::random_tensor({H, D}, seed + 3);
  x.v = test::random_tensor({H, D}, seed + 4);
  return x;
}

// Eq. 4's terms (b), (c), (d) for query i (position q_offset + i) and key j,
// in double, with u and v scaled as the op scales them.
double want_bias(const Inputs& x, float scale, int64_t b, int64_t h, int64_t i, int64_t j) {
  const auto q = test::to_double(x.q), k = test::to_double(x.k), r = test::to_double(x.r),
             u = test::to_double(x.u), v = test::to_double(x.v);
  const int64_t row = (x.q_offset + i - j) + (x.Tk - 1);  // distance i - j
  double s = 0;
  for (int64_t c = 0; c < x.D; ++c) {
    const double qc = q[((b * x.H + h) * x.Tq + i) * x.D + c];
    const double rc = r[row * x.H * x.D + h * x.D + c];
    s += qc * rc + scale * v[h * x.D + c] * rc +
         scale * u[h * x.D + c] * k[((b * x.H + h) * x.Tk + j) * x.D + c];
  }
  return s;
}

TEST(XlBias, ForwardIsEquationFour) {
  for (int64_t q_offset : {0, 5}) {
    const Inputs x = inputs(2, 3, 4, 6, 8, q_offset, 10);
    const float scale = 1.0f / std::sqrt(8.0f);
    Tensor bias = Tensor::full({2, 3, 4, 6}, 7.0f);
    ops::xl_bias_forward(x.q, x.k, x.r, x.u, x.v, scale, q_offset, bias);
    const auto got = bias.to_floats();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t j = 0; j < 6; ++j)
            EXPECT_NEAR(got[((b * 3 + h) * 4 + i) * 6 + j], want_bias(x, scale, b, h, i, j), 2e-5)
                << q_offset << " " << b << h << i << j;
  }
}

// The composed path CUDA runs (ops::gemm products, xl_shift_forward /
// backward), run here on the CPU, equals the CPU's fused loops: the bias,
// and every gradient added into nonzero buffers, at query offsets 0 and 3.
TEST(XlBias, TheComposedPathEqualsTheFusedOne) {
  for (int64_t q_offset : {0, 3}) {
    const Inputs x = inputs(3, 2, 5, 7, 4, q_offset, 40);
    const float scale = 0.5f;
    const Shape bs{3, 2, 5, 7};
    const Tensor g = test::random_tensor(bs, 49);  // [B, H, Tq, Tk]
    std::vector<std::vector<float>> got[2];
    for (int composed = 0; composed < 2; ++composed) {
      Tensor bias = Tensor::full(bs, 7.0f);
      Tensor dq = Tensor::full(x.q.shape(), 0.5f), dk = Tensor::full(x.k.shape(), -0.25f);
      Tensor du = Tensor::full(x.u.shape(), 0.125f), dv = Tensor::full(x.v.shape(), 1.0f);
      Tensor dr = Tensor::full(x.r.shape(), 9.0f);
      if (composed) {
        ops::detail::xl_bias_forward_composed(x.q, x.k, x.r, x.u, x.v, scale, q_offset, bias);
        ops::detail::xl_bias_backward_composed(x.q, x.k, x.r, x.u, x.v, scale, q_offset, g, dq, dk,
                                               dr, du, dv);
      } else {
        ops::xl_bias_forward(x.q, x.k, x.r, x.u, x.v, scale, q_offset, bias);
        ops::xl_bias_backward(x.q, x.k, x.r, x.u, x.v, scale, q_offset, g, dq, dk, dr, du, dv);
      }
      for (const Tensor* t : {&bias, &dq, &dk, &dr, &du, &dv})
        got[composed].push_back(t->to_floats());
    }
    const char* names[] = {"bias", "dq", "dk", "dr", "du", "dv"};
    for (size_t t = 0; t < got[0].size(); ++t)
      for (size_t e = 0; e < got[0][t].size(); ++e)
        ASSERT_NEAR(got[1][t][e], got[0][t][e], 2e-5 * std::max(1.0f, std::abs(got[0][t][e])))
            << names[t] << " " << e << " offset " << q_offset;
  }
}

// The loss sum(bias o w) for a fixed random w: its gradient through the op
// against central differences of every input.
TEST(XlBias, BackwardMatchesFiniteDifferences) {
  Inputs x = inputs(2, 2, 3, 5, 4, 2, 20);
  const float scale = 0.5f;
  const Shape bs{2, 2, 3, 5};
  const Tensor w = test::random_tensor(bs, 29);
  const auto wv = test::to_double(w);
  auto loss = [&]() {
    Tensor bias = Tensor::zeros(bs);
    ops::xl_bias_forward(x.q, x.k, x.r, x.u, x.v, scale, x.q_offset, bias);
    const auto bv = test::to_double(bias);
    double s = 0;
    for (size_t i = 0; i < bv.size(); ++i) s += bv[i] * wv[i];
    return s;
  };
  Tensor dq = Tensor::full(x.q.shape(), 0.5f), dk = Tensor::full(x.k.shape(), -0.25f);
  Tensor dr = Tensor::full(x.r.shape(), 9.0f);  // overwritten
  Tensor du = Tensor::full(x.u.shape(), 1.0f), dv = Tensor::full(x.v.shape(), 2.0f);
  ops::xl_bias_backward(x.q, x.k, x.r, x.u, x.v, scale, x.q_offset, w, dq, dk, dr, du, dv);
  // dq, dk, du, dv were added into (from 0.5, -0.25, 1, 2); dr written.
  const std::vector<std::tuple<Tensor*, Tensor*, float>> pairs = {{&x.q, &dq, 0.5f},
                                                                  {&x.k, &dk, -0.25f},
                                                                  {&x.r, &dr, 0.0f},
                                                                  {&x.u, &du, 1.0f},
                                                                  {&x.v, &dv, 2.0f}};
  for (const auto& [param, grad, start] : pairs) {
    float* p = param->data<float>();
    const auto g = grad->to_floats();
    for (int64_t e = 0; e < param->numel(); ++e) {
      const float keep = p[e];
      const float h = 1e-2f;
      p[e] = keep + h;
      const double up = loss();
      p[e] = keep - h;
      const double down = loss();
      p[e] = keep;
      EXPECT_NEAR(g[e] - start, (up - down) / (2 * h), 2e-3) << param->str() << " " << e;
    }
  }
}

// The terms read only the distance i - j: shifting the queries and the keys
// together (one more key before both) leaves each (i, j)'s bias the same.
TEST(XlBias, TermsDependOnlyOnTheDistance) {
  const Inputs x = inputs(1, 2, 5, 5, 4, 0, 40);
  Tensor bias = Tensor::zeros({1, 2, 5, 5});
  ops::xl_bias_forward(x.q, x.k, x.r, x.u, x.v, 0.5f, 0, bias);
  // The same queries at positions 1..5 against keys 1..5 of a 6-key
  // sequence whose key 0 is new: r gains rows for distances -5 and 5.
  const int64_t D = 4, H = 2;
  std::vector<float> k6(static_cast<size_t>(H * 6 * D));
  const auto k5 = x.k.to_floats();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t c = 0; c < D; ++c)
        k6[(h * 6 + j) * D + c] = j == 0 ? 3.0f : k5[(h * 5 + j - 1) * D + c];
  const auto r9 = x.r.to_floats();                                 // distances -4..4
  std::vector<float> r11(static_cast<size_t>(11 * H * D), -1.0f);  // distances -5..5
  for (int64_t l = 0; l < 9; ++l)
    for (int64_t e = 0; e < H * D; ++e) r11[(l + 1) * H * D + e] = r9[l * H * D + e];
  Tensor shifted = Tensor::zeros({1, 2, 5, 6});
  ops::xl_bias_forward(x.q, Tensor::from_floats(k6, {1, H, 6, D}),
                       Tensor::from_floats(r11, {11, H * D}), x.u, x.v, 0.5f, 1, shifted);
  const auto a = bias.to_floats(), s = shifted.to_floats();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_EQ(s[(h * 5 + i) * 6 + j + 1], a[(h * 5 + i) * 5 + j]) << h << i << j;
}

// The materialized core adds the dense bias to the scaled scores and gives
// back dS / scale; the flash core refuses it.
TEST(XlBias, TheMaterializedCoreTakesADenseBias) {
  const int64_t B = 2, H = 2, T = 6, D = 4;
  const Shape qs{B, H, T, D}, ss{B, H, T, T};
  Tensor q = test::random_tensor(qs, 50), k = test::random_tensor(qs, 51),
         v = test::random_tensor(qs, 52), dout = test::random_tensor(qs, 53);
  Tensor bias = test::random_tensor(ss, 54, -2.0f, 2.0f);
  ops::AttentionOptions o;
  o.scale = 0.5f;
  o.causal = true;
  o.key_lengths = Tensor::from_ints({6, 4}, {B});
  o.score_bias = bias;
  o.score_bias_grad = Tensor::full(ss, 9.0f);
  Tensor out = Tensor::zeros(qs), probs = Tensor::zeros(ss);
  ops::attention_forward(q, k, v, o, out, probs);
  Tensor dq = Tensor::zeros(qs), dk = Tensor::zeros(qs), dv = Tensor::zeros(qs);
  ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
  // Finite differences of sum(out o dout) in the bias.
  const auto dov = test::to_double(dout);
  auto loss = [&]() {
    Tensor o2 = Tensor::zeros(qs), p2 = Tensor::zeros(ss);
    ops::AttentionOptions f = o;
    f.score_bias_grad = Tensor();
    ops::attention_forward(q, k, v, f, o2, p2);
    const auto ov = test::to_double(o2);
    double s = 0;
    for (size_t i = 0; i < ov.size(); ++i) s += ov[i] * dov[i];
    return s;
  };
  const auto g = o.score_bias_grad.to_floats();
  float* pb = bias.data<float>();
  for (int64_t e = 0; e < bias.numel(); ++e) {
    const float keep = pb[e];
    pb[e] = keep + 1e-2f;
    const double up = loss();
    pb[e] = keep - 1e-2f;
    const double down = loss();
    pb[e] = keep;
    EXPECT_NEAR(g[e], (up - down) / 2e-2, 2e-3) << e;  // masked scores: 0 both ways
  }
  Tensor lse = Tensor::zeros({B, H, T});
  EXPECT_THROW(ops::flash_attention_forward(q, k, v, o, out, lse), Error);
  o.score_bias = Tensor::zeros({B, H, T, T + 1});
  EXPECT_THROW(ops::attention_forward(q, k, v, o, out, probs), Error);
}

}  // namespace
}  // namespace rotor
