// The CUDA flash attention core and decoding kernels against their CPU twins.
// f32: tight tolerance. f16/bf16, in the FlashAttention manner: the kernel's
// error against the fp32 result (same rounded inputs) is at most twice the
// error of the reference attention run on the GPU in the same low precision,
// for the output and dq, dk, dv. Skipped (one line) when no GPU answers.
#include <cmath>
#include <vector>

#include "ops/attention.h"
#include "ops/decode.h"
#include "ops/flash_attention.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::AttentionOptions;
using test::max_rel_error;
using test::random_floats;

const Device kGpu = Device::cuda(0);

std::vector<float> rounded(const std::vector<float>& v, DType dt) {
  return Tensor::from_floats(v, {static_cast<int64_t>(v.size())}, dt).to_floats();
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;
  float dropout;
};

AttentionOptions options_for(const Case& c, Device dev) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.key_lengths.empty())
    o.key_lengths = Tensor::from_ints(c.key_lengths, {c.B}).to(dev);
  o.dropout = c.dropout;
  o.seed = 4321;
  o.stream = rng_stream(5, 3, RngPurpose::AttentionDropout, 0);
  return o;
}

struct Grads {
  std::vector<float> out, dq, dk, dv;
};

void run_case(const Case& c, DType dt, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << dtype_name(dt) << " B " << c.B << " H " << c.H << " Tq "
                                  << c.Tq << " Tk " << c.Tk << " D " << c.D << " causal "
                                  << c.causal << " dropout " << c.dropout);
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  auto vq = random_floats(shape_numel(qs), seed, -2.0f, 2.0f);
  auto vk = random_floats(shape_numel(ks), seed + 1), vv = random_floats(shape_numel(ks), seed + 2);
  auto vdo = random_floats(shape_numel(qs), seed + 3);
  if (dt != DType::F32) {  // both sides see the same rounded inputs
    vq = rounded(vq, dt);
    vk = rounded(vk, dt);
    vv = rounded(vv, dt);
    vdo = rounded(vdo, dt);
  }
  // fp32 CPU twin: the reference of this test.
  Grads ref;
  {
    Tensor q = Tensor::from_floats(vq, qs), k = Tensor::from_floats(vk, ks);
    Tensor v = Tensor::from_floats(vv, ks), dout = Tensor::from_floats(vdo, qs);
    const AttentionOptions o = options_for(c, Device::cpu());
    Tensor out = Tensor::zeros(qs), lse = Tensor::zeros({c.B, c.H, c.Tq});
    ops::flash_attention_forward(q, k, v, o, out, lse);
    Tensor dq = Tensor::zeros(qs), dk = Tensor::zeros(ks), dv = Tensor::zeros(ks);
    ops::flash_attention_backward(q, k, v, out, lse, dout, o, dq, dk, dv);
    ref = {out.to_floats(), dq.to_floats(), dk.to_floats(), dv.to_floats()};
  }
  const AttentionOptions o = options_for(c, kGpu);
  Tensor q = Tensor::from_floats(vq, qs, dt, kGpu), k = Tensor::from_floats(vk, ks, dt, kGpu);
  Tensor v = Tensor::from_floats(vv, ks, dt, kGpu), dout = Tensor::from_floats(vdo, qs, dt, kGpu);
  Grads got;
  {
    Tensor out = Tensor::zeros(qs, dt, kGpu), lse = Tensor::zeros({c.B, c.H, c.Tq}, DType::F32, kGpu);
    ops::flash_attention_forward(q, k, v, o, out, lse);
    Tensor dq = Tensor::zeros(qs, dt, kGpu), dk = Tensor::zeros(ks, dt, kGpu),
           dv = Tensor::zeros(ks, dt, kGpu);
    ops::flash_attention_backward(q, k, v, out, lse, dout, o, dq, dk, dv);
    got = {out.to_floats(), dq.to_floats(), dk.to_floats(), dv.to_floats()};
  }
  if (dt == DType::F32) {
    EXPECT_LT(max_rel_error(got.out, ref.out), 1e-5);
    EXPECT_LT(max_rel_error(got.dq, ref.dq), 1e-4);
    EXPECT_LT(max_rel_error(got.dk, ref.dk), 1e-4);
    EXPECT_LT(max_rel_error(got.dv, ref.dv), 1e-4);
    return;
  }
  // The same computation done plainly in low precision: the reference attention on the GPU.
  Grads plain;
  {
    Tensor out = Tensor::zeros(qs, dt, kGpu), probs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk}, dt, kGpu);
    ops::attention_forward(q, k, v, o, out, probs);
    Tensor dq = Tensor::zeros(qs, dt, kGpu), dk = Tensor::zeros(ks, dt, kGpu),
           dv = Tensor::zeros(ks, dt, kGpu);
    ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
    plain = {out.to_floats(), dq.to_floats(), dk.to_floats(), dv.to_floats()};
  }
  auto expect = [&](const std::vector<float>& g, const std::vector<float>& p,
                    const std::vector<float>& r, const char* what) {
    const double eg = max_rel_error(g, r), ep = max_rel_error(p, r);
    EXPECT_LE(eg, 2.0 * ep + 1e-4) << what << ": flash error " << eg << ", reference " << ep;
  };
  expect(got.out, plain.out, ref.out, "out");
  expect(got.dq, plain.dq, ref.dq, "dq");
  expect(got.dk, plain.dk, ref.dk, "dk");
  expect(got.dv, plain.dv, ref.dv, "dv");
}

const std::vector<Case>& cases() {
  static const std::vector<Case> cs = {
      {2, 2, 64, 64, 64, false, {}, 0.0f},
      {2, 3, 129, 129, 64, true, {129, 77}, 0.0f},
      {1, 2, 7, 200, 32, true, {}, 0.0f},
      {2, 1, 70, 5, 32, true, {5, 0}, 0.0f},  // fully masked rows
      {1, 2, 513, 513, 128, true, {}, 0.0f},
      {2, 2, 100, 100, 64, false, {100, 31}, 0.2f},
      {1, 1, 1, 1, 32, false, {}, 0.0f},
  };
  return cs;
}

TEST(FlashAttentionCuda, F32MatchesCpuTwin) {
  ROTOR_REQUIRE_GPU();
  uint64_t seed = 10;
  for (const auto& c : cases()) run_case(c, DType::F32, seed += 10);
}

TEST(FlashAttentionCuda, LowPrecisionWithinTwiceTheReferenceError) {
  ROTOR_REQUIRE_GPU();
  uint64_t seed = 500;
  for (DType dt : {DType::F16, DType::BF16})
    for (const auto& c : cases()) run_case(c, dt, seed += 10);
}

TEST(FlashAttentionCuda, UnsupportedHeadDimIsAClearError) {
  ROTOR_REQUIRE_GPU();
  Tensor q = Tensor::zeros({1, 1, 4, 48}, DType::F32, kGpu);
  Tensor out = Tensor::zeros({1, 1, 4, 48}, DType::F32, kGpu);
  Tensor lse = Tensor::zeros({1, 1, 4}, DType::F32, kGpu);
  EXPECT_FALSE(ops::flash_attention_supported(q));
  EXPECT_THROW(ops::flash_attention_forward(q, q, q, AttentionOptions{}, out, lse), Error);
}

TEST(DecodeCuda, KernelsMatchCpu) {
  ROTOR_REQUIRE_GPU();
  const int64_t B = 3, H = 2, Tmax = 40, D = 64, L = 37;
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto vk = rounded(random_floats(static_cast<size_t>(B * H * Tmax * D), 1), dt);
    auto vv = rounded(random_floats(static_cast<size_t>(B * H * Tmax * D), 2), dt);
    auto vq = rounded(random_floats(static_cast<size_t>(B * H * D), 3, -2.0f, 2.0f), dt);
    auto vn = rounded(random_floats(static_cast<size_t>(B * H * D), 4), dt);
    Tensor ck = Tensor::from_floats(vk, {B, H, Tmax, D}), cv = Tensor::from_floats(vv, {B, H, Tmax, D});
    Tensor gk = Tensor::from_floats(vk, {B, H, Tmax, D}, dt, kGpu);
    Tensor gv = Tensor::from_floats(vv, {B, H, Tmax, D}, dt, kGpu);
    // Write a new key at position L - 1 on both sides.
    ops::kv_cache_write(Tensor::from_floats(vn, {B, H, 1, D}), ck, L - 1);
    ops::kv_cache_write(Tensor::from_floats(vn, {B, H, 1, D}, dt, kGpu), gk, L - 1);
    EXPECT_EQ(gk.to_floats(), rounded(ck.to_floats(), dt));
    Tensor co = Tensor::zeros({B, H, 1, D}), go = Tensor::zeros({B, H, 1, D}, dt, kGpu);
    ops::decode_attention(Tensor::from_floats(vq, {B, H, 1, D}), ck, cv, L, co);
    ops::decode_attention(Tensor::from_floats(vq, {B, H, 1, D}, dt, kGpu), gk, gv, L, go);
    const auto ref = co.to_floats();
    const double plain = max_rel_error(rounded(ref, dt), ref);
    EXPECT_LE(max_rel_error(go.to_floats(), ref), dt == DType::F32 ? 1e-5 : 2.0 * plain + 1e-4);
    // index_select with a host index on device rows.
    Tensor idx = Tensor::from_ints({2, 0, 2, 1}, {4});
    Tensor cdst = Tensor::zeros({4, H, Tmax, D}), gdst = Tensor::zeros({4, H, Tmax, D}, dt, kGpu);
    ops::index_select(ck, idx, cdst);
    ops::index_select(gk, idx, gdst);
    EXPECT_EQ(gdst.to_floats(), rounded(cdst.to_floats(), dt));
    EXPECT_THROW(ops::index_select(gk, Tensor::from_ints({0, 3, 0, 0}, {4}), gdst), Error);
  }
}

}  // namespace
}  // namespace rotor
