// The CUDA flash attention core and the decoding kernels against their CPU
// twins, as a table of cases (tests/support/op_case.h). f32: tight
// tolerance. f16/bf16, in the FlashAttention manner: the kernel's error
// against the fp32 result (same rounded inputs) is at most twice the error of
// the same attention done plainly in that precision -- the reference
// attention on the GPU, which materializes and rounds the probabilities --
// for the output and dq, dk, dv. Skipped (one line) when no GPU answers.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "ops/attention.h"
#include "ops/decode.h"
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

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;
  float dropout;
  uint64_t seed;
};

AttentionOptions options_for(const Case& c, const OpEnv& e) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.key_lengths.empty()) o.key_lengths = e.ints(c.key_lengths, {c.B});
  o.dropout = c.dropout;
  o.seed = 4321;
  o.stream = rng_stream(5, 3, RngPurpose::AttentionDropout, 0);
  return o;
}

// Forward and backward of one attention core (the flash one or, plainly, the
// reference) on the case's inputs; outputs out, dq, dk, dv.
OpOutputs run_attention(const Case& c, const OpEnv& e, bool flash) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const Tensor q = e.in(random_floats(shape_numel(qs), c.seed, -2.0f, 2.0f), qs);
  const Tensor k = e.in(random_floats(shape_numel(ks), c.seed + 1), ks);
  const Tensor v = e.in(random_floats(shape_numel(ks), c.seed + 2), ks);
  const Tensor dout = e.in(random_floats(shape_numel(qs), c.seed + 3), qs);
  const AttentionOptions o = options_for(c, e);
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  if (flash) {
    Tensor lse = e.zeros_f32({c.B, c.H, c.Tq});
    ops::flash_attention_forward(q, k, v, o, y, lse);
    ops::flash_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
  } else {
    Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});
    ops::attention_forward(q, k, v, o, y, probs);
    ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
  }
  return {out("out", y, 1e-5), out("dq", dq, 1e-4), out("dk", dk, 1e-4), out("dv", dv, 1e-4)};
}

std::vector<OpCase> flash_cases() {
  const std::vector<Case> shapes = {
      {2, 2, 64, 64, 64, false, {}, 0.0f, 10},
      {2, 3, 129, 129, 64, true, {129, 77}, 0.0f, 20},
      {1, 2, 7, 200, 32, true, {}, 0.0f, 30},
      {2, 1, 70, 5, 32, true, {5, 0}, 0.0f, 40},  // fully masked rows
      {1, 2, 513, 513, 128, true, {}, 0.0f, 50},
      {2, 2, 100, 100, 64, false, {100, 31}, 0.2f, 60},
      {1, 1, 1, 1, 32, false, {}, 0.0f, 70},
  };
  std::vector<OpCase> cs;
  for (const Case& c : shapes)
    for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
      OpCase oc;
      oc.op = "flash_attention";
      oc.config = fmt::format("B{}_H{}_Tq{}_Tk{}_D{}{}{}_drop{}", c.B, c.H, c.Tq, c.Tk, c.D,
                              c.causal ? "_causal" : "", c.key_lengths.empty() ? "" : "_lengths",
                              int(c.dropout * 10));
      oc.dtype = dt;
      oc.run = [c](const OpEnv& e) { return run_attention(c, e, true); };
      oc.plain = [c](const OpEnv& e) { return run_attention(c, e, false); };
      oc.floor = 1e-4;
      cs.push_back(std::move(oc));
    }

  // Decoding: write a key at position L - 1 of the caches, attend with one query.
  const int64_t B = 3, H = 2, Tmax = 40, D = 64, L = 37;
  const Shape cache{B, H, Tmax, D}, row{B, H, 1, D};
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    OpCase w;
    w.op = "kv_cache_write";
    w.config = fmt::format("B{}_H{}_Tmax{}_D{}_pos{}", B, H, Tmax, D, L - 1);
    w.dtype = dt;
    w.run = [=](const OpEnv& e) {
      Tensor k = e.in(random_floats(shape_numel(cache), 1), cache);
      ops::kv_cache_write(e.in(random_floats(shape_numel(row), 4), row), k, L - 1);
      return OpOutputs{out("cache", k, 0.0)};
    };
    w.floor = 0.0;  // a copy: exact
    cs.push_back(w);

    OpCase a;
    a.op = "decode_attention";
    a.config = fmt::format("B{}_H{}_Tmax{}_D{}_len{}", B, H, Tmax, D, L);
    a.dtype = dt;
    a.run = [=](const OpEnv& e) {
      Tensor y = e.zeros(row);
      ops::decode_attention(e.in(random_floats(shape_numel(row), 3, -2.0f, 2.0f), row),
                            e.in(random_floats(shape_numel(cache), 1), cache),
                            e.in(random_floats(shape_numel(cache), 2), cache), L, y);
      return OpOutputs{out("out", y)};
    };
    a.floor = 1e-4;
    cs.push_back(a);

    // Beam search reorders rows with a host index on device rows.
    OpCase s;
    s.op = "index_select";
    s.config = "host_index_2_0_2_1";
    s.dtype = dt;
    s.run = [=](const OpEnv& e) {
      Tensor dst = e.zeros({4, H, Tmax, D});
      ops::index_select(e.in(random_floats(shape_numel(cache), 1), cache),
                        Tensor::from_ints({2, 0, 2, 1}, {4}), dst);
      return OpOutputs{out("dst", dst, 0.0)};
    };
    s.floor = 0.0;  // a copy: exact
    cs.push_back(s);
  }
  return cs;
}

ROTOR_OP_CASES(Flash, flash_cases());

TEST(CudaOps, flash_attention_forward_UnsupportedHeadDimIsAClearError) {
  ROTOR_REQUIRE_GPU();
  Tensor q = Tensor::zeros({1, 1, 4, 48}, DType::F32, kGpu);
  Tensor y = Tensor::zeros({1, 1, 4, 48}, DType::F32, kGpu);
  Tensor lse = Tensor::zeros({1, 1, 4}, DType::F32, kGpu);
  EXPECT_FALSE(ops::flash_attention_supported(q));
  EXPECT_THROW(ops::flash_attention_forward(q, q, q, AttentionOptions{}, y, lse), Error);
}

TEST(CudaOps, index_select_RejectsAnIndexOutOfRange) {
  ROTOR_REQUIRE_GPU();
  Tensor src = Tensor::zeros({3, 2, 4}, DType::F32, kGpu),
         dst = Tensor::zeros({4, 2, 4}, DType::F32, kGpu);
  EXPECT_THROW(ops::index_select(src, Tensor::from_ints({0, 3, 0, 0}, {4}), dst), Error);
}

}  // namespace
}  // namespace rotor
