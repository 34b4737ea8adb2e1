// The CPU flash attention core (the twin of kernels/flash_attention.cu)
// against the reference attention: output, log-sum-exp, all three gradients,
// masks, Tq != Tk, sequence lengths around the 64-wide tiles, head dims
// 32/64/128 and identical dropout masks. Also: a constant RoPE shift leaves
// attention unchanged, step-by-step decoding with the kv cache equals the
// causal forward, and the layer gives the same results with either core.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nn/attention.h"
#include "nn/context.h"
#include "nn/parameters.h"
#include "ops/attention.h"
#include "ops/decode.h"
#include "ops/flash_attention.h"
#include "ops/heads.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::AttentionOptions;

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;  // empty: no padding
  float dropout;
};

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.key_lengths.empty())
    o.key_lengths = Tensor::from_ints(c.key_lengths, {static_cast<int64_t>(c.B)});
  o.dropout = c.dropout;
  o.seed = 99;
  o.stream = rng_stream(7, 2, RngPurpose::AttentionDropout, 0);
  return o;
}

// log sum_j exp(scale q_i.k_j) over the visible keys, in double (-inf: none).
std::vector<double> lse_ref(const Case& c, const AttentionOptions& o, const Tensor& q,
                            const Tensor& k) {
  const auto qv = q.to_floats(), kv = k.to_floats();
  std::vector<double> out(static_cast<size_t>(c.B * c.H * c.Tq));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.Tq; ++i) {
        const int64_t bh = b * c.H + h;
        int64_t n = c.key_lengths.empty() ? c.Tk : c.key_lengths[static_cast<size_t>(b)];
        if (c.causal) n = std::min(n, std::max<int64_t>(0, i + c.Tk - c.Tq + 1));
        std::vector<double> s(static_cast<size_t>(n));
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (int64_t x = 0; x < c.D; ++x)
            d += static_cast<double>(qv[(bh * c.Tq + i) * c.D + x]) * kv[(bh * c.Tk + j) * c.D + x];
          s[j] = d * o.scale;
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (double x : s) z += std::exp(x - mx);
        out[static_cast<size_t>(bh * c.Tq + i)] = n == 0 ? -INFINITY : mx + std::log(z);
      }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double w = 0;
  for (size_t i = 0; i < a.size(); ++i) w = std::max(w, std::abs(static_cast<double>(a[i]) - b[i]));
  return w;
}

// Flash forward and backward against the reference op on the same inputs.
void check_case(const Case& c, uint64_t seed, double tol = 2e-5) {
  SCOPED_TRACE(testing::Message() << "B " << c.B << " H " << c.H << " Tq " << c.Tq << " Tk " << c.Tk
                                  << " D " << c.D << " causal " << c.causal << " dropout "
                                  << c.dropout);
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  // Spread queries widely so the softmax is far from uniform.
  Tensor q = test::random_tensor(qs, seed, -3.0f, 3.0f), k = test::random_tensor(ks, seed + 1);
  Tensor v = test::random_tensor(ks, seed + 2), dout = test::random_tensor(qs, seed + 3);
  const AttentionOptions o = options_for(c);

  Tensor ref_out = Tensor::zeros(qs), probs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, o, ref_out, probs);
  Tensor out = Tensor::full(qs, 7.0f), lse = Tensor::full({c.B, c.H, c.Tq}, 7.0f);
  ops::flash_attention_forward(q, k, v, o, out, lse);
  EXPECT_LT(test::max_rel_error(out.to_floats(), ref_out.to_floats()), tol);
  const auto lref = lse_ref(c, o, q, k);
  const auto lgot = lse.to_floats();
  for (size_t i = 0; i < lref.size(); ++i) {
    if (std::isinf(lref[i])) {
      EXPECT_TRUE(std::isinf(lgot[i]) && lgot[i] < 0) << "row " << i;
    } else {
      EXPECT_NEAR(lgot[i], lref[i], 1e-5 * std::max(1.0, std::abs(lref[i]))) << "row " << i;
    }
  }

  Tensor rdq = Tensor::zeros(qs), rdk = Tensor::zeros(ks), rdv = Tensor::zeros(ks);
  ops::attention_backward(q, k, v, probs, dout, o, rdq, rdk, rdv);
  Tensor dq = Tensor::full(qs, 7.0f), dk = Tensor::full(ks, 7.0f), dv = Tensor::full(ks, 7.0f);
  ops::flash_attention_backward(q, k, v, out, lse, dout, o, dq, dk, dv);
  EXPECT_LT(test::max_rel_error(dq.to_floats(), rdq.to_floats()), tol);
  EXPECT_LT(test::max_rel_error(dk.to_floats(), rdk.to_floats()), tol);
  EXPECT_LT(test::max_rel_error(dv.to_floats(), rdv.to_floats()), tol);
}

TEST(FlashAttention, PlainSmall) {
  check_case({2, 2, 5, 5, 4, false, {}, 0.0f}, 10);
}

TEST(FlashAttention, KeyPaddingAndCausal) {
  check_case({3, 2, 9, 9, 8, true, {9, 4, 1}, 0.0f}, 20);
  check_case({2, 1, 70, 70, 16, false, {70, 65}, 0.0f}, 21);
}

TEST(FlashAttention, FewerQueriesThanKeys) {
  check_case({2, 2, 3, 130, 16, true, {130, 70}, 0.0f}, 30);
  check_case({1, 2, 65, 200, 8, false, {}, 0.0f}, 31);
}

TEST(FlashAttention, MoreQueriesThanKeysHasFullyMaskedRows) {
  // Causal with Tq > Tk: the first Tq - Tk queries see no key; batch 1 has none at all.
  const Case c{2, 1, 70, 5, 8, true, {5, 0}, 0.0f};
  check_case(c, 40);
  const Shape qs = {2, 1, 70, 8}, ks = {2, 1, 5, 8};
  Tensor q = test::random_tensor(qs, 41), k = test::random_tensor(ks, 42);
  Tensor v = test::random_tensor(ks, 43), dout = test::random_tensor(qs, 44);
  Tensor out = Tensor::zeros(qs), lse = Tensor::zeros({2, 1, 70});
  const AttentionOptions o = options_for(c);
  ops::flash_attention_forward(q, k, v, o, out, lse);
  Tensor dq = Tensor::full(qs, 7.0f), dk = Tensor::full(ks, 7.0f), dv = Tensor::full(ks, 7.0f);
  ops::flash_attention_backward(q, k, v, out, lse, dout, o, dq, dk, dv);
  const auto ov = out.to_floats(), dqv = dq.to_floats(), dkv = dk.to_floats();
  for (int64_t i = 0; i < 65; ++i)
    for (int64_t x = 0; x < 8; ++x) {
      EXPECT_EQ(ov[i * 8 + x], 0.0f);
      EXPECT_EQ(dqv[i * 8 + x], 0.0f);
    }
  for (int64_t e = 70 * 8; e < 140 * 8; ++e) EXPECT_EQ(ov[e], 0.0f);  // batch 1
  for (int64_t e = 5 * 8; e < 10 * 8; ++e) EXPECT_EQ(dkv[e], 0.0f);   // batch 1 keys
  for (float x : dqv) EXPECT_TRUE(std::isfinite(x));
}

TEST(FlashAttention, SequenceLengths) {
  for (int64_t T : {1, 7, 129, 513}) {
    const int64_t B = T >= 513 ? 1 : 2;
    check_case({B, 2, T, T, 32, false, {}, 0.0f}, 50 + T);
    check_case({B, 1, T, T, 32, true, {}, 0.0f}, 60 + T);
    std::vector<int32_t> lens(static_cast<size_t>(B), static_cast<int32_t>(T));
    lens.back() = static_cast<int32_t>((T + 1) / 2);
    check_case({B, 1, T, T, 32, false, lens, 0.0f}, 70 + T);
  }
}

TEST(FlashAttention, HeadDims) {
  for (int64_t D : {32, 64, 128}) check_case({2, 2, 100, 100, D, true, {100, 37}, 0.0f}, 80 + D);
}

TEST(FlashAttention, DropoutMasksMatchTheReference) {
  check_case({2, 2, 70, 70, 32, false, {70, 50}, 0.2f}, 90);
  check_case({1, 2, 40, 130, 64, true, {}, 0.5f}, 91);
}

TEST(FlashAttention, ArgumentErrors) {
  Tensor q = Tensor::zeros({1, 2, 3, 4}), k = Tensor::zeros({1, 2, 5, 4});
  Tensor out = Tensor::zeros({1, 2, 3, 4}), lse = Tensor::zeros({1, 2, 3});
  AttentionOptions o;
  Tensor bad_lse = Tensor::zeros({1, 2, 5});
  EXPECT_THROW(ops::flash_attention_forward(q, k, k, o, out, bad_lse), Error);
  Tensor f16_lse = Tensor::zeros({1, 2, 3}, DType::F16);
  EXPECT_THROW(ops::flash_attention_forward(q, k, k, o, out, f16_lse), Error);
  o.key_lengths = Tensor::from_ints({6}, {1});
  EXPECT_THROW(ops::flash_attention_forward(q, k, k, o, out, lse), Error);
  o.key_lengths = Tensor();
  o.dropout = 1.0f;
  EXPECT_THROW(ops::flash_attention_forward(q, k, k, o, out, lse), Error);
}

// RoPE makes q_m.k_n depend on n - m only (RoFormer eq. 16): shifting every
// position by a constant leaves the attention output unchanged.
TEST(FlashAttention, RopeShiftLeavesOutputUnchanged) {
  const int64_t B = 2, T = 70, H = 2, D = 32;
  Tensor x = test::random_tensor({B, T, 3 * H * D}, 100, -2.0f, 2.0f);
  auto run = [&](int64_t offset) {
    ops::SplitHeadsOptions so;
    so.n_heads = H;
    so.rope_parts = 2;
    so.position_offset = offset;
    so.part0_scale = 1.0f / std::sqrt(static_cast<float>(D));
    std::vector<Tensor> parts{Tensor::zeros({B, H, T, D}), Tensor::zeros({B, H, T, D}),
                              Tensor::zeros({B, H, T, D})};
    ops::split_heads_forward(x, parts, so);
    AttentionOptions o;
    o.causal = true;
    o.key_lengths = Tensor::from_ints({70, 33}, {B});
    Tensor out = Tensor::zeros({B, H, T, D}), lse = Tensor::zeros({B, H, T});
    ops::flash_attention_forward(parts[0], parts[1], parts[2], o, out, lse);
    return out.to_floats();
  };
  const auto a = run(0), b = run(37), c = run(1000);
  EXPECT_LT(max_abs_diff(a, b), 2e-5);
  EXPECT_LT(max_abs_diff(a, c), 2e-5);
}

// Incremental decoding: writing each key/value into the cache and attending
// with one query at a time equals the causal forward over the whole sequence.
TEST(FlashAttention, DecodeStepsMatchCausalForward) {
  const int64_t B = 2, H = 2, T = 20, D = 32, Tmax = 24;
  Tensor q = test::random_tensor({B, H, T, D}, 110, -2.0f, 2.0f);
  Tensor k = test::random_tensor({B, H, T, D}, 111), v = test::random_tensor({B, H, T, D}, 112);
  AttentionOptions o;
  o.causal = true;
  Tensor out = Tensor::zeros({B, H, T, D}), lse = Tensor::zeros({B, H, T});
  ops::flash_attention_forward(q, k, v, o, out, lse);
  const auto full = out.to_floats(), qv = q.to_floats(), kv = k.to_floats(), vv = v.to_floats();
  auto row = [&](const std::vector<float>& src, int64_t t) {  // [B, H, 1, D] at position t
    std::vector<float> r(static_cast<size_t>(B * H * D));
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t x = 0; x < D; ++x) r[bh * D + x] = src[(bh * T + t) * D + x];
    return Tensor::from_floats(r, {B, H, 1, D});
  };
  Tensor kc = Tensor::zeros({B, H, Tmax, D}), vc = Tensor::zeros({B, H, Tmax, D});
  for (int64_t t = 0; t < T; ++t) {
    ops::kv_cache_write(row(kv, t), kc, t);
    ops::kv_cache_write(row(vv, t), vc, t);
    Tensor o1 = Tensor::zeros({B, H, 1, D});
    ops::decode_attention(row(qv, t), kc, vc, t + 1, o1);
    const auto step = o1.to_floats();
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t x = 0; x < D; ++x)
        ASSERT_NEAR(step[bh * D + x], full[(bh * T + t) * D + x], 2e-5) << "t " << t;
  }
}

// The layer with impl Rotor (flash core) and Reference gives the same output,
// input gradient and parameter gradients on the CPU.
TEST(FlashAttention, LayerImplsAgree) {
  const int64_t B = 2, T = 67, d = 64;
  Tensor x = test::random_tensor({B, T, d}, 120);
  Tensor dy = test::random_tensor({B, T, d}, 121);
  Tensor lengths = Tensor::from_ints({67, 40}, {B});
  struct Result {
    std::vector<float> y, dx, grads;
  };
  auto run = [&](nn::AttentionImpl impl, bool causal, float dropout, bool rope_in_kernel = false) {
    nn::ParameterStore store;
    nn::MultiHeadAttentionOptions cfg;
    cfg.d_model = d;
    cfg.n_heads = 2;
    cfg.causal = causal;
    cfg.rope = true;
    cfg.dropout = dropout;
    cfg.impl = impl;
    cfg.rope_in_kernel = rope_in_kernel;
    nn::MultiHeadAttention attn(store, {"q", "k", "v", "o"}, cfg, false);
    store.allocate(Device::cpu());
    store.initialize(5);
    store.zero_grad();
    nn::Context ctx;
    ctx.training = dropout > 0.0f;
    ctx.seed = 17;
    Tensor y = attn.forward(x, Tensor(), lengths, ctx);
    Tensor dx = attn.backward(dy, nullptr);
    return Result{y.to_floats(), dx.to_floats(), store.grads().to_floats()};
  };
  for (bool causal : {false, true})
    for (float dropout : {0.0f, 0.1f}) {
      SCOPED_TRACE(testing::Message() << "causal " << causal << " dropout " << dropout);
      const Result a = run(nn::AttentionImpl::Reference, causal, dropout);
      const Result b = run(nn::AttentionImpl::Rotor, causal, dropout);
      const Result c = run(nn::AttentionImpl::Auto, causal, dropout);
      EXPECT_LT(test::max_rel_error(b.y, a.y), 1e-5);
      EXPECT_LT(test::max_rel_error(b.dx, a.dx), 1e-5);
      EXPECT_LT(test::max_rel_error(b.grads, a.grads), 1e-4);
      EXPECT_EQ(a.y, c.y);  // auto takes the materialized (BLAS) path on the CPU
      // attention.rope_in_kernel: the flash core rotates q, k (and dq, dk
      // back), the split only splits; the same layer within rounding.
      const Result d = run(nn::AttentionImpl::Rotor, causal, dropout, true);
      EXPECT_NE(d.y, b.y);  // a different order of operations: the option took effect
      EXPECT_LT(test::max_rel_error(d.y, a.y), 1e-5);
      EXPECT_LT(test::max_rel_error(d.dx, a.dx), 1e-5);
      EXPECT_LT(test::max_rel_error(d.grads, a.grads), 1e-4);
      // The reference core cannot rotate: the split keeps RoPE, bitwise as without the option.
      EXPECT_EQ(run(nn::AttentionImpl::Reference, causal, dropout, true).y, a.y);
    }
  EXPECT_THROW(run(nn::AttentionImpl::Cudnn, false, 0.0f), Error);
}

}  // namespace
}  // namespace rotor
