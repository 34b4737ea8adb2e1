// The flash core's variable-length layout (ops::AttentionOptions::cu_seqlens_q,
// FlashAttention's cu_seqlens) on the CPU twin: documents laid end to end get
// bit for bit what the same documents regrouped, one a row of the longest's
// length with key lengths, get -- forward and backward, causal or not, with
// dropout, ALiBi, T5's bias and its gradient, RoPE in the core, documents of
// one token, one filling the longest length, many short ones, and a
// cross-attention with other key lengths. The CUDA kernels' emulations
// (tests/emulation) hold them to the same contract. Also the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "support/test_util.h"
#include "support/varlen_layout.h"

namespace rotor {
namespace {

using ops::AttentionOptions;
using test::longest;
using test::offsets;
using test::random_floats;
using test::random_tensor;
using test::regroup;

struct VarlenCase {
  std::string name;
  std::vector<int32_t> q_lengths;
  std::vector<int32_t> k_lengths;  // empty: the queries' (self-attention)
  bool causal = false;
  bool alibi = false;
  bool t5 = false;
  bool rope = false;
  float dropout = 0.0f;
  int64_t H = 2, D = 32;
};

// gtest prints a failing case by its name.
void PrintTo(const VarlenCase& c, std::ostream* os) {
  *os << c.name;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Every element of `got` (end to end, [H, total, W]) equals the regrouped
// run's document rows (test::stream_of) bit for bit.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& regrouped,
                      const std::vector<int32_t>& cu, int64_t H, int64_t L, int64_t W,
                      const std::string& what) {
  const std::vector<float> want = test::stream_of(regrouped, cu, H, L, W);
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (size_t e = 0; e < got.size(); ++e)
    if (!same_bits(got[e], want[e]) && bad++ < 3)
      ADD_FAILURE() << what << ": stream element " << e << " (row " << e / W << "): " << got[e]
                    << " (end to end) vs " << want[e] << " (regrouped)";
  EXPECT_EQ(bad, 0) << what;
}

class FlashVarlen : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(FlashVarlen, DocumentsEndToEndGiveTheRegroupedBits) {
  const VarlenCase& c = GetParam();
  const std::vector<int32_t>& ql = c.q_lengths;
  const std::vector<int32_t>& kl = c.k_lengths.empty() ? c.q_lengths : c.k_lengths;
  const int64_t N = static_cast<int64_t>(ql.size()), H = c.H, D = c.D;
  const std::vector<int32_t> cu_q = offsets(ql), cu_k = offsets(kl);
  const int64_t Lq = longest(ql), Lk = longest(kl), total_q = cu_q.back(), total_k = cu_k.back();

  // The stream's tensors, and the regrouped ones: padding rows hold other
  // finite values (queries, keys, values) and zeros (dout).
  const auto sq = random_floats(static_cast<size_t>(H * total_q * D), 1);
  const auto sk = random_floats(static_cast<size_t>(H * total_k * D), 2);
  const auto sv = random_floats(static_cast<size_t>(H * total_k * D), 3);
  const auto sdo = random_floats(static_cast<size_t>(H * total_q * D), 4);
  auto rq = random_floats(static_cast<size_t>(N * H * Lq * D), 5);
  auto rk = random_floats(static_cast<size_t>(N * H * Lk * D), 6);
  auto rv = random_floats(static_cast<size_t>(N * H * Lk * D), 7);
  std::vector<float> rdo(static_cast<size_t>(N * H * Lq * D), 0.0f);
  regroup(sq, rq, cu_q, H, Lq, D);
  regroup(sk, rk, cu_k, H, Lk, D);
  regroup(sv, rv, cu_k, H, Lk, D);
  regroup(sdo, rdo, cu_q, H, Lq, D);

  AttentionOptions base;
  base.scale = 1.0f / std::sqrt(static_cast<float>(D));
  base.causal = c.causal;
  base.alibi = c.alibi;
  base.dropout = c.dropout;
  base.seed = 11;
  base.stream = 5;
  const int64_t rel_max = 6;
  if (c.t5) {
    base.rel_bias = Tensor::from_floats(
        random_floats(static_cast<size_t>((2 * rel_max + 1) * H), 8), {2 * rel_max + 1, H});
    base.rel_max = rel_max;
  }
  if (c.rope) base.rope = true;

  AttentionOptions vo = base, ro = base;
  vo.cu_seqlens_q = Tensor::from_ints(cu_q, {N + 1});
  vo.cu_seqlens_k = Tensor::from_ints(cu_k, {N + 1});
  vo.max_seqlen_q = Lq;
  vo.max_seqlen_k = Lk;
  ro.key_lengths = Tensor::from_ints(kl, {N});
  if (c.t5) {
    vo.rel_bias_grad = Tensor::zeros({2 * rel_max + 1, H}, DType::F32, Device::cpu());
    ro.rel_bias_grad = Tensor::zeros({2 * rel_max + 1, H}, DType::F32, Device::cpu());
  }

  const Tensor q = Tensor::from_floats(sq, {1, H, total_q, D});
  const Tensor k = Tensor::from_floats(sk, {1, H, total_k, D});
  const Tensor v = Tensor::from_floats(sv, {1, H, total_k, D});
  const Tensor dout = Tensor::from_floats(sdo, {1, H, total_q, D});
  Tensor out = Tensor::empty(q.shape(), DType::F32, Device::cpu());
  Tensor lse = Tensor::empty({1, H, total_q}, DType::F32, Device::cpu());
  ops::flash_attention_forward(q, k, v, vo, out, lse);
  Tensor dq = Tensor::empty(q.shape(), DType::F32, Device::cpu());
  Tensor dk = Tensor::empty(k.shape(), DType::F32, Device::cpu());
  Tensor dv = Tensor::empty(v.shape(), DType::F32, Device::cpu());
  ops::flash_attention_backward(q, k, v, out, lse, dout, vo, dq, dk, dv);

  const Tensor rqt = Tensor::from_floats(rq, {N, H, Lq, D});
  const Tensor rkt = Tensor::from_floats(rk, {N, H, Lk, D});
  const Tensor rvt = Tensor::from_floats(rv, {N, H, Lk, D});
  const Tensor rdot = Tensor::from_floats(rdo, {N, H, Lq, D});
  Tensor rout = Tensor::empty(rqt.shape(), DType::F32, Device::cpu());
  Tensor rlse = Tensor::empty({N, H, Lq}, DType::F32, Device::cpu());
  ops::flash_attention_forward(rqt, rkt, rvt, ro, rout, rlse);
  Tensor rdq = Tensor::empty(rqt.shape(), DType::F32, Device::cpu());
  Tensor rdk = Tensor::empty(rkt.shape(), DType::F32, Device::cpu());
  Tensor rdv = Tensor::empty(rvt.shape(), DType::F32, Device::cpu());
  ops::flash_attention_backward(rqt, rkt, rvt, rout, rlse, rdot, ro, rdq, rdk, rdv);

  expect_same_bits(out.to_floats(), rout.to_floats(), cu_q, H, Lq, D, "out");
  expect_same_bits(lse.to_floats(), rlse.to_floats(), cu_q, H, Lq, 1, "lse");
  expect_same_bits(dq.to_floats(), rdq.to_floats(), cu_q, H, Lq, D, "dq");
  expect_same_bits(dk.to_floats(), rdk.to_floats(), cu_k, H, Lk, D, "dk");
  expect_same_bits(dv.to_floats(), rdv.to_floats(), cu_k, H, Lk, D, "dv");
  if (c.t5) {
    const auto a = vo.rel_bias_grad.to_floats(), b = ro.rel_bias_grad.to_floats();
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(same_bits(a[i], b[i]))
          << "T5 table gradient " << i << ": " << a[i] << " vs " << b[i];
  }
  // Something was computed: a live output row is not all zeros.
  double mass = 0;
  for (float x : out.to_floats()) mass += std::abs(x);
  EXPECT_GT(mass, 0.0);
}

std::vector<int32_t> many_short() {
  std::vector<int32_t> l;
  for (int i = 0; i < 20; ++i) l.push_back(1 + (i * 7) % 9);
  return l;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FlashVarlen,
    ::testing::Values(
        VarlenCase{"plain", {5, 70, 1, 64}, {}, false},
        VarlenCase{"causal", {5, 70, 1, 64}, {}, true},
        VarlenCase{"one_token_documents", {1, 1, 1}, {}, true},
        VarlenCase{"one_document", {67}, {}, true},
        VarlenCase{"many_short", many_short(), {}, true, false, false, false, 0.0f, 1, 64},
        VarlenCase{"dropout", {9, 70, 2}, {}, true, false, false, false, 0.2f},
        VarlenCase{"alibi", {9, 70, 2}, {}, true, true},
        VarlenCase{"t5", {9, 70, 2}, {}, false, false, true},
        VarlenCase{"rope", {9, 70, 2}, {}, true, false, false, true},
        VarlenCase{"cross", {3, 12, 1}, {17, 4, 66}, false, false, false, false, 0.1f, 2, 128}),
    [](const ::testing::TestParamInfo<VarlenCase>& i) { return i.param.name; });

TEST(FlashVarlenArgs, BadLayoutsAreOneLineErrors) {
  const Tensor q = random_tensor({1, 2, 10, 32}, 1), k = random_tensor({1, 2, 10, 32}, 2);
  Tensor out = Tensor::empty(q.shape(), DType::F32, Device::cpu());
  Tensor lse = Tensor::empty({1, 2, 10}, DType::F32, Device::cpu());
  AttentionOptions o;
  o.cu_seqlens_q = o.cu_seqlens_k = Tensor::from_ints({0, 4, 10}, {3});
  o.max_seqlen_q = o.max_seqlen_k = 6;
  ops::flash_attention_forward(q, k, k, o, out, lse);  // well formed

  const auto error_of = [&](const AttentionOptions& bad, bool flash) {
    try {
      Tensor probs = Tensor::empty({1, 2, 10, 10}, DType::F32, Device::cpu());
      if (flash)
        ops::flash_attention_forward(q, k, k, bad, out, lse);
      else
        ops::attention_forward(q, k, k, bad, out, probs);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  AttentionOptions short_max = o;
  short_max.max_seqlen_q = 5;  // document 1 has 6 tokens
  EXPECT_NE(error_of(short_max, true).find("document 1 6 tokens"), std::string::npos)
      << error_of(short_max, true);
  AttentionOptions wrong_end = o;
  wrong_end.cu_seqlens_k = Tensor::from_ints({0, 4, 9}, {3});
  EXPECT_NE(error_of(wrong_end, true).find("cu_seqlens_k runs from 0 to 9"), std::string::npos)
      << error_of(wrong_end, true);
  AttentionOptions with_lengths = o;
  with_lengths.key_lengths = Tensor::from_ints({4, 6}, {2});
  EXPECT_NE(error_of(with_lengths, true).find("no key or query lengths"), std::string::npos);
  EXPECT_NE(error_of(o, false).find("the flash core's alone"), std::string::npos)
      << error_of(o, false);
}

}  // namespace
}  // namespace rotor
