// rotor's tensor-core flash kernel (kernels/flash_attention_tc.cu) against the
// CPU twin (src/ops/flash_attention.cpp), as a table of cases
// (tests/support/op_case.h): f16 and bf16, lengths 1 to 4096, key padding,
// the causal mask with Tq != Tk (rows that see no key), attention dropout and
// RoPE inside the kernel. The bound is FlashAttention's: the kernel's error
// against the fp32 CPU result is at most twice the error of the same attention
// done plainly in that precision -- q and k rotated and rounded to the dtype,
// the reference attention on the GPU (which rounds the probabilities), dq and
// dk rotated back and rounded -- for out, dq, dk and dv. f16/bf16 on CUDA run
// the tensor-core kernel whenever ops::flash_attention_tc_supported says so;
// the cases skip on GPUs older than sm_80 (and under
// ROTOR_FLASH_KERNEL=portable), and the whole file skips without a GPU.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/philox.h"
#include "core/rope.h"
#include "ops/attention.h"
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
  bool rope;
  int64_t q_offset, k_offset;
  uint64_t seed;
};

AttentionOptions options_for(const Case& c, const OpEnv& e) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.key_lengths.empty()) o.key_lengths = e.ints(c.key_lengths, {c.B});
  o.dropout = c.dropout;
  o.seed = 97531;
  o.stream = rng_stream(11, 2, RngPurpose::AttentionDropout, 0);
  o.rope = c.rope;
  o.rope_base = 10000.0f;
  o.rope_q_offset = c.q_offset;
  o.rope_k_offset = c.k_offset;
  return o;
}

// v [B, H, T, D] (flat) rotated by RoPE on the host (back: the inverse), row t
// at position offset + t: core/rope.h, as the kernel's table.
std::vector<float> rotate_rows(std::vector<float> v, int64_t T, int64_t D, int64_t offset,
                               bool back) {
  const int64_t rows = static_cast<int64_t>(v.size()) / D;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < D / 2; ++i) {
      const rope::Rotation rot = rope::rotation(offset + r % T, i, D, 10000.0);
      float& x0 = v[r * D + 2 * i];
      float& x1 = v[r * D + 2 * i + 1];
      float y0, y1;
      if (back)
        rope::rotate_back(x0, x1, rot, y0, y1);
      else
        rope::rotate(x0, x1, rot, y0, y1);
      x0 = y0;
      x1 = y1;
    }
  return v;
}

struct Inputs {
  std::vector<float> q, k, v, dout;
};

Inputs inputs_of(const Case& c, DType dt) {
  const int64_t nq = c.B * c.H * c.Tq * c.D, nk = c.B * c.H * c.Tk * c.D;
  // Rounded to the dtype first: every run of a case sees the same values.
  return {test::rounded(random_floats(static_cast<size_t>(nq), c.seed, -2.0f, 2.0f), dt),
          test::rounded(random_floats(static_cast<size_t>(nk), c.seed + 1), dt),
          test::rounded(random_floats(static_cast<size_t>(nk), c.seed + 2), dt),
          test::rounded(random_floats(static_cast<size_t>(nq), c.seed + 3), dt)};
}

// The flash core (CPU twin or CUDA kernel) with the case's options, rope included.
OpOutputs run_flash(const Case& c, const OpEnv& e) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const Inputs in = inputs_of(c, e.inputs);
  const Tensor q = e.in(in.q, qs), k = e.in(in.k, ks), v = e.in(in.v, ks), dout = e.in(in.dout, qs);
  const AttentionOptions o = options_for(c, e);
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  Tensor lse = e.zeros_f32({c.B, c.H, c.Tq});
  ops::flash_attention_forward(q, k, v, o, y, lse);
  ops::flash_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
  return {out("out", y, 1e-5), out("dq", dq, 1e-4), out("dk", dk, 1e-4), out("dv", dv, 1e-4)};
}

// The same attention done plainly in the dtype on the GPU: q and k rotated on
// the host and rounded, the reference attention, dq and dk rotated back and
// rounded.
OpOutputs run_plain(const Case& c, const OpEnv& e) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  Inputs in = inputs_of(c, e.inputs);
  if (c.rope) {
    in.q = rotate_rows(in.q, c.Tq, c.D, c.q_offset, false);
    in.k = rotate_rows(in.k, c.Tk, c.D, c.k_offset, false);
  }
  const Tensor q = e.in(in.q, qs), k = e.in(in.k, ks), v = e.in(in.v, ks), dout = e.in(in.dout, qs);
  AttentionOptions o = options_for(c, e);
  o.rope = false;
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, o, y, probs);
  ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
  OpOutputs r = {out("out", y), out("dq", dq), out("dk", dk), out("dv", dv)};
  if (c.rope) {
    auto back = [&](test::OpOutput& g, int64_t T, int64_t offset) {
      const std::vector<float> f(g.values.begin(), g.values.end());
      const auto b = test::rounded(rotate_rows(f, T, c.D, offset, true), e.dtype);
      g.values.assign(b.begin(), b.end());
    };
    back(r[1], c.Tq, c.q_offset);
    back(r[2], c.Tk, c.k_offset);
  }
  return r;
}

std::vector<OpCase> tc_cases() {
  const std::vector<Case> shapes = {
      // B, H, Tq, Tk, D, causal, key lengths, dropout, rope, q offset, k offset, seed
      {2, 2, 1, 1, 64, false, {}, 0.0f, false, 0, 0, 10},
      {2, 3, 7, 7, 64, true, {}, 0.0f, false, 0, 0, 20},
      {2, 2, 129, 129, 64, true, {129, 77}, 0.0f, false, 0, 0, 30},
      {2, 2, 129, 129, 128, false, {100, 3}, 0.0f, false, 0, 0, 35},
      {1, 2, 513, 513, 128, true, {}, 0.0f, false, 0, 0, 40},
      {1, 2, 513, 513, 32, false, {}, 0.0f, false, 0, 0, 45},
      {1, 1, 4096, 4096, 64, true, {}, 0.0f, false, 0, 0, 50},
      {1, 2, 7, 200, 32, true, {}, 0.0f, false, 0, 0, 60},     // Tq < Tk
      {1, 2, 300, 100, 64, true, {}, 0.0f, false, 0, 0, 65},   // Tq > Tk: rows see no key
      {2, 1, 70, 5, 32, true, {5, 0}, 0.0f, false, 0, 0, 70},  // fully masked rows
      {2, 2, 100, 100, 64, false, {100, 31}, 0.2f, false, 0, 0, 80},
      {1, 2, 129, 257, 128, true, {}, 0.1f, false, 0, 0, 90},
      // RoPE in the kernel.
      {2, 2, 1, 1, 64, false, {}, 0.0f, true, 0, 0, 100},
      {2, 2, 129, 129, 64, true, {129, 77}, 0.0f, true, 5, 5, 110},
      {1, 2, 513, 513, 128, true, {}, 0.0f, true, 0, 0, 120},
      {1, 2, 7, 200, 128, true, {}, 0.0f, true, 193, 0, 130},  // decoding-like offsets
      {2, 2, 100, 100, 32, false, {100, 31}, 0.2f, true, 1500, 1500, 140},
      {1, 1, 4096, 4096, 128, true, {}, 0.1f, true, 0, 0, 150},
  };
  std::vector<OpCase> cs;
  for (const Case& c : shapes)
    for (DType dt : {DType::F16, DType::BF16}) {
      OpCase oc;
      oc.op = "flash_tc";
      oc.config = fmt::format("B{}_H{}_Tq{}_Tk{}_D{}{}{}_drop{}{}", c.B, c.H, c.Tq, c.Tk, c.D,
                              c.causal ? "_causal" : "", c.key_lengths.empty() ? "" : "_lengths",
                              int(c.dropout * 10),
                              c.rope ? fmt::format("_rope{}_{}", c.q_offset, c.k_offset) : "");
      oc.dtype = dt;
      oc.run = [c](const OpEnv& e) { return run_flash(c, e); };
      oc.plain = [c](const OpEnv& e) { return run_plain(c, e); };
      oc.floor = 1e-4;
      cs.push_back(std::move(oc));
    }
  return cs;
}

bool tc_available() {
  const Tensor probe = Tensor::zeros({1, 1, 1, 64}, DType::BF16, kGpu);
  return ops::flash_attention_tc_supported(probe, AttentionOptions{});
}

class FlashTc : public testing::TestWithParam<OpCase> {};

TEST_P(FlashTc, MatchesCpu) {
  ROTOR_REQUIRE_GPU();
  if (!tc_available())
    GTEST_SKIP() << "the tensor-core flash kernel does not run here (sm_80+, not "
                    "ROTOR_FLASH_KERNEL=portable)";
  test::check_op_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Flash, FlashTc, testing::ValuesIn(tc_cases()), test::op_case_name);

// The portable kernel and the tensor-core one agree (same masks, same dropout)
// within 16-bit rounding: a direct check of the dispatch override.
TEST(CudaOps, flash_tc_MatchesThePortableKernel) {
  ROTOR_REQUIRE_GPU();
  if (!tc_available()) GTEST_SKIP() << "no tensor-core flash kernel here";
  const Case c{2, 2, 150, 150, 64, true, {150, 90}, 0.15f, false, 0, 0, 7};
  const OpEnv e{kGpu, DType::BF16, DType::BF16};
  const OpOutputs tc = run_flash(c, e);
  ASSERT_EQ(setenv("ROTOR_FLASH_KERNEL", "portable", 1), 0);
  OpOutputs portable;
  try {
    portable = run_flash(c, e);
  } catch (...) {
    unsetenv("ROTOR_FLASH_KERNEL");
    throw;
  }
  unsetenv("ROTOR_FLASH_KERNEL");
  ASSERT_EQ(tc.size(), portable.size());
  for (size_t i = 0; i < tc.size(); ++i)
    EXPECT_LE(test::op_error(tc[i].values, portable[i].values), 0.05) << tc[i].name;
}

TEST(CudaOps, flash_tc_RopeOnAPortablePathIsAClearError) {
  ROTOR_REQUIRE_GPU();
  AttentionOptions o;
  o.rope = true;
  // f32 has no tensor-core kernel.
  Tensor q = Tensor::zeros({1, 1, 4, 64}, DType::F32, kGpu);
  Tensor y = Tensor::zeros({1, 1, 4, 64}, DType::F32, kGpu);
  Tensor lse = Tensor::zeros({1, 1, 4}, DType::F32, kGpu);
  EXPECT_FALSE(ops::flash_attention_tc_supported(q, o));
  EXPECT_THROW(ops::flash_attention_forward(q, q, q, o, y, lse), Error);
}

// No GPU needed: the reference attention refuses rope instead of ignoring it.
TEST(FlashTcOptions, ReferenceAttentionRejectsRope) {
  AttentionOptions o;
  o.rope = true;
  Tensor q = Tensor::zeros({1, 1, 4, 8}, DType::F32);
  Tensor y = Tensor::zeros({1, 1, 4, 8}, DType::F32);
  Tensor probs = Tensor::zeros({1, 1, 4, 4}, DType::F32);
  EXPECT_THROW(ops::attention_forward(q, q, q, o, y, probs), Error);
}

// No GPU needed: the CPU twin's rope equals rotating q and k first and running
// the reference attention (forward), and its dq, dk are that problem's
// gradients rotated back -- padding, causal with Tq != Tk and dropout included.
TEST(FlashTcOptions, CpuTwinRopeIsRotationThenAttention) {
  const Case c{2, 2, 9, 13, 8, true, {13, 6}, 0.25f, true, 3, 1, 17};
  const OpEnv e{Device::cpu(), DType::F32, DType::F32};
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const Inputs in = inputs_of(c, DType::F32);
  const AttentionOptions o = options_for(c, e);
  AttentionOptions plain = o;
  plain.rope = false;
  const Tensor q = e.in(in.q, qs), k = e.in(in.k, ks), v = e.in(in.v, ks), dout = e.in(in.dout, qs);
  const Tensor qr = e.in(rotate_rows(in.q, c.Tq, c.D, c.q_offset, false), qs);
  const Tensor kr = e.in(rotate_rows(in.k, c.Tk, c.D, c.k_offset, false), ks);
  Tensor y1 = e.zeros(qs), y2 = e.zeros(qs), lse = e.zeros_f32({c.B, c.H, c.Tq});
  Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});
  ops::flash_attention_forward(q, k, v, o, y1, lse);
  ops::attention_forward(qr, kr, v, plain, y2, probs);
  EXPECT_LE(test::op_error(out("a", y1).values, out("b", y2).values), 1e-5);
  Tensor dq1 = e.zeros(qs), dk1 = e.zeros(ks), dv1 = e.zeros(ks);
  Tensor dq2 = e.zeros(qs), dk2 = e.zeros(ks), dv2 = e.zeros(ks);
  ops::flash_attention_backward(q, k, v, y1, lse, dout, o, dq1, dk1, dv1);
  ops::attention_backward(qr, kr, v, probs, dout, plain, dq2, dk2, dv2);
  const auto dq2b = rotate_rows(dq2.to_floats(), c.Tq, c.D, c.q_offset, true);
  const auto dk2b = rotate_rows(dk2.to_floats(), c.Tk, c.D, c.k_offset, true);
  const auto dq1f = dq1.to_floats(), dk1f = dk1.to_floats();
  EXPECT_LE(test::op_error({dq1f.begin(), dq1f.end()}, {dq2b.begin(), dq2b.end()}), 1e-4);
  EXPECT_LE(test::op_error({dk1f.begin(), dk1f.end()}, {dk2b.begin(), dk2b.end()}), 1e-4);
  EXPECT_LE(test::op_error(out("a", dv1).values, out("b", dv2).values), 1e-4);
}

}  // namespace
}  // namespace rotor
