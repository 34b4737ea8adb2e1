// Reference attention on the CPU against a double-precision reference with the
// same masks and Philox dropout; the backward against central differences.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "core/philox.h"
#include "ops/attention.h"
#include "ops/cpu_gemm.h"
#include "ops/cpu_rows.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Vec = std::vector<double>;
using ops::AttentionOptions;

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;  // empty: no padding
  float dropout;
};

using test::to_double;

// out [B, H, Tq, D] and probs (pre-dropout) [B, H, Tq, Tk] in double.
void attention_ref(const Case& c, const AttentionOptions& o, const Vec& q, const Vec& k,
                   const Vec& v, Vec& out, Vec& probs) {
  out.assign(static_cast<size_t>(c.B * c.H * c.Tq * c.D), 0.0);
  probs.assign(static_cast<size_t>(c.B * c.H * c.Tq * c.Tk), 0.0);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.Tq; ++i) {
        const int64_t bh = b * c.H + h;
        std::vector<bool> visible(c.Tk);
        Vec s(c.Tk, 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.Tk; ++j) {
          visible[j] = (c.key_lengths.empty() || j < c.key_lengths[b]) &&
                       (!c.causal || j <= i + (c.Tk - c.Tq));
          if (!visible[j]) continue;
          for (int64_t d = 0; d < c.D; ++d)
            s[j] += q[(bh * c.Tq + i) * c.D + d] * k[(bh * c.Tk + j) * c.D + d];
          s[j] *= o.scale;
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int64_t j = 0; j < c.Tk; ++j)
          if (visible[j]) z += std::exp(s[j] - mx);
        for (int64_t j = 0; j < c.Tk; ++j) {
          if (!visible[j]) continue;
          const uint64_t idx = static_cast<uint64_t>((bh * c.Tq + i) * c.Tk + j);
          const double p = std::exp(s[j] - mx) / z;
          probs[idx] = p;
          double m = 1.0;
          if (o.dropout > 0)
            m = philox_uniform(o.seed, o.stream, idx) >= o.dropout ? 1.0 / (1.0 - o.dropout) : 0.0;
          for (int64_t d = 0; d < c.D; ++d)
            out[(bh * c.Tq + i) * c.D + d] += p * m * v[(bh * c.Tk + j) * c.D + d];
        }
      }
}

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.key_lengths.empty())
    o.key_lengths = Tensor::from_ints(c.key_lengths, {static_cast<int64_t>(c.B)});
  o.dropout = c.dropout;
  o.seed = 1234;
  o.stream = rng_stream(3, 1, RngPurpose::AttentionDropout, 0);
  return o;
}

// Checks the forward and all three gradients of one configuration.
void check_case(const Case& c, uint64_t seed) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  Tensor q = test::random_tensor(qs, seed, -1.5f, 1.5f),
         k = test::random_tensor(ks, seed + 1, -1.5f, 1.5f);
  Tensor v = test::random_tensor(ks, seed + 2), dout = test::random_tensor(qs, seed + 3);
  const AttentionOptions o = options_for(c);
  const Vec qv = to_double(q), kv = to_double(k), vv = to_double(v), dov = to_double(dout);

  Tensor out = Tensor::full(qs, 7.0f), probs = Tensor::full({c.B, c.H, c.Tq, c.Tk}, 7.0f);
  ops::attention_forward(q, k, v, o, out, probs);
  Vec rout, rprobs;
  attention_ref(c, o, qv, kv, vv, rout, rprobs);
  EXPECT_LT(test::max_rel_error(out.to_floats(), rout), 1e-5);
  EXPECT_LT(test::max_rel_error(probs.to_floats(), rprobs), 1e-6);

  // L = sum(dout * out): central differences of the double reference.
  auto loss = [&](const Vec& a, const Vec& b, const Vec& cc) {
    Vec o2, p2;
    attention_ref(c, o, a, b, cc, o2, p2);
    double l = 0;
    for (size_t i = 0; i < o2.size(); ++i) l += dov[i] * o2[i];
    return l;
  };
  auto fd = [&](int which) {
    Vec a = qv, b = kv, cc = vv;
    Vec& x = which == 0 ? a : which == 1 ? b : cc;
    Vec g(x.size());
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i) {
      const double orig = x[i];
      x[i] = orig + h;
      const double lp = loss(a, b, cc);
      x[i] = orig - h;
      const double lm = loss(a, b, cc);
      x[i] = orig;
      g[i] = (lp - lm) / (2 * h);
    }
    return g;
  };
  Tensor dq = Tensor::full(qs, 7.0f), dk = Tensor::full(ks, 7.0f), dv = Tensor::full(ks, 7.0f);
  ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
  const Vec fq = fd(0), fk = fd(1), fv = fd(2);
  EXPECT_LT(test::max_rel_error(dq.to_floats(), fq), 1e-5);
  EXPECT_LT(test::max_rel_error(dk.to_floats(), fk), 1e-5);
  EXPECT_LT(test::max_rel_error(dv.to_floats(), fv), 1e-5);
  double nq = 0, nv = 0;
  for (double g : fq) nq += g * g;
  for (double g : fv) nv += g * g;
  EXPECT_GT(nq, 1e-3);  // the gradient check is not vacuous
  EXPECT_GT(nv, 1e-3);
}

TEST(Attention, Plain) {
  check_case({2, 2, 5, 5, 4, false, {}, 0.0f}, 10);
}

TEST(Attention, KeyPadding) {
  check_case({2, 2, 5, 6, 4, false, {6, 3}, 0.0f}, 20);
}

TEST(Attention, Causal) {
  check_case({1, 2, 6, 6, 4, true, {}, 0.0f}, 30);
}

// Fewer queries than keys (incremental decoding): query i sees keys j <= i + Tk - Tq.
TEST(Attention, CausalWithFewerQueriesAndPadding) {
  check_case({2, 1, 3, 7, 4, true, {7, 4}, 0.0f}, 40);
}

TEST(Attention, Dropout) {
  check_case({2, 2, 5, 5, 4, true, {5, 4}, 0.25f}, 50);
}

// Rows up to detail::kSmallRows take the core's own row loops, longer ones
// cpu_sgemm: both sides of the line, with head widths that leave a tail
// after the 8-lane dot products, and dropout.
TEST(Attention, ShortAndLongRowsOnBothProductPaths) {
  static_assert(ops::detail::kSmallRows == 12);
  check_case({2, 2, 12, 12, 13, false, {12, 7}, 0.0f}, 60);  // short rows: row loops
  check_case({1, 2, 12, 13, 13, false, {13}, 0.25f}, 62);    // Tk past the line: cpu_sgemm
  check_case({1, 2, 17, 17, 12, true, {}, 0.25f}, 64);
}

// The row loops against cpu_sgemm on strided operands, every transpose the
// core uses (beta 0, so C's old contents must not matter).
TEST(Attention, SmallProductsMatchTheGemm) {
  for (const auto [M, N, K] : {std::array{1, 1, 1}, {3, 5, 7}, {12, 9, 32}, {5, 12, 17}}) {
    const int ld = 40;  // every operand's leading dimension: strided rows
    const std::vector<float> a = test::random_floats(static_cast<size_t>(ld * 40), 101);
    const std::vector<float> b = test::random_floats(static_cast<size_t>(ld * 40), 102);
    for (const int form : {0, 1, 2, 3, 4, 5}) {  // NT, NN, TN; alpha 1, then 0.3
      std::vector<float> want(static_cast<size_t>(ld * 40), 0.0f), got(want.size(), 9.0f);
      const float alpha = form < 3 ? 1.0f : 0.3f;
      const CBLAS_TRANSPOSE ta = form % 3 == 2 ? CblasTrans : CblasNoTrans;
      const CBLAS_TRANSPOSE tb = form % 3 == 0 ? CblasTrans : CblasNoTrans;
      ops::cpu_sgemm(ta, tb, M, N, K, alpha, a.data(), ld, b.data(), ld, 0.0f, want.data(), ld);
      if (form % 3 == 0)
        ops::detail::small_gemm_nt(M, N, K, alpha, a.data(), ld, b.data(), ld, got.data(), ld);
      else
        ops::detail::small_gemm_xn(ta == CblasTrans, M, N, K, alpha, a.data(), ld, b.data(), ld,
                                   got.data(), ld);
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
          const size_t x = static_cast<size_t>(i * ld + j);
          EXPECT_NEAR(got[x], want[x], 1e-5f * (1.0f + std::fabs(want[x])))
              << "form " << form << " M " << M << " N " << N << " K " << K << " (" << i << ", " << j
              << ")";
        }
      EXPECT_EQ(got[static_cast<size_t>(M - 1) * ld + static_cast<size_t>(N)], 9.0f)
          << "written past row end, form " << form;
    }
  }
}

TEST(Attention, FullyMaskedRowsGiveZeros) {
  // Batch row 0 has no keys; with Tq > Tk the first Tq - Tk causal queries see none.
  const Case c{2, 1, 6, 3, 4, true, {0, 3}, 0.0f};
  check_case(c, 60);
  Tensor q = test::random_tensor({2, 1, 6, 4}, 61), k = test::random_tensor({2, 1, 3, 4}, 62);
  Tensor v = test::random_tensor({2, 1, 3, 4}, 63);
  Tensor out = Tensor::full({2, 1, 6, 4}, 7.0f), probs = Tensor::full({2, 1, 6, 3}, 7.0f);
  ops::attention_forward(q, k, v, options_for(c), out, probs);
  auto ov = out.to_floats(), pv = probs.to_floats();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(ov[i], 0.0f);           // batch 0
  for (int i = 24; i < 24 + 3 * 4; ++i) EXPECT_EQ(ov[i], 0.0f);  // batch 1, queries 0..2
  for (int i = 0; i < 18; ++i) EXPECT_EQ(pv[i], 0.0f);
  for (float x : ov) EXPECT_TRUE(std::isfinite(x));
}

TEST(Attention, DropoutMaskIsDeterministic) {
  const Case c{2, 2, 8, 8, 4, false, {}, 0.5f};
  Tensor q = test::random_tensor({2, 2, 8, 4}, 70), k = test::random_tensor({2, 2, 8, 4}, 71);
  Tensor v = test::random_tensor({2, 2, 8, 4}, 72);
  auto run = [&](uint64_t seed, uint64_t stream) {
    AttentionOptions o = options_for(c);
    o.seed = seed;
    o.stream = stream;
    Tensor out = Tensor::zeros({2, 2, 8, 4}), probs = Tensor::zeros({2, 2, 8, 8});
    ops::attention_forward(q, k, v, o, out, probs);
    return out.to_floats();
  };
  const auto a = run(5, 1), b = run(5, 1), other_stream = run(5, 2), other_seed = run(6, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other_stream);
  EXPECT_NE(a, other_seed);
  AttentionOptions none = options_for(c);
  none.dropout = 0.0f;
  Tensor out = Tensor::zeros({2, 2, 8, 4}), probs = Tensor::zeros({2, 2, 8, 8});
  ops::attention_forward(q, k, v, none, out, probs);
  EXPECT_NE(a, out.to_floats());  // dropout changed something
}

// Packed rows (nn::DocLayout's documents): the live [len, len] block of
// each row equals the usual computation's, to the last bit of the products'
// inputs (the products shrink, so within round-off); every padding query's
// output, and every gradient at a padding slot, is zero. Causal and not,
// with dropout (its mask keeps the full [Tq, Tk] layout).
TEST(Attention, PackedRowsComputeOnlyTheLiveBlock) {
  for (const bool causal : {false, true}) {
    const int64_t B = 3, H = 2, T = 6, D = 4;
    const Case c{B, H, T, T, D, causal, {6, 2, 4}, 0.25f};
    Tensor q = test::random_tensor({B, H, T, D}, 81), k = test::random_tensor({B, H, T, D}, 82);
    Tensor v = test::random_tensor({B, H, T, D}, 83);
    // A padding query has no gradient to pass back (DocLayout's zero row):
    // the full computation matches only then.
    std::vector<float> g = test::random_floats(static_cast<size_t>(B * H * T * D), 84);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = c.key_lengths[static_cast<size_t>(b)]; i < T; ++i)
          for (int64_t x = 0; x < D; ++x) g[static_cast<size_t>(((b * H + h) * T + i) * D + x)] = 0;
    Tensor dout = Tensor::from_floats(g, {B, H, T, D});
    auto run = [&](bool packed) {
      AttentionOptions o = options_for(c);
      o.seed = 9;
      o.stream = 3;
      o.packed_rows = packed;
      Tensor out = Tensor::full({B, H, T, D}, 7.0f), probs = Tensor::full({B, H, T, T}, 7.0f);
      ops::attention_forward(q, k, v, o, out, probs);
      Tensor dq = Tensor::full({B, H, T, D}, 7.0f), dk = Tensor::full({B, H, T, D}, 7.0f),
             dv = Tensor::full({B, H, T, D}, 7.0f);
      ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
      return std::vector<std::vector<float>>{out.to_floats(), dq.to_floats(), dk.to_floats(),
                                             dv.to_floats()};
    };
    const auto full = run(false), packed = run(true);
    for (size_t t = 0; t < full.size(); ++t)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < T; ++i)
            for (int64_t x = 0; x < D; ++x) {
              const size_t at = static_cast<size_t>(((b * H + h) * T + i) * D + x);
              const bool live = i < c.key_lengths[static_cast<size_t>(b)];
              // dv and dk at padding keys are zero either way; out and dq of
              // a padding query only with packed rows.
              if (live)
                EXPECT_NEAR(packed[t][at], full[t][at], 1e-5) << "tensor " << t << " b " << b;
              else
                EXPECT_EQ(packed[t][at], 0.0f) << "tensor " << t << " b " << b << " i " << i;
            }
  }
  AttentionOptions cross;
  cross.key_lengths = Tensor::from_ints({5}, {1});
  cross.packed_rows = true;
  Tensor q = Tensor::zeros({1, 1, 3, 4}), k = Tensor::zeros({1, 1, 5, 4});
  Tensor out = Tensor::zeros({1, 1, 3, 4}), probs = Tensor::zeros({1, 1, 3, 5});
  // Tq != Tk without query lengths; query lengths past Tq.
  EXPECT_THROW(ops::attention_forward(q, k, k, cross, out, probs), Error);
  cross.query_lengths = Tensor::from_ints({4}, {1});
  EXPECT_THROW(ops::attention_forward(q, k, k, cross, out, probs), Error);
}

// Cross-attention over packed pairs (variable-length translation): the live
// block of row b is [query_lengths[b], key_lengths[b]]; live queries match
// the full computation, padding queries give zeros, and with their dout zero
// (DocLayout's) the gradients match too.
TEST(Attention, PackedCrossRowsComputeTheirLiveBlock) {
  const int64_t B = 3, H = 2, Tq = 5, Tk = 7, D = 4;
  const std::vector<int32_t> q_len{5, 1, 3}, k_len{2, 7, 4};
  const Case c{B, H, Tq, Tk, D, false, k_len, 0.25f};
  Tensor q = test::random_tensor({B, H, Tq, D}, 91), k = test::random_tensor({B, H, Tk, D}, 92);
  Tensor v = test::random_tensor({B, H, Tk, D}, 93);
  std::vector<float> g = test::random_floats(static_cast<size_t>(B * H * Tq * D), 94);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = q_len[static_cast<size_t>(b)]; i < Tq; ++i)
        for (int64_t x = 0; x < D; ++x) g[static_cast<size_t>(((b * H + h) * Tq + i) * D + x)] = 0;
  Tensor dout = Tensor::from_floats(g, {B, H, Tq, D});
  auto run = [&](bool packed) {
    AttentionOptions o = options_for(c);
    o.seed = 9;
    o.stream = 3;
    o.packed_rows = packed;
    if (packed) o.query_lengths = Tensor::from_ints(q_len, {B});
    Tensor out = Tensor::full({B, H, Tq, D}, 7.0f), probs = Tensor::full({B, H, Tq, Tk}, 7.0f);
    ops::attention_forward(q, k, v, o, out, probs);
    Tensor dq = Tensor::full({B, H, Tq, D}, 7.0f), dk = Tensor::full({B, H, Tk, D}, 7.0f),
           dv = Tensor::full({B, H, Tk, D}, 7.0f);
    ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
    return std::vector<std::vector<float>>{out.to_floats(), dq.to_floats(), dk.to_floats(),
                                           dv.to_floats()};
  };
  const auto full = run(false), packed = run(true);
  for (size_t t = 0; t < full.size(); ++t) {
    const bool query_side = t < 2;  // out, dq: [B, H, Tq, D]; dk, dv: [B, H, Tk, D]
    const int64_t T = query_side ? Tq : Tk;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t x = 0; x < D; ++x) {
            const size_t at = static_cast<size_t>(((b * H + h) * T + i) * D + x);
            const bool live = i < (query_side ? q_len : k_len)[static_cast<size_t>(b)];
            if (live)
              EXPECT_NEAR(packed[t][at], full[t][at], 1e-5) << "tensor " << t << " b " << b;
            else
              EXPECT_EQ(packed[t][at], 0.0f) << "tensor " << t << " b " << b << " i " << i;
          }
  }
}

TEST(Attention, ArgumentErrors) {
  Tensor q = Tensor::zeros({1, 2, 3, 4}), k = Tensor::zeros({1, 2, 5, 4});
  Tensor v_bad = Tensor::zeros({1, 2, 5, 3});
  Tensor out = Tensor::zeros({1, 2, 3, 4}), probs = Tensor::zeros({1, 2, 3, 5});
  AttentionOptions o;
  EXPECT_THROW(ops::attention_forward(q, k, v_bad, o, out, probs), Error);
  Tensor probs_bad = Tensor::zeros({1, 2, 3, 4});
  EXPECT_THROW(ops::attention_forward(q, k, k, o, out, probs_bad), Error);
  o.key_lengths = Tensor::from_ints({6}, {1});  // longer than Tk
  EXPECT_THROW(ops::attention_forward(q, k, k, o, out, probs), Error);
  o.key_lengths = Tensor::from_ints({1, 2}, {2});
  EXPECT_THROW(ops::attention_forward(q, k, k, o, out, probs), Error);
  o.key_lengths = Tensor();
  o.dropout = 1.0f;
  EXPECT_THROW(ops::attention_forward(q, k, k, o, out, probs), Error);
}

}  // namespace
}  // namespace rotor
