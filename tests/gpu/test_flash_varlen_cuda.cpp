// The flash kernels' variable-length layout (ops::AttentionOptions::cu_seqlens_q,
// FlashAttention's cu_seqlens) on a GPU: for rotor's portable, tensor-core
// and Volta kernels, documents laid end to end give what the same kernel
// gives them regrouped, one a row with key lengths -- the forward's out and
// lse bit for bit, dk and dv within 1e-6 and dq within fp32 atomics' order
// -- and both agree with the CPU twin's
// variable-length run within the dtype's rounding. Documents of one token,
// one filling the longest length and many short ones; causal, dropout, ALiBi,
// RoPE inside the tc kernel, and a cross-attention case. The same contract
// runs without a GPU in tests/cpu/test_flash_varlen.cpp (the CPU twin) and in
// tests/emulation (each kernel's device code).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "core/device.h"
#include "ops/attention.h"
#include "ops/attention_device.h"
#include "ops/flash_attention.h"
#include "support/op_case.h"
#include "support/test_util.h"
#include "support/varlen_layout.h"

namespace rotor {
namespace {

using ops::AttentionOptions;
using ops::FlashKernel;
using test::longest;
using test::offsets;
using test::random_floats;
using test::regroup;
using test::stream_of;

struct VarlenGpuCase {
  std::string name;
  FlashKernel kernel;
  DType dtype;
  int64_t D;
  std::vector<int32_t> q_lengths, k_lengths;  // k_lengths empty: the queries'
  bool causal = false, alibi = false, rope = false;
  float dropout = 0.0f;
};

void PrintTo(const VarlenGpuCase& c, std::ostream* os) {
  *os << c.name;
}

// max |a - b| / max(1, |b|) (test::op_error).
double error_of(const std::vector<float>& a, const std::vector<float>& b) {
  return test::op_error(std::vector<double>(a.begin(), a.end()),
                        std::vector<double>(b.begin(), b.end()));
}

// One call's results on the host (f32 values of whatever dtype).
struct CallResult {
  std::vector<float> out, lse, dq, dk, dv;
};

class FlashVarlenCuda : public ::testing::TestWithParam<VarlenGpuCase> {};

TEST_P(FlashVarlenCuda, EndToEndEqualsRegroupedAndTheCpu) {
  ROTOR_REQUIRE_GPU();
  const VarlenGpuCase& c = GetParam();
  const Device gpu = Device::cuda(0);
  const std::vector<int32_t>& ql = c.q_lengths;
  const std::vector<int32_t>& kl = c.k_lengths.empty() ? c.q_lengths : c.k_lengths;
  const int64_t N = static_cast<int64_t>(ql.size()), H = 2, D = c.D;
  const std::vector<int32_t> cu_q = offsets(ql), cu_k = offsets(kl);
  const int64_t Lq = longest(ql), Lk = longest(kl), tq = cu_q.back(), tk = cu_k.back();

  ops::FlashCase fc{c.dtype, N, H, Lq, Lk, D, c.rope, true, c.alibi, false, 0};
  const std::string why = ops::flash_kernel_unsupported(c.kernel, fc, ops::attention_device(gpu));
  if (!why.empty()) GTEST_SKIP() << why;

  // Inputs rounded to the dtype: every run sees the same values.
  const auto sq = test::rounded(random_floats(static_cast<size_t>(H * tq * D), 1, -2, 2), c.dtype);
  const auto sk = test::rounded(random_floats(static_cast<size_t>(H * tk * D), 2), c.dtype);
  const auto sv = test::rounded(random_floats(static_cast<size_t>(H * tk * D), 3), c.dtype);
  const auto sdo = test::rounded(random_floats(static_cast<size_t>(H * tq * D), 4), c.dtype);

  AttentionOptions base;
  base.scale = 1.0f / std::sqrt(static_cast<float>(D));
  base.causal = c.causal;
  base.alibi = c.alibi;
  base.rope = c.rope;
  base.dropout = c.dropout;
  base.seed = 2024;
  base.stream = 3;
  base.flash_kernel = c.kernel;

  // Variable-length, on `device` in `dt`.
  const auto varlen = [&](Device device, DType dt) {
    AttentionOptions o = base;
    o.cu_seqlens_q = Tensor::from_ints(cu_q, {N + 1}, device);
    o.cu_seqlens_k = Tensor::from_ints(cu_k, {N + 1}, device);
    o.max_seqlen_q = Lq;
    o.max_seqlen_k = Lk;
    const Tensor q = Tensor::from_floats(sq, {1, H, tq, D}, dt, device);
    const Tensor k = Tensor::from_floats(sk, {1, H, tk, D}, dt, device);
    const Tensor v = Tensor::from_floats(sv, {1, H, tk, D}, dt, device);
    const Tensor dout = Tensor::from_floats(sdo, {1, H, tq, D}, dt, device);
    Tensor out = Tensor::zeros(q.shape(), dt, device), dq = Tensor::zeros(q.shape(), dt, device);
    Tensor dk = Tensor::zeros(k.shape(), dt, device), dv = Tensor::zeros(k.shape(), dt, device);
    Tensor lse = Tensor::zeros({1, H, tq}, DType::F32, device);
    ops::flash_attention_forward(q, k, v, o, out, lse);
    ops::flash_attention_backward(q, k, v, out, lse, dout, o, dq, dk, dv);
    return CallResult{out.to_floats(), lse.to_floats(), dq.to_floats(), dk.to_floats(),
                      dv.to_floats()};
  };
  const CallResult gpu_varlen = varlen(gpu, c.dtype);
  const CallResult cpu_varlen = varlen(Device::cpu(), DType::F32);

  // Regrouped on the GPU: padding rows hold zeros (their dout too).
  std::vector<float> rq(static_cast<size_t>(N * H * Lq * D), 0.0f), rdo(rq.size(), 0.0f);
  std::vector<float> rk(static_cast<size_t>(N * H * Lk * D), 0.0f), rv(rk.size(), 0.0f);
  regroup(sq, rq, cu_q, H, Lq, D);
  regroup(sdo, rdo, cu_q, H, Lq, D);
  regroup(sk, rk, cu_k, H, Lk, D);
  regroup(sv, rv, cu_k, H, Lk, D);
  AttentionOptions ro = base;
  ro.key_lengths = Tensor::from_ints(kl, {N}, gpu);
  const Tensor q = Tensor::from_floats(rq, {N, H, Lq, D}, c.dtype, gpu);
  const Tensor k = Tensor::from_floats(rk, {N, H, Lk, D}, c.dtype, gpu);
  const Tensor v = Tensor::from_floats(rv, {N, H, Lk, D}, c.dtype, gpu);
  const Tensor dout = Tensor::from_floats(rdo, {N, H, Lq, D}, c.dtype, gpu);
  Tensor out = Tensor::zeros(q.shape(), c.dtype, gpu), dq = Tensor::zeros(q.shape(), c.dtype, gpu);
  Tensor dk = Tensor::zeros(k.shape(), c.dtype, gpu), dv = Tensor::zeros(k.shape(), c.dtype, gpu);
  Tensor lse = Tensor::zeros({N, H, Lq}, DType::F32, gpu);
  ops::flash_attention_forward(q, k, v, ro, out, lse);
  ops::flash_attention_backward(q, k, v, out, lse, dout, ro, dq, dk, dv);
  const CallResult regrouped{
      stream_of(out.to_floats(), cu_q, H, Lq, D), stream_of(lse.to_floats(), cu_q, H, Lq, 1),
      stream_of(dq.to_floats(), cu_q, H, Lq, D), stream_of(dk.to_floats(), cu_k, H, Lk, D),
      stream_of(dv.to_floats(), cu_k, H, Lk, D)};

  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same_bits(gpu_varlen.out, regrouped.out)) << "out";
  EXPECT_TRUE(same_bits(gpu_varlen.lse, regrouped.lse)) << "lse";
  // The backward's sums over query rows: the regrouped run adds the padding
  // rows' exact zeros into the tensor-core products, which need not keep
  // every bit of the hardware's accumulation order.
  EXPECT_LE(error_of(gpu_varlen.dk, regrouped.dk), 1e-6) << "dk";
  EXPECT_LE(error_of(gpu_varlen.dv, regrouped.dv), 1e-6) << "dv";
  EXPECT_LE(error_of(gpu_varlen.dq, regrouped.dq), 1e-5) << "dq (fp32 atomics' order)";

  // Against the CPU twin in fp32: the dtype's rounding of P, dS and the
  // products, as the kernels' own tests bound it.
  const double tol = c.dtype == DType::F32 ? 1e-4 : c.dtype == DType::F16 ? 1e-2 : 4e-2;
  EXPECT_LE(error_of(gpu_varlen.out, cpu_varlen.out), tol) << "out";
  EXPECT_LE(error_of(gpu_varlen.dq, cpu_varlen.dq), tol) << "dq";
  EXPECT_LE(error_of(gpu_varlen.dk, cpu_varlen.dk), tol) << "dk";
  EXPECT_LE(error_of(gpu_varlen.dv, cpu_varlen.dv), tol) << "dv";
}

std::vector<int32_t> many_short() {
  std::vector<int32_t> l;
  for (int i = 0; i < 20; ++i) l.push_back(1 + (i * 7) % 9);
  return l;
}

const FlashKernel P = FlashKernel::Portable, Tc = FlashKernel::TensorCore,
                  Volta = FlashKernel::Volta;

INSTANTIATE_TEST_SUITE_P(
    Kernels, FlashVarlenCuda,
    ::testing::Values(
        VarlenGpuCase{"portable_f32_causal", P, DType::F32, 64, {5, 70, 1, 64}, {}, true},
        VarlenGpuCase{"portable_bf16_alibi_dropout",
                      P,
                      DType::BF16,
                      32,
                      many_short(),
                      {},
                      true,
                      true,
                      false,
                      0.1f},
        VarlenGpuCase{"portable_f16_cross", P, DType::F16, 128, {3, 12, 1}, {17, 4, 66}},
        VarlenGpuCase{
            "tc_bf16_causal_rope", Tc, DType::BF16, 64, {1, 130, 7, 64}, {}, true, false, true},
        VarlenGpuCase{"tc_f16_many_short_dropout",
                      Tc,
                      DType::F16,
                      32,
                      many_short(),
                      {},
                      true,
                      true,
                      false,
                      0.1f},
        VarlenGpuCase{"tc_bf16_one_token_documents", Tc, DType::BF16, 128, {1, 1, 1}, {}, true},
        VarlenGpuCase{"tc_f16_cross", Tc, DType::F16, 64, {3, 12, 1}, {17, 4, 66}},
        VarlenGpuCase{"volta_f16_causal", Volta, DType::F16, 64, {5, 70, 1, 64}, {}, true, true}),
    [](const ::testing::TestParamInfo<VarlenGpuCase>& i) { return i.param.name; });

}  // namespace
}  // namespace rotor
