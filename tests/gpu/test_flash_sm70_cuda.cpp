// The Volta tensor-core flash attention (kernels/flash_attention_sm70.cu)
// against the CPU twin (src/ops/flash_attention.cpp), as a table of f16 cases
// (tests/support/op_case.h): the kernel's error against the fp32 result on the
// same rounded inputs must stay within twice the error of the same attention
// done plainly in f16 (the reference attention on the GPU, which rounds the
// probabilities), for out and dq, dk, dv. The kernels are called directly
// (the op dispatches to them on Volta; this pins the kernel under test). Skipped unless the GPU is
// Volta (compute capability 7.0/7.2) and the build carries sm_70 code (CUDA 12,
// CMAKE_CUDA_ARCHITECTURES=70); on any other GPU the entry points must refuse
// with cudaErrorNotSupported.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "support/op_case.h"
#if ROTOR_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/flash_attention_sm70.cuh"
#endif

namespace rotor {
namespace {

#if ROTOR_WITH_CUDA

using ops::AttentionOptions;
using test::OpCase;
using test::OpEnv;
using test::OpOutputs;
using test::out;
using test::random_floats;

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

kernels::FlashParams params_of(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionOptions& o) {
  kernels::FlashParams p;
  p.q = q.raw();
  p.k = k.raw();
  p.v = v.raw();
  p.B = q.size(0);
  p.H = q.size(1);
  p.Tq = q.size(2);
  p.Tk = k.size(2);
  p.D = static_cast<int>(q.size(3));
  p.scale = o.scale;
  p.causal = o.causal;
  if (o.key_lengths.defined()) p.key_lengths = o.key_lengths.data<int32_t>();
  p.dropout = o.dropout;
  p.seed = o.seed;
  p.stream_id = o.stream;
  return p;
}

enum class Core { Sm70OrCpuTwin, Reference };

// Forward and backward on the case's inputs; outputs out, dq, dk, dv. On the
// GPU Sm70OrCpuTwin runs the Volta kernels, on the CPU the flash twin.
OpOutputs run_attention(const Case& c, const OpEnv& e, Core core) {
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  const Tensor q = e.in(random_floats(shape_numel(qs), c.seed, -2.0f, 2.0f), qs);
  const Tensor k = e.in(random_floats(shape_numel(ks), c.seed + 1), ks);
  const Tensor v = e.in(random_floats(shape_numel(ks), c.seed + 2), ks);
  const Tensor dout = e.in(random_floats(shape_numel(qs), c.seed + 3), qs);
  const AttentionOptions o = options_for(c, e);
  Tensor y = e.zeros(qs), dq = e.zeros(qs), dk = e.zeros(ks), dv = e.zeros(ks);
  if (core == Core::Reference) {
    Tensor probs = e.zeros({c.B, c.H, c.Tq, c.Tk});
    ops::attention_forward(q, k, v, o, y, probs);
    ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
  } else if (e.device.is_cpu()) {
    Tensor lse = e.zeros_f32({c.B, c.H, c.Tq});
    ops::flash_attention_forward(q, k, v, o, y, lse);
    ops::flash_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
  } else {
    Tensor lse = e.zeros_f32({c.B, c.H, c.Tq});
    Tensor dq_accum = e.zeros_f32(qs), delta = e.zeros_f32({c.B, c.H, c.Tq});
    const kernels::FlashParams p = params_of(q, k, v, o);
    // The default stream: synchronize around it with rotor's own streams.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const cudaError_t fwd = kernels::flash_attention_sm70_forward(p, y.raw(), lse.data<float>(), 0);
    EXPECT_EQ(fwd, cudaSuccess) << cudaGetErrorString(fwd);
    const cudaError_t bwd = kernels::flash_attention_sm70_backward(
        p, y.raw(), lse.data<float>(), dout.raw(), dq.raw(), dk.raw(), dv.raw(),
        dq_accum.data<float>(), delta.data<float>(), 0);
    EXPECT_EQ(bwd, cudaSuccess) << cudaGetErrorString(bwd);
    const cudaError_t done = cudaDeviceSynchronize();
    EXPECT_EQ(done, cudaSuccess) << cudaGetErrorString(done);
  }
  return {out("out", y, 1e-5), out("dq", dq, 1e-4), out("dk", dk, 1e-4), out("dv", dv, 1e-4)};
}

std::vector<OpCase> sm70_cases() {
  const std::vector<Case> shapes = {
      {2, 2, 64, 64, 64, false, {}, 0.0f, 10},
      {2, 3, 129, 129, 64, true, {129, 77}, 0.0f, 20},  // partial tiles, padding
      {1, 2, 7, 200, 128, true, {}, 0.0f, 30},          // Tq < Tk under the causal mask
      {2, 1, 70, 5, 64, true, {5, 0}, 0.0f, 40},        // fully masked rows
      {1, 2, 513, 513, 128, true, {}, 0.0f, 50},
      {2, 2, 100, 100, 64, false, {100, 31}, 0.2f, 60},  // dropout: the portable kernel's masks
      {1, 2, 90, 150, 128, false, {}, 0.1f, 70},
      {1, 1, 1, 1, 64, false, {}, 0.0f, 80},
  };
  std::vector<OpCase> cs;
  for (const Case& c : shapes) {
    OpCase oc;
    oc.op = "flash_attention_sm70";
    oc.config = fmt::format("B{}_H{}_Tq{}_Tk{}_D{}{}{}_drop{}", c.B, c.H, c.Tq, c.Tk, c.D,
                            c.causal ? "_causal" : "", c.key_lengths.empty() ? "" : "_lengths",
                            int(c.dropout * 10));
    oc.dtype = DType::F16;
    oc.run = [c](const OpEnv& e) { return run_attention(c, e, Core::Sm70OrCpuTwin); };
    oc.plain = [c](const OpEnv& e) { return run_attention(c, e, Core::Reference); };
    oc.floor = 1e-4;
    cs.push_back(std::move(oc));
  }
  return cs;
}

class FlashSm70 : public testing::TestWithParam<OpCase> {};

TEST_P(FlashSm70, MatchesCpu) {
  ROTOR_REQUIRE_GPU();
  if (!kernels::flash_attention_sm70_available())
    GTEST_SKIP() << "needs a Volta GPU (compute capability 7.0) and a build with sm_70 code";
  test::check_op_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Volta, FlashSm70, testing::ValuesIn(sm70_cases()), test::op_case_name);

// Elsewhere (sm_80+, or a build without sm_70 code) the entry points refuse
// before launching anything, so that the dispatch can fall back.
TEST(CudaOps, flash_attention_sm70_RefusesOtherDevices) {
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

#else

TEST(CudaOps, flash_attention_sm70_NeedsCuda) {
  GTEST_SKIP() << "built without CUDA: GPU test skipped";
}

#endif  // ROTOR_WITH_CUDA

}  // namespace
}  // namespace rotor
