// ALiBi (model.position alibi, ops::AttentionOptions::alibi) in every CUDA
// attention kernel against a materialized bias in double
// (tests/emulation/attention_reference.h: -alibi::slope(h, H) * |p_i - p_j|
// added to the scaled scores, the attention and its gradients in double):
// the reference row kernels (ops::attention_forward/backward), rotor's
// portable, tc and volta flash kernels (out, lse, dq, dk, dv) and the decode
// kernel (out). Cases: symmetric and causal, key lengths, Tq != Tk both ways,
// position offsets, 3 heads (the slopes of a head count that is not a power of
// two). Skipped (one line) without a GPU, or where this GPU and build cannot
// run a kernel (ops/attention_device.h says why). The CPU cores are held to
// the same bias by tests/cpu/test_alibi.cpp, the kernels' device code on the
// CPU by tests/emulation (flash_tc_emulation, build_sm70).
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "emulation/attention_reference.h"
#include "ops/attention.h"
#include "ops/attention_device.h"
#include "ops/decode.h"
#include "ops/flash_attention.h"
#include "support/op_case.h"

namespace rotor {
namespace {

using ops::AttentionOptions;
using ops::FlashKernel;
using test::OpEnv;
using test::random_floats;

const Device kGpu = Device::cuda(0);

// The CUDA cores that add ALiBi's bias: the materialized reference and the
// three flash kernels.
enum class Core { Reference, Portable, Tc, Volta };
const char* core_name(Core c) {
  switch (c) {
    case Core::Reference:
      return "reference";
    case Core::Portable:
      return "portable";
    case Core::Tc:
      return "tc";
    case Core::Volta:
      return "volta";
  }
  return "?";
}
FlashKernel flash_kernel_of(Core c) {
  return c == Core::Tc ? FlashKernel::TensorCore
                       : (c == Core::Volta ? FlashKernel::Volta : FlashKernel::Portable);
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> lengths;
  int64_t alibi_q, alibi_k;  // AttentionOptions::bias_q_offset, bias_k_offset
  uint64_t seed;
};

struct Param {
  Core core;
  Case c;
  DType dtype;
};

// max |got - ref| / max(1, |ref|) allowed: fp32 arithmetic everywhere, the
// 16-bit kernels round P and dS to their dtype (as the emulations' bounds).
double tolerance(DType dt) {
  return dt == DType::F32 ? 2e-4 : (dt == DType::F16 ? 5e-3 : 2e-2);
}

std::vector<double> doubles(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

void run_case(const Param& prm) {
  const Case& c = prm.c;
  const DType dt = prm.dtype;
  const OpEnv e{kGpu, dt, dt};
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const auto n = [](const Shape& s) { return static_cast<size_t>(shape_numel(s)); };
  // Rounded to the dtype first: the double reference sees the kernel's inputs.
  const auto q = test::rounded(random_floats(n(qs), c.seed, -2.0f, 2.0f), dt),
             k = test::rounded(random_floats(n(ks), c.seed + 1), dt),
             v = test::rounded(random_floats(n(ks), c.seed + 2), dt),
             dout = test::rounded(random_floats(n(qs), c.seed + 3), dt);
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.lengths.empty()) o.key_lengths = e.ints(c.lengths, {c.B});
  o.alibi = true;
  o.bias_q_offset = c.alibi_q;
  o.bias_k_offset = c.alibi_k;
  o.flash_kernel = flash_kernel_of(prm.core);

  const Tensor tq = e.in(q, qs), tk = e.in(k, ks), tv = e.in(v, ks), tdo = e.in(dout, qs);
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  Tensor lse = e.zeros_f32({c.B, c.H, c.Tq});  // f32 [B, H, Tq]
  if (prm.core == Core::Reference) {
    Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});  // [B, H, Tq, Tk]
    ops::attention_forward(tq, tk, tv, o, y, probs);
    ops::attention_backward(tq, tk, tv, probs, tdo, o, dq, dk, dv);
  } else {
    ops::flash_attention_forward(tq, tk, tv, o, y, lse);
    ops::flash_attention_backward(tq, tk, tv, y, lse, tdo, o, dq, dk, dv);
  }

  emu::AttentionShape shape{c.B,  c.H,     c.Tq, c.Tk, static_cast<int>(c.D), c.causal, c.lengths,
                            0.0f, o.scale, 0,    0};
  shape.alibi = true;
  shape.bias_q_offset = c.alibi_q;
  shape.bias_k_offset = c.alibi_k;
  const emu::AttentionResult ref =
      emu::reference_attention(shape, doubles(q), doubles(k), doubles(v), doubles(dout));
  const double tol = tolerance(dt);
  EXPECT_LE(emu::max_err(ref.out, y.to_floats()), tol) << "out";
  if (prm.core != Core::Reference) {  // the reference core keeps probs, not the lse
    EXPECT_LE(emu::max_err(ref.lse, lse.to_floats()), tol) << "lse";
  }
  EXPECT_LE(emu::max_err(ref.dq, dq.to_floats()), tol) << "dq";
  EXPECT_LE(emu::max_err(ref.dk, dk.to_floats()), tol) << "dk";
  EXPECT_LE(emu::max_err(ref.dv, dv.to_floats()), tol) << "dv";
}

// "" when the core runs the case in `dt` on `device`, else why not.
std::string unsupported(Core core, const Case& c, DType dt, const ops::AttentionDevice& device) {
  if (core == Core::Reference) return "";
  const ops::FlashCase fc{dt, c.B, c.H, c.Tq, c.Tk, c.D, false, true, true};
  return ops::flash_kernel_unsupported(flash_kernel_of(core), fc, device);
}

std::vector<Param> params() {
  const std::vector<Case> cases = {
      // B, H, Tq, Tk, D, causal, key lengths, alibi_q, alibi_k, seed
      {2, 3, 70, 70, 64, true, {70, 33}, 0, 0, 10},
      {1, 3, 65, 129, 64, false, {}, 0, 5, 20},        // symmetric, Tq < Tk, key offset
      {2, 2, 129, 65, 128, true, {65, 20}, 7, 3, 30},  // Tq > Tk: rows see no key
      {1, 3, 1, 200, 32, true, {}, 0, 0, 40},          // one query, as a decoder step
      {1, 2, 300, 300, 128, false, {250}, 0, 0, 50},   // several tiles, padding
  };
  ops::AttentionDevice any;  // a GPU with every kernel's code: what each core is designed for
  any.cuda = true;
  any.tc_code = any.volta_code = true;
  std::vector<Param> ps;
  for (Core core : {Core::Reference, Core::Portable, Core::Tc, Core::Volta})
    for (const Case& c : cases)
      for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
        any.sm = core == Core::Volta ? 70 : 90;
        if (unsupported(core, c, dt, any).empty()) ps.push_back({core, c, dt});
      }
  return ps;
}

// gtest prints a failing case by its core and dtype (the name says the rest).
void PrintTo(const Param& p, std::ostream* os) {
  *os << core_name(p.core) << " " << dtype_name(p.dtype);
}

class AlibiKernels : public testing::TestWithParam<Param> {};

TEST_P(AlibiKernels, MatchTheMaterializedBiasInDouble) {
  ROTOR_REQUIRE_GPU();
  const Param& p = GetParam();
  const std::string why = unsupported(p.core, p.c, p.dtype, ops::attention_device(kGpu));
  if (!why.empty()) GTEST_SKIP() << why;
  run_case(p);
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  const Param& p = info.param;
  return fmt::format("{}_{}_B{}_H{}_Tq{}_Tk{}_D{}{}{}_q{}_k{}", core_name(p.core),
                     dtype_name(p.dtype), p.c.B, p.c.H, p.c.Tq, p.c.Tk, p.c.D,
                     p.c.causal ? "_causal" : "", p.c.lengths.empty() ? "" : "_lengths",
                     p.c.alibi_q, p.c.alibi_k);
}

INSTANTIATE_TEST_SUITE_P(Cores, AlibiKernels, testing::ValuesIn(params()), param_name);

// The decode kernel: one query at position length - 1 against the cached
// keys 0..length-1, head h's bias -slope_h * (length - 1 - j).
TEST(AlibiDecode, MatchesTheMaterializedBiasInDouble) {
  ROTOR_REQUIRE_GPU();
  const int64_t B = 2, H = 3, Tmax = 40, L = 37, D = 64;
  const Shape cache{B, H, Tmax, D}, row{B, H, 1, D};
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const OpEnv e{kGpu, dt, dt};
    const auto q = test::rounded(random_floats(static_cast<size_t>(B * H * D), 3, -2.0f, 2.0f), dt),
               k = test::rounded(random_floats(static_cast<size_t>(shape_numel(cache)), 1), dt),
               v = test::rounded(random_floats(static_cast<size_t>(shape_numel(cache)), 2), dt);
    Tensor y = e.zeros(row);
    ops::decode_attention(e.in(q, row), e.in(k, cache), e.in(v, cache), L, y, /*alibi=*/true);
    // The first L cached rows of every (b, h), in double.
    std::vector<double> kl, vl;
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t j = 0; j < L * D; ++j) {
        kl.push_back(k[static_cast<size_t>(bh * Tmax * D + j)]);
        vl.push_back(v[static_cast<size_t>(bh * Tmax * D + j)]);
      }
    emu::AttentionShape shape{B, H, 1, L, static_cast<int>(D), true, {}, 0.0f, 1.0, 0, 0};
    shape.alibi = true;
    const emu::AttentionResult ref = emu::reference_attention(
        shape, doubles(q), kl, vl, std::vector<double>(static_cast<size_t>(B * H * D), 0.0));
    EXPECT_LE(emu::max_err(ref.out, y.to_floats()), tolerance(dt)) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace rotor
