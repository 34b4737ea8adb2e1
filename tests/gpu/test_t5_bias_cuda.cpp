// T5's relative bias (model.position t5, ops::AttentionOptions::rel_bias and
// rel_bias_grad) in the CUDA reference core (ops::attention_forward/backward,
// kernels/attention_reference.cu) against the CPU's (src/ops/attention.cpp)
// on the same inputs: out, probs, dq, dk, dv, and the table's gradient added
// into a rel_bias_grad that starts nonzero. And the gradient's reduction (no
// atomics) gives the same bits run after run. Cases: symmetric and causal,
// distances beyond rel_max (both edge rows of the table), key lengths (one
// batch row with none), Tq != Tk both ways, position offsets, dropout,
// rel_max 0 (one row for every distance); f32 and f16. And the same cases
// through rotor's CUDA flash kernels (ops::flash_attention_forward/backward:
// portable in f32 and f16, tc in f16 and bf16, volta where the device is
// one; kernels/flash_attention*.cu) against attention in double
// (tests/emulation/attention_reference.h, the yardstick of the kernels'
// emulation): out, dq, dk, dv, and the table's gradient measured against the
// mass of its terms (emu::rel_err: an entry sums dS over whole diagonals,
// where the terms cancel while each carries the rounding of the 16-bit out
// in delta = rowsum(dO o out)). Skipped (one line) without a GPU. The CPU cores' bias is held to
// the bucket definition by tests/cpu/test_t5_bias.cpp; the flash kernels' device code also runs on
// the CPU in tests/emulation (check_flash.sh, build_sm70.sh).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "emulation/attention_reference.h"
#include "ops/attention.h"
#include "ops/attention_device.h"
#include "ops/flash_attention.h"
#include "support/op_case.h"

namespace rotor {
namespace {

using ops::AttentionOptions;
using test::OpEnv;
using test::random_floats;

const Device kGpu = Device::cuda(0);

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> lengths;
  int64_t rel_max;
  int64_t bias_q, bias_k;  // AttentionOptions::bias_q_offset, bias_k_offset
  float dropout;
  uint64_t seed;
};

struct Param {
  Case c;
  DType dtype;
};

// max |got - ref| / max(1, |ref|) allowed against the CPU in f32: fp32
// arithmetic on both sides (sums in other orders); the f16 core rounds P
// and dS to f16 (the bounds of tests/gpu/test_alibi_cuda.cpp, the table's
// gradient, a sum of up to B Tq Tk rounded terms, twice as loose).
double tolerance(DType dt, bool table) {
  const double t = dt == DType::F32 ? 2e-4 : 5e-3;
  return table ? 2 * t : t;
}

// One run's results, in f32.
struct Run {
  std::vector<float> out, probs, dq, dk, dv, grad;
};

// The inputs of a case, rounded to its dtype where the tensors hold it (the
// bias table and its gradient are f32 on every path).
struct Inputs {
  std::vector<float> q, k, v, dout, table, grad0;
};

Inputs inputs_of(const Case& c, DType dt) {
  const auto n = [](int64_t a, int64_t b, int64_t t, int64_t d) {
    return static_cast<size_t>(a * b * t * d);
  };
  const size_t rows = static_cast<size_t>((2 * c.rel_max + 1) * c.H);
  return {test::rounded(random_floats(n(c.B, c.H, c.Tq, c.D), c.seed, -2.0f, 2.0f), dt),
          test::rounded(random_floats(n(c.B, c.H, c.Tk, c.D), c.seed + 1), dt),
          test::rounded(random_floats(n(c.B, c.H, c.Tk, c.D), c.seed + 2), dt),
          test::rounded(random_floats(n(c.B, c.H, c.Tq, c.D), c.seed + 3), dt),
          random_floats(rows, c.seed + 4, -2.0f, 2.0f),
          random_floats(rows, c.seed + 5, -0.5f, 0.5f)};
}

AttentionOptions options_of(const Case& c, const OpEnv& e, const Inputs& x) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.lengths.empty()) o.key_lengths = e.ints(c.lengths, {c.B});
  o.dropout = c.dropout;
  o.seed = c.seed;
  o.stream = 3;
  o.bias_q_offset = c.bias_q;
  o.bias_k_offset = c.bias_k;
  o.rel_max = c.rel_max;
  const Shape table{2 * c.rel_max + 1, c.H};  // f32 [2 rel_max + 1, H]
  o.rel_bias = e.in_f32(x.table, table);
  o.rel_bias_grad = e.in_f32(x.grad0, table);
  return o;
}

// The forward and the backward of the case on e's device and dtype;
// `backwards` backward runs, each into a fresh rel_bias_grad holding grad0
// (the last one's results returned; grads receives every run's table
// gradient).
Run run_on(const Case& c, const OpEnv& e, const Inputs& x, int backwards = 1,
           std::vector<std::vector<float>>* grads = nullptr) {
  const Shape table{2 * c.rel_max + 1, c.H};  // f32 [2 rel_max + 1, H]
  const Shape qs{c.B, c.H, c.Tq, c.D}, ks{c.B, c.H, c.Tk, c.D};
  const Tensor q = e.in(x.q, qs), k = e.in(x.k, ks), v = e.in(x.v, ks), dout = e.in(x.dout, qs);
  AttentionOptions o = options_of(c, e, x);
  Tensor y = e.zeros(qs), probs = e.zeros({c.B, c.H, c.Tq, c.Tk});  // [B, H, Tq, Tk]
  Tensor dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  ops::attention_forward(q, k, v, o, y, probs);
  for (int r = 0; r < backwards; ++r) {
    o.rel_bias_grad = e.in_f32(x.grad0, table);
    ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
    if (grads) grads->push_back(o.rel_bias_grad.to_floats());
  }
  return {y.to_floats(),  probs.to_floats(), dq.to_floats(),
          dk.to_floats(), dv.to_floats(),    o.rel_bias_grad.to_floats()};
}

double err(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  return test::op_error({got.begin(), got.end()}, {ref.begin(), ref.end()});
}

void run_case(const Param& p) {
  const Case& c = p.c;
  const Inputs x = inputs_of(c, p.dtype);
  // The CPU in f32 on the dtype's values: the ground truth.
  const Run ref = run_on(c, OpEnv{Device::cpu(), DType::F32, p.dtype}, x);
  const Run got = run_on(c, OpEnv{kGpu, p.dtype, p.dtype}, x);
  const double tol = tolerance(p.dtype, false);
  EXPECT_LE(err(got.out, ref.out), tol) << "out";
  EXPECT_LE(err(got.probs, ref.probs), tol) << "probs";
  EXPECT_LE(err(got.dq, ref.dq), tol) << "dq";
  EXPECT_LE(err(got.dk, ref.dk), tol) << "dk";
  EXPECT_LE(err(got.dv, ref.dv), tol) << "dv";
  EXPECT_LE(err(got.grad, ref.grad), tolerance(p.dtype, true)) << "rel_bias_grad";
  // The gradient was added: grad0 alone is off by the whole sum. (With one
  // table row that sum is the sum of every row of dS / scale, 0: each row of
  // P o (dP - rowsum(P o dP)) sums to 0 as P does to 1.)
  if (c.rel_max > 0) {
    EXPECT_GT(err(x.grad0, ref.grad), tolerance(p.dtype, true)) << "rel_bias_grad unchanged";
  }
}

std::vector<Param> params() {
  const std::vector<Case> cases = {
      // B, H, Tq, Tk, D, causal, key lengths, rel_max, bias_q, bias_k, dropout, seed
      {2, 4, 40, 40, 32, false, {}, 8, 0, 0, 0.0f, 10},          // distances up to 39 both ways
      {2, 4, 40, 40, 32, true, {40, 23}, 16, 0, 0, 0.0f, 20},    // causal, padding
      {1, 4, 24, 40, 32, true, {}, 8, 5, 2, 0.0f, 30},           // Tq < Tk, position offsets
      {2, 4, 40, 24, 32, false, {24, 0}, 8, 0, 3, 0.0f, 40},     // Tq > Tk, a row with no key
      {2, 4, 40, 24, 64, true, {}, 16, 0, 0, 0.0f, 50},          // Tq > Tk causal: rows see none
      {2, 4, 40, 40, 32, true, {33, 40}, 8, 0, 0, 0.1f, 60},     // dropout
      {1, 4, 17, 17, 32, false, {}, 0, 0, 0, 0.0f, 70},          // one row for every distance
      {2, 4, 40, 40, 32, false, {31, 40}, 16, -7, 4, 0.0f, 80},  // negative query offset
  };
  std::vector<Param> ps;
  for (const Case& c : cases) ps.push_back({c, DType::F32});
  for (int i : {0, 2, 5}) ps.push_back({cases[static_cast<size_t>(i)], DType::F16});
  return ps;
}

// gtest prints a failing case by its dtype (the name says the rest).
void PrintTo(const Param& p, std::ostream* os) {
  *os << dtype_name(p.dtype);
}

class T5BiasReference : public testing::TestWithParam<Param> {};

TEST_P(T5BiasReference, MatchesTheCpuCore) {
  ROTOR_REQUIRE_GPU();
  run_case(GetParam());
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  const Case& c = info.param.c;
  std::string n = fmt::format("{}_B{}_H{}_Tq{}_Tk{}_D{}{}{}_R{}_q{}_k{}{}",
                              dtype_name(info.param.dtype), c.B, c.H, c.Tq, c.Tk, c.D,
                              c.causal ? "_causal" : "", c.lengths.empty() ? "" : "_lengths",
                              c.rel_max, c.bias_q, c.bias_k, c.dropout > 0.0f ? "_dropout" : "");
  for (char& ch : n)
    if (ch == '-') ch = 'm';  // a negative offset
  return n;
}

INSTANTIATE_TEST_SUITE_P(Cases, T5BiasReference, testing::ValuesIn(params()), param_name);

// The flash kernels: out, dq, dk, dv and the table's gradient of one
// forward and backward through `kernel` on the GPU.
Run run_flash(const Case& c, const OpEnv& e, const Inputs& x, ops::FlashKernel kernel) {
  const Shape qs{c.B, c.H, c.Tq, c.D}, ks{c.B, c.H, c.Tk, c.D};
  const Tensor q = e.in(x.q, qs), k = e.in(x.k, ks), v = e.in(x.v, ks), dout = e.in(x.dout, qs);
  AttentionOptions o = options_of(c, e, x);
  o.flash_kernel = kernel;
  Tensor y = e.zeros(qs), lse = Tensor::zeros({c.B, c.H, c.Tq}, DType::F32, e.device);
  Tensor dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  ops::flash_attention_forward(q, k, v, o, y, lse);
  ops::flash_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
  return {y.to_floats(),  {},
          dq.to_floats(), dk.to_floats(),
          dv.to_floats(), o.rel_bias_grad.to_floats()};
}

struct FlashParam {
  Case c;
  DType dtype;
  ops::FlashKernel kernel;
};

void PrintTo(const FlashParam& p, std::ostream* os) {
  *os << ops::flash_kernel_name(p.kernel) << " " << dtype_name(p.dtype);
}

std::vector<FlashParam> flash_params() {
  std::vector<FlashParam> ps;
  for (const Param& p : params()) {
    if (p.dtype == DType::F32) ps.push_back({p.c, DType::F32, ops::FlashKernel::Portable});
    if (p.dtype == DType::F16) {
      ps.push_back({p.c, DType::F16, ops::FlashKernel::Portable});
      ps.push_back({p.c, DType::F16, ops::FlashKernel::TensorCore});
      ps.push_back({p.c, DType::BF16, ops::FlashKernel::TensorCore});
      if (p.c.D >= 64) ps.push_back({p.c, DType::F16, ops::FlashKernel::Volta});
    }
  }
  // Head dim 64 for the Volta kernel (it has no 32), and a longer row with
  // several key and query tiles per block.
  ps.push_back({{2, 4, 40, 40, 64, true, {40, 23}, 16, 0, 0, 0.1f, 100},
                DType::F16,
                ops::FlashKernel::Volta});
  for (ops::FlashKernel k : {ops::FlashKernel::Portable, ops::FlashKernel::TensorCore})
    ps.push_back({{2, 2, 300, 300, 64, true, {300, 170}, 128, 0, 0, 0.0f, 110}, DType::F16, k});
  return ps;
}

class T5BiasFlash : public testing::TestWithParam<FlashParam> {};

TEST_P(T5BiasFlash, MatchesTheCpuCore) {
  ROTOR_REQUIRE_GPU();
  const FlashParam& p = GetParam();
  const Case& c = p.c;
  ops::FlashCase fc{p.dtype, c.B, c.H, c.Tq, c.Tk, c.D};
  fc.rel_bias = true;
  fc.rel_max = c.rel_max;
  const std::string why = ops::flash_kernel_unsupported(p.kernel, fc, ops::attention_device(kGpu));
  if (!why.empty()) GTEST_SKIP() << why;
  const Inputs x = inputs_of(c, p.dtype);
  const auto got = run_flash(c, OpEnv{kGpu, p.dtype, p.dtype}, x, p.kernel);

  // The same attention in double on the same (rounded) inputs.
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));  // options_of's
  emu::AttentionShape shape{c.B,      c.H,       c.Tq,      c.Tk,  static_cast<int>(c.D),
                            c.causal, c.lengths, c.dropout, scale, c.seed,
                            3};  // AttentionOptions::stream of options_of
  shape.bias_q_offset = c.bias_q;
  shape.bias_k_offset = c.bias_k;
  shape.rel.assign(x.table.begin(), x.table.end());
  shape.rel_max = c.rel_max;
  auto dbl = [](const std::vector<float>& a) { return std::vector<double>(a.begin(), a.end()); };
  const emu::AttentionResult ref =
      emu::reference_attention(shape, dbl(x.q), dbl(x.k), dbl(x.v), dbl(x.dout));
  std::vector<double> table_want(x.grad0.begin(), x.grad0.end());
  for (size_t e = 0; e < ref.drel.size(); ++e) table_want[e] += ref.drel[e];

  // bf16 rounds P and dS to 8 bits of mantissa: three times f16's bound.
  const double tol = (p.dtype == DType::BF16 ? 3.0 : 1.0) * tolerance(p.dtype, false);
  EXPECT_LE(emu::max_err(ref.out, got.out), tol) << "out";
  EXPECT_LE(emu::max_err(ref.dq, got.dq), tol) << "dq";
  EXPECT_LE(emu::max_err(ref.dk, got.dk), tol) << "dk";
  EXPECT_LE(emu::max_err(ref.dv, got.dv), tol) << "dv";
  EXPECT_LE(emu::rel_err(table_want, ref.drel_mass, got.grad), tol) << "rel_bias_grad";
}

std::string flash_param_name(const testing::TestParamInfo<FlashParam>& info) {
  const Case& c = info.param.c;
  std::string n =
      fmt::format("{}_{}_B{}_Tq{}_Tk{}_D{}{}{}_R{}_q{}_k{}{}",
                  ops::flash_kernel_name(info.param.kernel), dtype_name(info.param.dtype), c.B,
                  c.Tq, c.Tk, c.D, c.causal ? "_causal" : "", c.lengths.empty() ? "" : "_lengths",
                  c.rel_max, c.bias_q, c.bias_k, c.dropout > 0.0f ? "_dropout" : "");
  for (char& ch : n)
    if (ch == '-') ch = 'm';  // a negative offset
  return n;
}

INSTANTIATE_TEST_SUITE_P(Cases, T5BiasFlash, testing::ValuesIn(flash_params()), flash_param_name);

// The table's gradient has no atomics (kernels/attention_reference.cu: one
// thread per diagonal, one warp per table entry, fixed orders): two backward
// runs give the same bits. Several warps and blocks per (b, h) of the
// diagonal pass (Tq + Tk - 1 = 299 diagonals), a 16-bit and an f32 dtype.
TEST(T5BiasDeterminism, TwoBackwardRunsGiveTheSameBits) {
  ROTOR_REQUIRE_GPU();
  for (DType dt : {DType::F32, DType::BF16}) {
    const Case c{3, 4, 150, 150, 64, true, {150, 97, 120}, 32, 0, 0, 0.1f, 90};
    const Inputs x = inputs_of(c, dt);
    std::vector<std::vector<float>> grads;
    run_on(c, OpEnv{kGpu, dt, dt}, x, 2, &grads);
    ASSERT_EQ(grads.size(), 2u);
    ASSERT_EQ(grads[0].size(), grads[1].size());
    EXPECT_EQ(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(float)), 0)
        << dtype_name(dt) << ": two runs differ";
    EXPECT_GT(err(x.grad0, grads[0]), 1e-3) << dtype_name(dt) << ": rel_bias_grad unchanged";
  }
}

}  // namespace
}  // namespace rotor
