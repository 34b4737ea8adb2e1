// CUDA glue for ops::gemm: shapes -> a cuBLASLt call with a fused epilogue,
// falling back to a plainer epilogue plus element-wise kernels when cuBLASLt
// offers no algorithm for the combination (same semantics either way).
#if ROTOR_WITH_CUDA

#include <array>
#include <mutex>

#include "kernels/elementwise.cuh"
#include "kernels/gemm_cublaslt.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {
namespace {

using cuda_glue::DeviceScope;
using cuda_glue::require_on;

// One cuBLASLt workspace per device, taken from the pool once and kept.
void* gemm_workspace(int device) {
  static std::array<void*, 64> spaces{};
  static std::mutex mu;
  ROTOR_CHECK(device >= 0 && device < 64, "bad CUDA device index {}", device);
  std::lock_guard<std::mutex> lock(mu);
  if (!spaces[device]) spaces[device] = cuda::pool_alloc(kernels::kGemmWorkspaceBytes, device);
  return spaces[device];
}

kernels::Act to_act(Activation a) {
  switch (a) {
    case Activation::ReLU: return kernels::Act::ReLU;
    case Activation::GELU: return kernels::Act::GELU;
    default: return kernels::Act::None;
  }
}

void fail_status(const kernels::GemmStatus& s) {
  ROTOR_FAIL("gemm: cuBLASLt failed in {} (status {})", s.what, s.code);
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& o) {
  DeviceScope scope(c, "gemm");
  const int dev = scope.index();
  require_on(a, dev, "gemm: A");
  require_on(b, dev, "gemm: B");
  cuda_glue::require_floating(a, "gemm: A");
  if (b.dtype() != a.dtype()) ROTOR_FAIL("gemm: A is {} but B is {}", a.str(), b.str());
  if (c.dtype() != a.dtype() && c.dtype() != DType::F32)
    ROTOR_FAIL("gemm: C must be {} or f32, got {}", dtype_name(a.dtype()), c.str());
  ROTOR_CHECK(a.dim() >= 2 && b.dim() >= 2 && c.dim() >= 2, "gemm: A {}, B {}, C {} must be at least 2-D",
              a.str(), b.str(), c.str());

  const int64_t M = c.size(-2), N = c.size(-1);
  const int64_t batch = M * N == 0 ? 1 : c.numel() / (M * N);
  const int64_t a_rows = o.trans_a ? a.size(-1) : a.size(-2);
  const int64_t K = o.trans_a ? a.size(-2) : a.size(-1);
  const int64_t b_rows = o.trans_b ? b.size(-1) : b.size(-2);
  const int64_t b_cols = o.trans_b ? b.size(-2) : b.size(-1);
  const bool batched_a = a.dim() > 2, batched_b = b.dim() > 2;
  if (a_rows != M || b_rows != K || b_cols != N)
    ROTOR_FAIL("gemm: shapes do not match: A {}{}, B {}{}, C {}", a.str(), o.trans_a ? "^T" : "",
               b.str(), o.trans_b ? "^T" : "", c.str());
  if (batched_a && a.numel() != batch * M * K)
    ROTOR_FAIL("gemm: batch of A {} does not match C {}", a.str(), c.str());
  if (batched_b && b.numel() != batch * K * N)
    ROTOR_FAIL("gemm: batch of B {} does not match C {}", b.str(), c.str());
  if (o.bias.defined()) {
    require_on(o.bias, dev, "gemm: bias");
    if (o.bias.numel() != N || o.bias.dtype() != c.dtype())
      ROTOR_FAIL("gemm: bias must be {}[{}], got {}", dtype_name(c.dtype()), N, o.bias.str());
  }
  const bool want_pre = o.pre_activation.defined();
  if (want_pre) {
    require_on(o.pre_activation, dev, "gemm: pre_activation");
    if (o.pre_activation.numel() != c.numel() || o.pre_activation.dtype() != c.dtype())
      ROTOR_FAIL("gemm: pre_activation {} must match C {}", o.pre_activation.str(), c.str());
  }
  if (c.numel() == 0) return;
  cudaStream_t st = scope.stream();
  const kernels::Act act = to_act(o.activation);

  kernels::GemmArgs g;
  g.ab_type = a.dtype();
  g.cd_type = c.dtype();
  g.trans_a = o.trans_a;
  g.trans_b = o.trans_b;
  g.m = M;
  g.n = N;
  g.k = K;
  g.batch = batch;
  g.a = a.raw();
  g.b = b.raw();
  g.stride_a = batched_a ? M * K : 0;
  g.stride_b = batched_b ? K * N : 0;
  g.stride_cd = M * N;
  if (batch > 1 && batched_a && !batched_b && !o.trans_a) {
    // A 2-D B broadcast over a batched, untransposed A: one GEMM with the
    // batch folded into M (A and C are contiguous [batch * M, .]).
    g.m = batch * M;
    g.batch = 1;
    g.stride_a = 0;
    g.stride_cd = g.m * N;
  }
  g.c = c.raw();
  g.d = c.raw();
  g.alpha = o.alpha;
  g.beta = o.beta;

  void* target = want_pre ? o.pre_activation.raw() : c.raw();  // receives the pre-activation
  if (K == 0) {
    // Nothing to multiply: target = beta * C (+ bias), then the activation.
    if (o.beta == 0.0f) ROTOR_CUDA_CHECK(kernels::fill(target, c.dtype(), c.numel(), 0.0f, st));
    else ROTOR_CUDA_CHECK(kernels::axpby(o.beta, c.raw(), 0.0f, target, c.dtype(), c.numel(), st));
  } else {
    void* ws = gemm_workspace(dev);
    // 1. The fully fused epilogue.
    kernels::GemmArgs fused = g;
    fused.bias = o.bias.defined() ? o.bias.raw() : nullptr;
    fused.act = static_cast<kernels::GemmEpilogue>(static_cast<int>(act));
    fused.aux = want_pre && act != kernels::Act::None ? o.pre_activation.raw() : nullptr;
    kernels::GemmStatus s = kernels::gemm_cublaslt(fused, ws, st);
    if (s.ok()) {
      if (want_pre && act == kernels::Act::None)  // no activation: pre-activation == output
        ROTOR_CUDA_CHECK(cudaMemcpyAsync(o.pre_activation.raw(), c.raw(), c.nbytes(),
                                         cudaMemcpyDeviceToDevice, st));
      return;
    }
    if (!s.unsupported) fail_status(s);
    // 2. GEMM (+ bias) into the pre-activation, activation below.
    kernels::GemmArgs plain = g;
    plain.d = target;
    plain.bias = fused.bias;
    s = kernels::gemm_cublaslt(plain, ws, st);
    if (!s.ok() && s.unsupported && plain.bias) {
      plain.bias = nullptr;
      s = kernels::gemm_cublaslt(plain, ws, st);
      if (s.ok()) {
        ROTOR_CUDA_CHECK(kernels::add_bias(target, c.dtype(), o.bias.raw(), o.bias.dtype(),
                                           c.numel() / N, N, st));
      }
    }
    if (!s.ok()) fail_status(s);
    if (act != kernels::Act::None || target != c.raw())
      ROTOR_CUDA_CHECK(kernels::activation_forward(target, c.raw(), c.dtype(), c.numel(), act, st));
    return;
  }
  if (o.bias.defined())
    ROTOR_CUDA_CHECK(kernels::add_bias(target, c.dtype(), o.bias.raw(), o.bias.dtype(),
                                       c.numel() / N, N, st));
  if (act != kernels::Act::None || target != c.raw())
    ROTOR_CUDA_CHECK(kernels::activation_forward(target, c.raw(), c.dtype(), c.numel(), act, st));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
