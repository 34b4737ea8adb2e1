// ALiBi (core/alibi.h, ops::AttentionOptions::alibi): the paper's slopes for
// 8 and 12 heads; every CPU core (the materialized reference and the flash
// twin, forward and backward) against the bias materialized in double,
// causal and not, with key padding and Tq != Tk; the decoding step against
// the causal forward's last row; shifting every position by a constant
// changes nothing; and the bias does change attention.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/alibi.h"
#include "ops/attention.h"
#include "ops/decode.h"
#include "ops/flash_attention.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::AttentionOptions;

TEST(Alibi, SlopesAreThePapersFor8And12Heads) {
  // Press et al. 2022, section 3: 8 heads take 1/2, 1/4, ..., 1/256.
  for (int64_t h = 0; h < 8; ++h) EXPECT_EQ(alibi::slope(h, 8), std::pow(2.0, -(h + 1.0))) << h;
  // 12 heads: the 8 slopes of 8 heads, then every other slope of 16 heads
  // (2^-0.5 k), starting with the first: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  const double want12[] = {0.5,
                           0.25,
                           0.125,
                           0.0625,
                           0.03125,
                           0.015625,
                           0.0078125,
                           0.00390625,
                           0.70710678118654752,
                           0.35355339059327376,
                           0.17677669529663688,
                           0.08838834764831844};
  for (int64_t h = 0; h < 12; ++h) EXPECT_NEAR(alibi::slope(h, 12), want12[h], 1e-15) << h;
  // A power of two: 2^(-8i/n); 16 heads step by 2^-0.5 from 2^-0.5.
  for (int64_t h = 0; h < 16; ++h)
    EXPECT_NEAR(alibi::slope(h, 16), std::pow(2.0, -0.5 * (h + 1.0)), 1e-15) << h;
  EXPECT_EQ(alibi::slope(0, 1), std::pow(2.0, -8.0));
  EXPECT_EQ(alibi::bias(0.5f, 7, 3), -2.0f);
  EXPECT_EQ(alibi::bias(0.5f, 3, 7), -2.0f);  // symmetric
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;  // empty: no padding
};

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  o.alibi = true;
  if (!c.key_lengths.empty())
    o.key_lengths = Tensor::from_ints(c.key_lengths, {static_cast<int64_t>(c.B)});
  return o;
}

struct Reference {
  std::vector<double> out, dq, dk, dv;
};

// softmax(scale q.k + bias) v and its gradients for dout, with the [Tq, Tk]
// bias -slope_h |i + Tk - Tq - j| materialized, all in double.
Reference reference(const Case& c, const AttentionOptions& o, const Tensor& q, const Tensor& k,
                    const Tensor& v, const Tensor& dout) {
  const auto qv = test::to_double(q), kv = test::to_double(k), vv = test::to_double(v),
             dov = test::to_double(dout);
  Reference r;
  r.out.assign(qv.size(), 0.0);
  r.dq.assign(qv.size(), 0.0);
  r.dk.assign(kv.size(), 0.0);
  r.dv.assign(kv.size(), 0.0);
  const int64_t D = c.D;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h) {
      const int64_t bh = b * c.H + h;
      const double slope = std::pow(2.0, -8.0 * (h + 1) / static_cast<double>(c.H));  // H = 2^k
      std::vector<double> bias(static_cast<size_t>(c.Tq * c.Tk));                     // [Tq, Tk]
      for (int64_t i = 0; i < c.Tq; ++i)
        for (int64_t j = 0; j < c.Tk; ++j)
          bias[i * c.Tk + j] = -slope * std::abs(static_cast<double>(i + c.Tk - c.Tq - j));
      for (int64_t i = 0; i < c.Tq; ++i) {
        int64_t n = c.key_lengths.empty() ? c.Tk : c.key_lengths[static_cast<size_t>(b)];
        if (c.causal) n = std::min(n, std::max<int64_t>(0, i + c.Tk - c.Tq + 1));
        if (n == 0) continue;
        const double* qi = qv.data() + (bh * c.Tq + i) * D;
        const double* doi = dov.data() + (bh * c.Tq + i) * D;
        std::vector<double> p(static_cast<size_t>(n)), dp(static_cast<size_t>(n));
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t x = 0; x < D; ++x) s += qi[x] * kv[(bh * c.Tk + j) * D + x];
          p[j] = s * o.scale + bias[i * c.Tk + j];
          mx = std::max(mx, p[j]);
        }
        double z = 0;
        for (double& x : p) z += (x = std::exp(x - mx));
        double rowsum = 0;
        for (int64_t j = 0; j < n; ++j) {
          p[j] /= z;
          double d = 0;
          for (int64_t x = 0; x < D; ++x) {
            r.out[(bh * c.Tq + i) * D + x] += p[j] * vv[(bh * c.Tk + j) * D + x];
            r.dv[(bh * c.Tk + j) * D + x] += p[j] * doi[x];
            d += doi[x] * vv[(bh * c.Tk + j) * D + x];
          }
          dp[j] = d;
          rowsum += p[j] * d;
        }
        for (int64_t j = 0; j < n; ++j) {
          const double ds = p[j] * (dp[j] - rowsum) * o.scale;
          for (int64_t x = 0; x < D; ++x) {
            r.dq[(bh * c.Tq + i) * D + x] += ds * kv[(bh * c.Tk + j) * D + x];
            r.dk[(bh * c.Tk + j) * D + x] += ds * qi[x];
          }
        }
      }
    }
  return r;
}

// Both CPU cores, forward and backward, against the double reference.
void check_cores(const Case& c, uint64_t seed, double tol = 3e-5) {
  SCOPED_TRACE(testing::Message() << "B " << c.B << " H " << c.H << " Tq " << c.Tq << " Tk " << c.Tk
                                  << " D " << c.D << " causal " << c.causal);
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  Tensor q = test::random_tensor(qs, seed, -2.0f, 2.0f), k = test::random_tensor(ks, seed + 1);
  Tensor v = test::random_tensor(ks, seed + 2), dout = test::random_tensor(qs, seed + 3);
  const AttentionOptions o = options_for(c);
  const Reference want = reference(c, o, q, k, v, dout);

  Tensor out = Tensor::full(qs, 7.0f), probs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, o, out, probs);
  Tensor dq = Tensor::full(qs, 7.0f), dk = Tensor::full(ks, 7.0f), dv = Tensor::full(ks, 7.0f);
  ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
  EXPECT_LT(test::max_rel_error(out.to_floats(), want.out), tol) << "reference out";
  EXPECT_LT(test::max_rel_error(dq.to_floats(), want.dq), tol) << "reference dq";
  EXPECT_LT(test::max_rel_error(dk.to_floats(), want.dk), tol) << "reference dk";
  EXPECT_LT(test::max_rel_error(dv.to_floats(), want.dv), tol) << "reference dv";

  Tensor fout = Tensor::full(qs, 7.0f), lse = Tensor::full({c.B, c.H, c.Tq}, 7.0f);
  ops::flash_attention_forward(q, k, v, o, fout, lse);
  Tensor fdq = Tensor::full(qs, 7.0f), fdk = Tensor::full(ks, 7.0f), fdv = Tensor::full(ks, 7.0f);
  ops::flash_attention_backward(q, k, v, fout, lse, dout, o, fdq, fdk, fdv);
  EXPECT_LT(test::max_rel_error(fout.to_floats(), want.out), tol) << "flash out";
  EXPECT_LT(test::max_rel_error(fdq.to_floats(), want.dq), tol) << "flash dq";
  EXPECT_LT(test::max_rel_error(fdk.to_floats(), want.dk), tol) << "flash dk";
  EXPECT_LT(test::max_rel_error(fdv.to_floats(), want.dv), tol) << "flash dv";

  // The bias is there: without it the output moves well beyond the tolerance.
  AttentionOptions plain = o;
  plain.alibi = false;
  Tensor pout = Tensor::zeros(qs), pprobs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, plain, pout, pprobs);
  EXPECT_GT(test::max_rel_error(pout.to_floats(), want.out), 100 * tol);
}

TEST(Alibi, CoresMatchTheMaterializedBiasNonCausal) {
  check_cores({2, 4, 9, 9, 8, false, {}}, 10);
  check_cores({2, 2, 70, 70, 16, false, {70, 41}}, 11);  // past one 64-wide tile, padded
}

TEST(Alibi, CoresMatchTheMaterializedBiasCausal) {
  check_cores({3, 8, 9, 9, 8, true, {9, 4, 1}}, 20);
  check_cores({2, 2, 130, 130, 8, true, {130, 77}}, 21);
  check_cores({2, 2, 3, 80, 8, true, {80, 70}}, 22);  // fewer queries than keys (cached prefix)
}

// Adding one constant to every position (queries and keys) changes nothing:
// the bias reads only the distance.
TEST(Alibi, ShiftingAllPositionsChangesNothing) {
  const Case c{2, 4, 70, 70, 8, true, {70, 50}};
  const Shape qs = {c.B, c.H, c.Tq, c.D};
  Tensor q = test::random_tensor(qs, 5, -2.0f, 2.0f), k = test::random_tensor(qs, 6),
         v = test::random_tensor(qs, 7);
  AttentionOptions o = options_for(c);
  Tensor out0 = Tensor::zeros(qs), lse0 = Tensor::zeros({c.B, c.H, c.Tq});
  ops::flash_attention_forward(q, k, v, o, out0, lse0);
  Tensor ref0 = Tensor::zeros(qs), probs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, o, ref0, probs);
  for (int64_t shift : {1, 37, 100000}) {
    o.bias_q_offset = o.bias_k_offset = shift;
    Tensor out = Tensor::zeros(qs), lse = Tensor::zeros({c.B, c.H, c.Tq});
    ops::flash_attention_forward(q, k, v, o, out, lse);
    EXPECT_EQ(out.to_floats(), out0.to_floats()) << shift;
    EXPECT_EQ(lse.to_floats(), lse0.to_floats()) << shift;
    Tensor ref = Tensor::zeros(qs);
    ops::attention_forward(q, k, v, o, ref, probs);
    EXPECT_EQ(ref.to_floats(), ref0.to_floats()) << shift;
  }
  // Shifting the keys alone moves every distance: the output changes.
  o.bias_q_offset = 0;
  o.bias_k_offset = 3;
  Tensor moved = Tensor::zeros(qs);
  ops::attention_forward(q, k, v, o, moved, probs);
  EXPECT_GT(test::max_rel_error(moved.to_floats(), ref0.to_floats()), 1e-3);
}

// Row t of x [B, H, T, D]: [B, H, 1, D].
Tensor row_at(const Tensor& x, int64_t t) {
  const int64_t BH = x.size(0) * x.size(1), T = x.size(2), D = x.size(3);
  const auto v = x.to_floats();
  std::vector<float> r(static_cast<size_t>(BH * D));
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t c = 0; c < D; ++c) r[bh * D + c] = v[(bh * T + t) * D + c];
  return Tensor::from_floats(r, {x.size(0), x.size(1), 1, D});
}

// The decoding step (query at position length - 1 against the cache) gives
// the causal forward's row at that position.
TEST(Alibi, DecodeStepEqualsTheCausalForward) {
  const int64_t B = 2, H = 4, T = 11, D = 8, Tmax = 16;
  Tensor q = test::random_tensor({B, H, T, D}, 40, -2.0f, 2.0f),
         k = test::random_tensor({B, H, T, D}, 41), v = test::random_tensor({B, H, T, D}, 42);
  AttentionOptions o;
  o.causal = true;
  o.alibi = true;
  Tensor full = Tensor::zeros({B, H, T, D}), probs = Tensor::zeros({B, H, T, T});
  ops::attention_forward(q, k, v, o, full, probs);
  Tensor kc = Tensor::zeros({B, H, Tmax, D}), vc = Tensor::zeros({B, H, Tmax, D});
  const auto fv = full.to_floats();
  for (int64_t t = 0; t < T; ++t) {
    ops::kv_cache_write(row_at(k, t), kc, t);
    ops::kv_cache_write(row_at(v, t), vc, t);
    Tensor out = Tensor::zeros({B, H, 1, D});
    ops::decode_attention(row_at(q, t), kc, vc, t + 1, out, true);
    const auto ov = out.to_floats();
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t x = 0; x < D; ++x)
        EXPECT_NEAR(ov[bh * D + x], fv[(bh * T + t) * D + x], 2e-6) << "t " << t;
  }
}

}  // namespace
}  // namespace rotor
