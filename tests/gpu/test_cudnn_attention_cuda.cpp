// cuDNN attention (ops/cudnn_attention.h) on a GPU. Without dropout, a table
// of cases (tests/support/op_case.h) against the CPU twin of rotor's flash
// core: the error of cuDNN's out, dq, dk, dv against the f32 result is at most
// twice that of the same attention done plainly in the same precision (the
// reference attention on the GPU, which rounds the probabilities). With
// dropout cuDNN draws its own mask, so the check reads the mask back: with V
// the identity, out is the dropped-out probability matrix itself, and every
// gradient is recomputed in double from it. And the layer: `attention.impl:
// auto` at 512 keys runs cuDNN and agrees with rotor's kernel. Skipped (one
// line) without a GPU of sm_80 or newer or without the cuDNN frontend.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "core/cuda_context.h"
#include "nn/attention.h"
#include "ops/attention.h"
#include "ops/cudnn_attention.h"
#include "ops/flash_attention.h"
#include "support/op_case.h"

namespace rotor {
namespace {

using ops::AttentionOptions;
using test::OpCase;
using test::OpEnv;
using test::OpOutputs;
using test::out;
using test::random_floats;

const Device kGpu = Device::cuda(0);

#define ROTOR_REQUIRE_CUDNN_ATTENTION()                                                     \
  do {                                                                                      \
    ROTOR_REQUIRE_GPU();                                                                    \
    const ops::CudnnCapability cap = ops::cudnn_capability(kGpu);                           \
    if (!cap.built) GTEST_SKIP() << "rotor built without the cuDNN frontend: test skipped"; \
    if (cap.sm < 80) GTEST_SKIP() << "cuDNN attention needs sm_80+, GPU is sm_" << cap.sm;  \
  } while (0)

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;
  uint64_t seed;
};

AttentionOptions options_for(const Case& c, const OpEnv& e) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.key_lengths.empty()) o.key_lengths = e.ints(c.key_lengths, {c.B});
  return o;
}

enum class Core { Cudnn, Flash, Reference };

// Forward and backward of one core on the case's inputs: out, lse, dq, dk, dv.
OpOutputs run_attention(const Case& c, const OpEnv& e, Core core) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const Tensor q = e.in(random_floats(shape_numel(qs), c.seed, -2.0f, 2.0f), qs);
  const Tensor k = e.in(random_floats(shape_numel(ks), c.seed + 1), ks);
  const Tensor v = e.in(random_floats(shape_numel(ks), c.seed + 2), ks);
  const Tensor dout = e.in(random_floats(shape_numel(qs), c.seed + 3), qs);
  const AttentionOptions o = options_for(c, e);
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  Tensor lse = e.zeros_f32({c.B, c.H, c.Tq});
  switch (core) {
    case Core::Cudnn:
      ops::cudnn_attention_forward(q, k, v, o, y, lse);
      ops::cudnn_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
      break;
    case Core::Flash:
      ops::flash_attention_forward(q, k, v, o, y, lse);
      ops::flash_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
      break;
    case Core::Reference: {
      Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});
      ops::attention_forward(q, k, v, o, y, probs);
      ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
      break;  // no lse: an f32 output, compared with the CPU's only (op_case.h)
    }
  }
  return {out("out", y), out("lse", lse, 2e-3), out("dq", dq), out("dk", dk), out("dv", dv)};
}

std::vector<OpCase> cudnn_cases() {
  // Rows of key lengths 0 are outside cuDNN's contract (ops/cudnn_attention.h).
  const std::vector<Case> shapes = {
      {2, 2, 64, 64, 64, false, {}, 10},
      {2, 3, 129, 129, 64, true, {129, 77}, 20},    // causal and padding (decoder self)
      {2, 2, 100, 100, 128, false, {100, 31}, 30},  // padding (encoder self), head dim 128
      {1, 2, 7, 200, 64, true, {}, 40},             // causal, fewer queries than keys
      {2, 2, 37, 45, 64, false, {45, 12}, 50},      // cross-attention
      {1, 2, 513, 513, 128, true, {}, 60},
      {2, 4, 256, 256, 64, false, {256, 200}, 70},
  };
  std::vector<OpCase> cs;
  for (const Case& c : shapes)
    for (DType dt : {DType::F16, DType::BF16}) {
      OpCase oc;
      oc.op = "cudnn_attention";
      oc.config = fmt::format("B{}_H{}_Tq{}_Tk{}_D{}{}{}", c.B, c.H, c.Tq, c.Tk, c.D,
                              c.causal ? "_causal" : "", c.key_lengths.empty() ? "" : "_lengths");
      oc.dtype = dt;
      oc.run = [c](const OpEnv& e) {
        return run_attention(c, e, e.device.is_cuda() ? Core::Cudnn : Core::Flash);
      };
      oc.plain = [c](const OpEnv& e) { return run_attention(c, e, Core::Reference); };
      oc.floor = 1e-4;
      cs.push_back(std::move(oc));
    }
  return cs;
}

class CudnnAttentionOp : public testing::TestWithParam<OpCase> {};
TEST_P(CudnnAttentionOp, MatchesCpu) {
  ROTOR_REQUIRE_CUDNN_ATTENTION();
  test::check_op_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Ops, CudnnAttentionOp, testing::ValuesIn(cudnn_cases()),
                         test::op_case_name);

// ---------------------------------------------------------------------- dropout

// Host arrays of a [B, H, T, D] tensor.
std::vector<double> host(const Tensor& t) {
  const auto f = t.to_floats();
  return {f.begin(), f.end()};
}

// With V = the identity (Tk == D), out[b, h, i, j] = P_ij M_ij / (1 - p):
// cuDNN's dropped-out probabilities. The test checks that the kept entries
// are P / (1 - p) of the CPU's P, that about p of them are dropped, that the
// same (seed, stream) gives the same mask and another stream another, and
// that the backward used that very mask (dq, dk, dv recomputed in double).
TEST(CudnnAttention, DropoutMaskIsConsistentBetweenForwardAndBackward) {
  ROTOR_REQUIRE_CUDNN_ATTENTION();
  const int64_t B = 2, H = 2, T = 64, D = 64;
  const float p = 0.2f;
  const Shape s{B, H, T, D};
  const std::vector<int32_t> lens{64, 40};
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double unit = dt == DType::F16 ? 9.8e-4 : 7.8e-3;
    const auto qv = random_floats(shape_numel(s), 1, -0.5f, 0.5f);
    const auto kv = random_floats(shape_numel(s), 2, -0.5f, 0.5f);
    const auto dov = random_floats(shape_numel(s), 3);
    std::vector<float> eye(static_cast<size_t>(shape_numel(s)), 0.0f);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t j = 0; j < T; ++j) eye[(bh * T + j) * D + j] = 1.0f;
    const Tensor q = Tensor::from_floats(qv, s, dt, kGpu), k = Tensor::from_floats(kv, s, dt, kGpu);
    const Tensor v = Tensor::from_floats(eye, s, dt, kGpu),
                 dout = Tensor::from_floats(dov, s, dt, kGpu);
    AttentionOptions o;
    o.scale = 0.125f;
    o.key_lengths = Tensor::from_ints(lens, {B}, kGpu);
    o.dropout = p;
    o.seed = 77;
    o.stream = rng_stream(3, 1, RngPurpose::AttentionDropout, 0);
    Tensor y = Tensor::zeros(s, dt, kGpu), lse = Tensor::zeros({B, H, T}, DType::F32, kGpu);
    ops::cudnn_attention_forward(q, k, v, o, y, lse);
    Tensor dq = Tensor::zeros(s, dt, kGpu), dk = Tensor::zeros(s, dt, kGpu),
           dv = Tensor::zeros(s, dt, kGpu);
    ops::cudnn_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
    const auto pd = host(y);  // [B, H, T, T]: P o M / (1 - p)

    Tensor again = Tensor::zeros(s, dt, kGpu), other = Tensor::zeros(s, dt, kGpu);
    ops::cudnn_attention_forward(q, k, v, o, again, lse);
    EXPECT_EQ(again.to_floats(), y.to_floats()) << "same seed and stream, another mask";
    AttentionOptions o2 = o;
    o2.stream = rng_stream(3, 2, RngPurpose::AttentionDropout, 0);
    ops::cudnn_attention_forward(q, k, v, o2, other, lse);
    EXPECT_NE(other.to_floats(), y.to_floats()) << "another stream, the same mask";

    // P in double from the rounded inputs; the mask from cuDNN's output.
    const auto qh = host(q), kh = host(k), doh = host(dout);
    std::vector<double> P(pd.size(), 0.0), M(pd.size(), 0.0);
    int64_t kept = 0, visible = 0;
    double worst_kept = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t row = ((b * H + h) * T + i) * T;
          std::vector<double> sc(T);
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < lens[b]; ++j) {
            double d = 0;
            for (int64_t x = 0; x < D; ++x)
              d += qh[((b * H + h) * T + i) * D + x] * kh[((b * H + h) * T + j) * D + x];
            sc[j] = d * o.scale;
            mx = std::max(mx, sc[j]);
          }
          for (int64_t j = 0; j < lens[b]; ++j) sum += std::exp(sc[j] - mx);
          for (int64_t j = 0; j < T; ++j) {
            if (j >= lens[b]) {
              EXPECT_EQ(pd[row + j], 0.0) << "a padded key got weight";
              continue;
            }
            P[row + j] = std::exp(sc[j] - mx) / sum;
            ++visible;
            if (pd[row + j] != 0.0) {
              M[row + j] = 1.0;
              ++kept;
              worst_kept = std::max(worst_kept, std::abs(pd[row + j] * (1 - p) / P[row + j] - 1));
            }
          }
        }
    EXPECT_NEAR(1.0 - double(kept) / double(visible), p, 0.03) << "fraction dropped";
    EXPECT_LE(worst_kept, 4 * unit) << "kept entries are P / (1 - p)";

    // The gradients of out = (P o M / (1 - p)) V with that mask, in double.
    std::vector<double> gq(qh.size(), 0.0), gk(qh.size(), 0.0), gv(qh.size(), 0.0);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t row = (bh * T + i) * T;
        std::vector<double> dp(T);
        double delta = 0;
        for (int64_t j = 0; j < T; ++j) {
          const double w = P[row + j] * M[row + j] / (1 - p);
          double dpd = 0;  // dO_i . V_j = dO[i, j] (V the identity)
          dpd = doh[(bh * T + i) * D + j];
          for (int64_t x = 0; x < D; ++x) gv[(bh * T + j) * D + x] += w * doh[(bh * T + i) * D + x];
          dp[j] = dpd * M[row + j] / (1 - p);
          delta += P[row + j] * dp[j];
        }
        for (int64_t j = 0; j < T; ++j) {
          const double ds = P[row + j] * (dp[j] - delta) * o.scale;
          if (ds == 0.0) continue;
          for (int64_t x = 0; x < D; ++x) {
            gq[(bh * T + i) * D + x] += ds * kh[(bh * T + j) * D + x];
            gk[(bh * T + j) * D + x] += ds * qh[(bh * T + i) * D + x];
          }
        }
      }
    auto rel = [](const std::vector<double>& got, const std::vector<double>& want) {
      double scale = 0, err = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, std::abs(want[i]));
        err = std::max(err, std::abs(got[i] - want[i]));
      }
      return err / std::max(scale, 1e-30);
    };
    EXPECT_LE(rel(host(dv), gv), 8 * unit) << "dv";
    EXPECT_LE(rel(host(dq), gq), 8 * unit) << "dq";
    EXPECT_LE(rel(host(dk), gk), 8 * unit) << "dk";
  }
}

// ------------------------------------------------------------------------ layer

// A RoFormer self-attention layer at 512 keys in bf16: `auto` runs cuDNN, and
// its output and gradients agree with `rotor` (the flash kernel) within the
// rounding of bf16.
TEST(CudnnAttention, LayerAutoRunsCudnnAndAgreesWithRotor) {
  ROTOR_REQUIRE_CUDNN_ATTENTION();
  const int64_t B = 2, T = 512, d = 256;
  const Tensor x = Tensor::from_floats(random_floats(B * T * d, 5), {B, T, d}, DType::BF16, kGpu);
  const Tensor dy = Tensor::from_floats(random_floats(B * T * d, 6), {B, T, d}, DType::BF16, kGpu);
  const Tensor lengths = Tensor::from_ints({512, 300}, {B}, kGpu);
  struct Result {
    std::vector<float> y, dx, grads;
  };
  auto run = [&](nn::AttentionImpl impl) {
    nn::ParameterStore store;
    nn::AttentionConfig cfg;
    cfg.d_model = d;
    cfg.n_heads = 4;
    cfg.rope = true;
    cfg.impl = impl;
    nn::MultiHeadAttention attn(store, {"q", "k", "v", "o"}, cfg, false);
    store.allocate(kGpu);
    store.initialize(5);
    store.set_compute_dtype(DType::BF16);
    store.zero_grad();
    nn::Context ctx;
    ctx.device = kGpu;
    ctx.dtype = DType::BF16;
    Tensor y = attn.forward(x, Tensor(), lengths, ctx);
    Tensor dx = attn.backward(dy, nullptr);
    return Result{y.to_floats(), dx.to_floats(), store.grads().to_floats()};
  };
  const Result cudnn = run(nn::AttentionImpl::Cudnn);
  const Result autop = run(nn::AttentionImpl::Auto);
  const Result rotor = run(nn::AttentionImpl::Rotor);
  EXPECT_EQ(autop.y, cudnn.y) << "auto at 512 keys should run cuDNN";
  EXPECT_LT(test::max_rel_error(cudnn.y, rotor.y), 0.03);
  EXPECT_LT(test::max_rel_error(cudnn.dx, rotor.dx), 0.03);
  EXPECT_LT(test::max_rel_error(cudnn.grads, rotor.grads), 0.03);
}

}  // namespace
}  // namespace rotor
