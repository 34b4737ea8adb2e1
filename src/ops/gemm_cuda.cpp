// CUDA glue for ops::gemm: shapes -> a cuBLASLt call with a fused epilogue,
// falling back to plainer epilogues plus element-wise kernels when cuBLASLt
// offers no algorithm for the combination. Every path has the numerics of the
// fused one and of the CPU: products, beta C and the bias summed in f32, then
// the activation, and each output (C, the pre-activation) rounded once.
#if ROTOR_WITH_CUDA

#include <array>
#include <mutex>

#include "kernels/elementwise.cuh"
#include "kernels/gemm_cublaslt.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {
namespace {

// One cuBLASLt workspace per device, taken from the pool once and kept.
void* gemm_workspace(int device) {
  static std::array<void*, 64> spaces{};
  static std::mutex mu;
  ROTOR_CHECK(device >= 0 && device < 64, "bad CUDA device index {}", device);
  std::lock_guard<std::mutex> lock(mu);
  if (!spaces[device]) spaces[device] = cuda::pool_alloc(kernels::kGemmWorkspaceBytes, device);
  return spaces[device];
}

void fail_status(const kernels::GemmStatus& s) {
  ROTOR_FAIL("gemm: cuBLASLt failed in {} (status {})", s.what, s.code);
}

// What the fallbacks need besides the GEMM's arguments.
struct Epilogue {
  Tensor& c;
  const GemmOptions& o;
  kernels::Act act;
  void* target;  // receives the pre-activation: o.pre_activation, else C itself
  cudaStream_t stream;
  int device;
};

// The last resort, and K == 0: the product, beta C and the bias are summed in
// f32 -- in `target` itself when C is f32, else in an f32 scratch -- then the
// pre-activation is stored and the activation applied, each rounded once.
void gemm_via_f32(const kernels::GemmArgs& g, const Epilogue& e, void* workspace) {
  const int64_t n = e.c.numel(), cols = e.c.size(-1);
  const bool wide = e.c.dtype() == DType::F32;
  cuda_glue::Scratch scratch(wide ? 0 : sizeof(float) * static_cast<size_t>(n), e.device);
  void* acc = wide ? e.target : scratch.get();  // f32, C's shape
  const void* c32 = e.c.raw();                  // C in f32, for the beta term
  if (!wide && e.o.beta != 0.0f) {
    ROTOR_CUDA_CHECK(kernels::cast(e.c.raw(), e.c.dtype(), acc, DType::F32, n, e.stream));
    c32 = acc;
  }
  if (g.k > 0) {
    kernels::GemmArgs p = g;
    p.cd_type = DType::F32;
    p.c = c32;
    p.d = acc;
    const kernels::GemmStatus s = kernels::gemm_cublaslt(p, workspace, e.stream);
    if (!s.ok()) fail_status(s);
  } else if (e.o.beta == 0.0f) {
    ROTOR_CUDA_CHECK(kernels::fill(acc, DType::F32, n, 0.0f, e.stream));
  } else {
    ROTOR_CUDA_CHECK(kernels::axpby(e.o.beta, c32, 0.0f, acc, DType::F32, n, e.stream));
  }
  if (e.o.bias.defined())
    ROTOR_CUDA_CHECK(kernels::add_bias(acc, DType::F32, e.o.bias.raw(), e.o.bias.dtype(), n / cols,
                                       cols, e.stream));
  if (wide) {
    if (e.act != kernels::Act::None || acc != e.c.raw())
      ROTOR_CUDA_CHECK(kernels::activation_forward(acc, e.c.raw(), DType::F32, n, e.act, e.stream));
    return;
  }
  if (e.o.pre_activation.defined())
    ROTOR_CUDA_CHECK(kernels::cast(acc, DType::F32, e.target, e.c.dtype(), n, e.stream));
  if (e.act != kernels::Act::None)
    ROTOR_CUDA_CHECK(kernels::activation_forward(acc, acc, DType::F32, n, e.act, e.stream));
  ROTOR_CUDA_CHECK(kernels::cast(acc, DType::F32, e.c.raw(), e.c.dtype(), n, e.stream));
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& o) {
  cuda_glue::DeviceScope scope(c);
  if (c.numel() == 0) return;
  const int dev = scope.index();
  const int64_t M = c.size(-2), N = c.size(-1);
  const int64_t batch = c.numel() / (M * N);
  const int64_t K = o.trans_a ? a.size(-2) : a.size(-1);
  const bool batched_a = a.dim() > 2, batched_b = b.dim() > 2;
  const bool want_pre = o.pre_activation.defined();
  const Epilogue e{c,
                   o,
                   cuda_glue::to_act(o.activation),
                   want_pre ? o.pre_activation.raw() : c.raw(),
                   scope.stream(),
                   dev};

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
  void* ws = gemm_workspace(dev);
  if (K == 0) {
    gemm_via_f32(g, e, ws);
    return;
  }

  // A 16-bit C with both beta C and a bias: cuBLASLt's fused epilogue gave
  // errors of 2.4-2.6x one rounding on an H200 (2026-11-27 window,
  // docs/performance.md), as if C + AB were rounded before the bias was
  // added. No training step asks for this combination (weight gradients
  // accumulate without a bias), so it takes the f32 path.
  if (c.dtype() != DType::F32 && o.beta != 0.0f && o.bias.defined()) {
    gemm_via_f32(g, e, ws);
    return;
  }

  // 1. The fully fused epilogue (cuBLASLt has none for SiLU).
  kernels::GemmArgs fused = g;
  fused.bias = o.bias.defined() ? o.bias.raw() : nullptr;
  kernels::GemmStatus s;
  s.unsupported = true;
  if (e.act != kernels::Act::SiLU) {
    fused.act = static_cast<kernels::GemmEpilogue>(static_cast<int>(e.act));
    fused.aux = want_pre && e.act != kernels::Act::None ? e.target : nullptr;
    s = kernels::gemm_cublaslt(fused, ws, e.stream);
    if (s.ok()) {
      if (want_pre && e.act == kernels::Act::None)  // no activation: pre-activation == output
        ROTOR_CUDA_CHECK(
            cudaMemcpyAsync(e.target, c.raw(), c.nbytes(), cudaMemcpyDeviceToDevice, e.stream));
      return;
    }
  }
  if (!s.unsupported) fail_status(s);
  // 2. GEMM and bias into the pre-activation, then the activation kernel. With
  // a 16-bit C the kernel reads the rounded pre-activation, which changes
  // nothing for none and ReLU (relu(round(x)) == round(relu(x))) but would
  // round GELU's and SiLU's input: they take the f32 path.
  const bool smooth = e.act == kernels::Act::GELU || e.act == kernels::Act::SiLU;
  if (c.dtype() == DType::F32 || !smooth) {
    kernels::GemmArgs plain = g;
    plain.d = e.target;
    plain.bias = fused.bias;
    s = kernels::gemm_cublaslt(plain, ws, e.stream);
    if (s.ok()) {
      if (e.act != kernels::Act::None || e.target != c.raw())
        ROTOR_CUDA_CHECK(
            kernels::activation_forward(e.target, c.raw(), c.dtype(), c.numel(), e.act, e.stream));
      return;
    }
    if (!s.unsupported) fail_status(s);
  }
  // 3. No fused bias either: everything in f32 (a bias added to a rounded C
  // would round twice).
  gemm_via_f32(g, e, ws);
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
