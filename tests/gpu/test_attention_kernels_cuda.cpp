// Every attention kernel on a GPU against the CPU twin of rotor's flash core,
// from one table keyed by kernel: rotor's portable, tensor-core (tc) and Volta
// flash kernels, and cuDNN's fused attention. Each case of the table runs on
// every kernel whose design takes it (dtype, head dim, RoPE inside the kernel,
// dropout masks that are rotor's, causal rows that see no key), and skips
// with one line where this GPU or build cannot run it (ops/attention_device.h
// says why). The bound is FlashAttention's (tests/support/op_case.h): the
// kernel's error against the fp32 CPU result is at most twice the error of
// the same attention done plainly in its precision -- q and k rotated on the
// host and rounded, the reference attention on the GPU (which rounds the
// probabilities), dq and dk rotated back and rounded -- for out, dq, dk, dv.
// The kernel is named in AttentionOptions::flash_kernel, as the attention plan
// (nn/attention_plan.h) names it for a layer. cuDNN's own dropout and the
// layer-level checks are in test_cudnn_attention_cuda.cpp.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/philox.h"
#include "core/rope.h"
#include "ops/attention.h"
#include "ops/attention_device.h"
#include "ops/cudnn_attention.h"
#include "ops/flash_attention.h"
#include "support/op_case.h"
#if ROTOR_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/flash_attention_sm70.cuh"
#endif

namespace rotor {
namespace {

using ops::AttentionOptions;
using ops::FlashKernel;
using test::OpCase;
using test::OpEnv;
using test::OpOutputs;
using test::out;
using test::random_floats;

const Device kGpu = Device::cuda(0);

// The kernels of the table. Cudnn is not a FlashKernel: it has its own op.
enum class Kernel { Portable, Tc, Volta, Cudnn };
const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::Portable:
      return "portable";
    case Kernel::Tc:
      return "tc";
    case Kernel::Volta:
      return "volta";
    case Kernel::Cudnn:
      return "cudnn";
  }
  return "?";
}
FlashKernel flash_kernel_of(Kernel k) {
  return k == Kernel::Tc      ? FlashKernel::TensorCore
         : k == Kernel::Volta ? FlashKernel::Volta
                              : FlashKernel::Portable;
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;
  float dropout;
  bool rope;
  int64_t q_offset, k_offset;
  uint64_t seed;
};

AttentionOptions options_for(const Case& c, const OpEnv& e, Kernel kernel) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  if (!c.key_lengths.empty()) o.key_lengths = e.ints(c.key_lengths, {c.B});
  o.dropout = c.dropout;
  o.seed = 97531;
  o.stream = rng_stream(11, 2, RngPurpose::AttentionDropout, 0);
  o.rope = c.rope;
  o.rope_params = rope::Params{};
  o.rope_q_offset = c.q_offset;
  o.rope_k_offset = c.k_offset;
  o.flash_kernel = flash_kernel_of(kernel);
  return o;
}

// v [B, H, T, D] (flat) rotated by RoPE on the host (back: the inverse), row t
// at position offset + t: core/rope.h, as the kernels' tables.
std::vector<float> rotate_rows(std::vector<float> v, int64_t T, int64_t D, int64_t offset,
                               bool back) {
  const int64_t rows = static_cast<int64_t>(v.size()) / D;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < D / 2; ++i) {
      const rope::Rotation rot = rope::rotation(rope::Params{}, offset + r % T, i, D);
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

// The kernel under test on CUDA; on the CPU the flash core's twin (which
// every kernel is held to).
OpOutputs run_kernel(const Case& c, const OpEnv& e, Kernel kernel) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const Inputs in = inputs_of(c, e.inputs);
  const Tensor q = e.in(in.q, qs), k = e.in(in.k, ks), v = e.in(in.v, ks), dout = e.in(in.dout, qs);
  const AttentionOptions o = options_for(c, e, kernel);
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  Tensor lse = e.zeros_f32({c.B, c.H, c.Tq});  // [B, H, Tq]
  if (kernel == Kernel::Cudnn && e.device.is_cuda()) {
    ops::cudnn_attention_forward(q, k, v, o, y, lse);
    ops::cudnn_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
    // lse as well: cuDNN's is its own computation (rotor's kernels share the twin's).
    return {out("out", y), out("lse", lse, 2e-3), out("dq", dq), out("dk", dk), out("dv", dv)};
  }
  ops::flash_attention_forward(q, k, v, o, y, lse);
  ops::flash_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
  OpOutputs r = {out("out", y, 1e-5), out("dq", dq, 1e-4), out("dk", dk, 1e-4),
                 out("dv", dv, 1e-4)};
  if (kernel == Kernel::Cudnn) r.insert(r.begin() + 1, out("lse", lse, 2e-3));
  return r;
}

// The same attention done plainly in the dtype on the GPU: q and k rotated on
// the host and rounded, the reference attention, dq and dk rotated back and
// rounded.
OpOutputs run_plain(const Case& c, const OpEnv& e, Kernel kernel) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  Inputs in = inputs_of(c, e.inputs);
  if (c.rope) {
    in.q = rotate_rows(in.q, c.Tq, c.D, c.q_offset, false);
    in.k = rotate_rows(in.k, c.Tk, c.D, c.k_offset, false);
  }
  const Tensor q = e.in(in.q, qs), k = e.in(in.k, ks), v = e.in(in.v, ks), dout = e.in(in.dout, qs);
  AttentionOptions o = options_for(c, e, kernel);
  o.rope = false;
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});  // [B, H, Tq, Tk]
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
  // No lse in the reference: an f32 output, compared with the CPU's only (op_case.h).
  if (kernel == Kernel::Cudnn) r.insert(r.begin() + 1, out("lse", Tensor::zeros({c.B, c.H, c.Tq})));
  return r;
}

// Whether `kernel`'s design takes the case in `dt` (the GPU's own limits are
// asked when the case runs).
bool designed_for(Kernel kernel, const Case& c, DType dt) {
  if (kernel == Kernel::Cudnn) {
    // cuDNN draws its own dropout masks (test_cudnn_attention_cuda.cpp checks
    // them), takes no RoPE, and rows without keys are outside its contract.
    if (c.dropout > 0.0f || c.rope) return false;
    for (int32_t len : c.key_lengths)
      if (len == 0) return false;
    ops::CudnnAttentionCase cc{dt,  c.B, c.H, c.Tq, c.Tk, c.D, c.causal, !c.key_lengths.empty(),
                               0.0f};
    return ops::cudnn_attention_unsupported(cc, {true, 90, 91400}).empty();
  }
  ops::AttentionDevice any;  // a GPU that has every kernel's code
  any.cuda = true;
  any.sm = kernel == Kernel::Volta ? 70 : 90;
  any.tc_code = any.volta_code = true;
  const ops::FlashCase fc{dt, c.B, c.H, c.Tq, c.Tk, c.D, c.rope};
  return ops::flash_kernel_unsupported(flash_kernel_of(kernel), fc, any).empty();
}

// "" when this GPU and build run the case on `kernel`, else why not.
std::string unavailable(Kernel kernel, const Case& c, DType dt) {
  if (kernel == Kernel::Cudnn) {
    const ops::CudnnAttentionCase cc{
        dt, c.B, c.H, c.Tq, c.Tk, c.D, c.causal, !c.key_lengths.empty(), 0.0f};
    return ops::cudnn_attention_unsupported(cc, ops::cudnn_capability(kGpu));
  }
  const ops::FlashCase fc{dt, c.B, c.H, c.Tq, c.Tk, c.D, c.rope};
  return ops::flash_kernel_unsupported(flash_kernel_of(kernel), fc, ops::attention_device(kGpu));
}

struct KernelCase {
  Kernel kernel;
  Case c;
  OpCase op;
};

std::vector<KernelCase> kernel_cases() {
  const std::vector<Case> shapes = {
      // B, H, Tq, Tk, D, causal, key lengths, dropout, rope, q offset, k offset, seed
      {2, 2, 1, 1, 64, false, {}, 0.0f, false, 0, 0, 10},
      {1, 1, 1, 1, 32, false, {}, 0.0f, false, 0, 0, 15},
      {2, 3, 7, 7, 64, true, {}, 0.0f, false, 0, 0, 20},
      {2, 2, 64, 64, 64, false, {}, 0.0f, false, 0, 0, 25},
      {2, 3, 129, 129, 64, true, {129, 77}, 0.0f, false, 0, 0, 30},  // partial tiles, padding
      {2, 2, 129, 129, 128, false, {100, 3}, 0.0f, false, 0, 0, 35},
      {2, 2, 37, 45, 64, false, {45, 12}, 0.0f, false, 0, 0, 38},  // cross-attention
      {1, 2, 513, 513, 128, true, {}, 0.0f, false, 0, 0, 40},
      {1, 2, 513, 513, 32, false, {}, 0.0f, false, 0, 0, 45},
      {2, 4, 256, 256, 64, false, {256, 200}, 0.0f, false, 0, 0, 48},
      {1, 1, 4096, 4096, 64, true, {}, 0.0f, false, 0, 0, 50},
      {1, 2, 7, 200, 32, true, {}, 0.0f, false, 0, 0, 60},     // Tq < Tk
      {1, 2, 7, 200, 128, true, {}, 0.0f, false, 0, 0, 62},    // Tq < Tk
      {1, 2, 300, 100, 64, true, {}, 0.0f, false, 0, 0, 65},   // Tq > Tk: rows see no key
      {2, 1, 70, 5, 32, true, {5, 0}, 0.0f, false, 0, 0, 70},  // fully masked rows
      {2, 1, 70, 5, 64, true, {5, 0}, 0.0f, false, 0, 0, 72},  // fully masked rows
      {2, 2, 100, 100, 64, false, {100, 31}, 0.2f, false, 0, 0, 80},
      {1, 2, 90, 150, 128, false, {}, 0.1f, false, 0, 0, 85},
      {1, 2, 129, 257, 128, true, {}, 0.1f, false, 0, 0, 90},
      // RoPE in the kernel.
      {2, 2, 1, 1, 64, false, {}, 0.0f, true, 0, 0, 100},
      {2, 2, 129, 129, 64, true, {129, 77}, 0.0f, true, 5, 5, 110},
      {1, 2, 513, 513, 128, true, {}, 0.0f, true, 0, 0, 120},
      {1, 2, 7, 200, 128, true, {}, 0.0f, true, 193, 0, 130},  // decoding-like offsets
      {2, 2, 100, 100, 32, false, {100, 31}, 0.2f, true, 1500, 1500, 140},
      {1, 1, 4096, 4096, 128, true, {}, 0.1f, true, 0, 0, 150},
  };
  std::vector<KernelCase> cs;
  for (Kernel kernel : {Kernel::Portable, Kernel::Tc, Kernel::Volta, Kernel::Cudnn})
    for (const Case& c : shapes)
      for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
        if (!designed_for(kernel, c, dt)) continue;
        // The portable kernel's 16-bit cases cover the short shapes; the long
        // ones are the tensor-core kernels' business.
        if (kernel == Kernel::Portable && dt != DType::F32 && c.Tq * c.Tk > 300 * 300) continue;
        KernelCase kc{kernel, c, {}};
        kc.op.op = std::string("attention_") + kernel_name(kernel);
        kc.op.config = fmt::format("B{}_H{}_Tq{}_Tk{}_D{}{}{}_drop{}{}", c.B, c.H, c.Tq, c.Tk, c.D,
                                   c.causal ? "_causal" : "",
                                   c.key_lengths.empty() ? "" : "_lengths", int(c.dropout * 10),
                                   c.rope ? fmt::format("_rope{}_{}", c.q_offset, c.k_offset) : "");
        kc.op.dtype = dt;
        kc.op.run = [c, kernel](const OpEnv& e) { return run_kernel(c, e, kernel); };
        kc.op.plain = [c, kernel](const OpEnv& e) { return run_plain(c, e, kernel); };
        kc.op.floor = 1e-4;
        cs.push_back(std::move(kc));
      }
  return cs;
}

class AttentionKernels : public testing::TestWithParam<KernelCase> {};

TEST_P(AttentionKernels, MatchCpu) {
  ROTOR_REQUIRE_GPU();
  const KernelCase& kc = GetParam();
  const std::string why = unavailable(kc.kernel, kc.c, kc.op.dtype);
  if (!why.empty()) GTEST_SKIP() << why;
  test::check_op_case(kc.op);
}

std::string kernel_case_name(const testing::TestParamInfo<KernelCase>& info) {
  return test::op_case_name(testing::TestParamInfo<OpCase>(info.param.op, info.index));
}

INSTANTIATE_TEST_SUITE_P(Table, AttentionKernels, testing::ValuesIn(kernel_cases()),
                         kernel_case_name);

// The portable kernel and the tensor-core one agree (same masks, same
// dropout) within 16-bit rounding, each named explicitly.
TEST(CudaOps, attention_tc_MatchesThePortableKernel) {
  ROTOR_REQUIRE_GPU();
  const Case c{2, 2, 150, 150, 64, true, {150, 90}, 0.15f, false, 0, 0, 7};
  const std::string why = unavailable(Kernel::Tc, c, DType::BF16);
  if (!why.empty()) GTEST_SKIP() << why;
  const OpEnv e{kGpu, DType::BF16, DType::BF16};
  const OpOutputs tc = run_kernel(c, e, Kernel::Tc);
  const OpOutputs portable = run_kernel(c, e, Kernel::Portable);
  ASSERT_EQ(tc.size(), portable.size());
  for (size_t i = 0; i < tc.size(); ++i)
    EXPECT_LE(test::op_error(tc[i].values, portable[i].values), 0.05) << tc[i].name;
}

// A kernel asked for a case it cannot run is an error naming why, never a
// quiet switch to another kernel.
TEST(CudaOps, attention_KernelsRefuseWhatTheyCannotRun) {
  ROTOR_REQUIRE_GPU();
  auto refuses = [](const Shape& s, DType dt, AttentionOptions o, const std::string& part) {
    Tensor q = Tensor::zeros(s, dt, kGpu), y = Tensor::zeros(s, dt, kGpu);
    Tensor lse = Tensor::zeros({s[0], s[1], s[2]}, DType::F32, kGpu);
    try {
      ops::flash_attention_forward(q, q, q, o, y, lse);
      ADD_FAILURE() << "expected an error with \"" << part << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  AttentionOptions o;
  refuses({1, 1, 4, 48}, DType::F32, o, "head dims 32, 64 and 128, not 48");
  o.rope = true;  // RoPE inside the kernel is the tc kernel's alone
  refuses({1, 1, 4, 64}, DType::F32, o, "tensor-core kernel's alone");
  o.rope = false;
  o.flash_kernel = FlashKernel::TensorCore;
  refuses({1, 1, 4, 64}, DType::F32, o, "f16 or bf16, not f32");
  o.flash_kernel = FlashKernel::Volta;
  refuses({1, 1, 4, 64}, DType::BF16, o, "volta");
}

#if ROTOR_WITH_CUDA
// Elsewhere than on Volta (sm_80+, or a build without sm_70 code) the Volta
// entry points refuse before launching anything.
TEST(CudaOps, attention_volta_EntryPointsRefuseOtherDevices) {
  ROTOR_REQUIRE_GPU();
  if (kernels::flash_attention_sm70_available()) GTEST_SKIP() << "a Volta GPU: the kernels run";
  kernels::FlashParams p;
  p.B = p.H = p.Tq = p.Tk = 1;
  p.D = 64;
  EXPECT_EQ(kernels::flash_attention_sm70_forward(p, nullptr, nullptr, 0), cudaErrorNotSupported);
  EXPECT_EQ(kernels::flash_attention_sm70_backward(p, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                   nullptr, nullptr, nullptr, 0),
            cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}
#endif

// No GPU needed: the reference attention refuses rope instead of ignoring it.
TEST(AttentionKernelOptions, ReferenceAttentionRejectsRope) {
  AttentionOptions o;
  o.rope = true;
  Tensor q = Tensor::zeros({1, 1, 4, 8}, DType::F32);      // [B, H, T, D]
  Tensor y = Tensor::zeros({1, 1, 4, 8}, DType::F32);      // [B, H, T, D]
  Tensor probs = Tensor::zeros({1, 1, 4, 4}, DType::F32);  // [B, H, Tq, Tk]
  EXPECT_THROW(ops::attention_forward(q, q, q, o, y, probs), Error);
}

// No GPU needed: the CPU twin's rope equals rotating q and k first and running
// the reference attention (forward), and its dq, dk are that problem's
// gradients rotated back -- padding, causal with Tq != Tk and dropout included.
TEST(AttentionKernelOptions, CpuTwinRopeIsRotationThenAttention) {
  const Case c{2, 2, 9, 13, 8, true, {13, 6}, 0.25f, true, 3, 1, 17};
  const OpEnv e{Device::cpu(), DType::F32, DType::F32};
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const Inputs in = inputs_of(c, DType::F32);
  const AttentionOptions o = options_for(c, e, Kernel::Portable);
  AttentionOptions plain = o;
  plain.rope = false;
  const Tensor q = e.in(in.q, qs), k = e.in(in.k, ks), v = e.in(in.v, ks), dout = e.in(in.dout, qs);
  const Tensor qr = e.in(rotate_rows(in.q, c.Tq, c.D, c.q_offset, false), qs);
  const Tensor kr = e.in(rotate_rows(in.k, c.Tk, c.D, c.k_offset, false), ks);
  Tensor y1 = e.zeros(qs), y2 = e.zeros(qs), lse = e.zeros_f32({c.B, c.H, c.Tq});
  Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});  // [B, H, Tq, Tk]
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
