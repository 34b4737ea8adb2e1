// Attention-core benchmark at the shapes of docs/performance.md, RoPE included: the
// forward is split heads (bias-free QKV split, RoPE on q and k, 1/sqrt(d) on
// q) + the attention core; the backward is the core's backward + the split
// backward (rotating dq, dk back). Inputs are random (uniform in [-1, 1]).
// Prints milliseconds and TFLOP/s counted as 4*B*H*Tq*Tk*D for the forward,
// 2.5x that for the backward, half when causal (the core only: RoPE is
// memory-bound and not counted).
//
//   bench_attention [--dtype bf16|fp16|fp32]
//                   [--impl auto|rotor|tc|portable|cudnn|reference|all]
//                   [--iters N] [--causal] [--peer peer.json] [--rope-placement]
//                   [--bias-cost] [--shape BxTxHxD ...]
//
// --shape (repeatable) runs those shapes instead of the table's (for a
// profiler: scripts/gpu/measure.sh's ncu step runs one shape, one iteration).
// --impl: auto = what a model with attention.impl auto runs at each shape
// (the attention plan: cuDNN from kCudnnMinKeys keys on where it serves the
// case, else rotor's flash kernel), the row naming the core; rotor = rotor's
// flash core as the model runs it under attention.impl rotor (the
// tensor-core kernel where it runs, else the portable one); tc and portable
// force one of the two
// (ROTOR_FLASH_KERNEL); cudnn = ops::cudnn_attention_* (a build with the cuDNN
// frontend); reference = the materializing attention; all = tc, portable and
// cudnn one after the other, then their fwd+bwd times side by side.
// With --peer (the JSON written by scripts/bench/attention_peer.py on the
// same machine) it adds the ratio peer_time / rotor_time per shape (> 1:
// rotor is faster).
// --rope-placement compares, with rotor's flash core, RoPE in the head split
// (split with rotation + attention) against RoPE in the tensor-core kernel
// (split only + attention with AttentionOptions::rope): time and bytes moved.
// --bias-cost times rotor's flash core (the kernel attention.impl rotor
// runs) without a position bias, with ALiBi's and with T5's (max_distance
// 128, its table's gradient summed in the backward), and T5's on the
// reference core, which ran it on a GPU before the flash kernels added it
// (T <= 1024).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda_context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/tensor.h"
#include "nn/attention_plan.h"
#include "ops/attention.h"
#include "ops/attention_device.h"
#include "ops/cudnn_attention.h"
#include "ops/flash_attention.h"
#include "ops/heads.h"

using namespace rotor;

namespace {

struct Shape4 {
  int64_t B, T, H, D;
  std::string name() const {
    std::ostringstream s;
    s << "B" << B << "_T" << T << "_H" << H << "_D" << D;
    return s.str();
  }
};

// The shapes every table runs: these, or the --shape ones.
std::vector<Shape4> kShapes = {
    {128, 32, 8, 64},   {128, 64, 8, 64},  {128, 128, 8, 64},  {32, 512, 12, 64}, {4, 4096, 16, 64},
    {4, 4096, 16, 128}, {2, 8192, 16, 64}, {2, 8192, 16, 128},  // issue 37 asks T up to 8192
};

struct Timing {
  double fwd_ms = 0, bwd_ms = 0, fwdbwd_ms = 0;
};

template <class F>
double time_ms(F&& f, int iters) {
  f();  // warm-up (and first-touch of the pool)
  cuda::synchronize(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) f();
  cuda::synchronize(0);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / iters;
}

enum class Impl { Auto, Rotor, Tc, Portable, Cudnn, Reference };

const char* impl_name(Impl i) {
  switch (i) {
    case Impl::Auto:
      return "auto";
    case Impl::Rotor:
      return "rotor";
    case Impl::Tc:
      return "tc";
    case Impl::Portable:
      return "portable";
    case Impl::Cudnn:
      return "cudnn";
    case Impl::Reference:
      return "reference";
  }
  return "?";
}

// The attention plan (nn/attention_plan.h) of the bench's case under
// attention.impl `impl`: q and k rotated (in the head split, or in the
// kernel with rope_in_kernel), Tq = Tk, as a layer would ask for it.
nn::AttentionPlan plan_for(nn::AttentionImpl impl, const Shape4& s, DType dt, bool causal,
                           bool rope_in_kernel) {
  nn::AttentionCase c;
  c.impl = impl;
  c.rope = true;
  c.rope_in_kernel = rope_in_kernel;
  c.causal = causal;
  c.dtype = dt;
  c.B = s.B;
  c.H = s.H;
  c.Tq = c.Tk = s.T;
  c.D = s.D;
  return nn::plan_attention(c, ops::attention_device(Device::cuda(0)));
}

// The flash kernel an impl runs: tc and portable as named, rotor the one
// the plan picks for attention.impl rotor.
ops::FlashKernel flash_kernel_for(Impl impl, const Shape4& s, DType dt, bool causal,
                                  bool rope_in_kernel) {
  if (impl == Impl::Tc) return ops::FlashKernel::TensorCore;
  if (impl == Impl::Portable) return ops::FlashKernel::Portable;
  return plan_for(nn::AttentionImpl::Rotor, s, dt, causal, rope_in_kernel).kernel;
}

// What attention.impl auto runs at this shape: Cudnn where the plan picks
// cuDNN, else Rotor (whose kernel flash_kernel_for then asks the plan for).
Impl auto_impl(const Shape4& s, DType dt, bool causal, bool rope_in_kernel) {
  const nn::AttentionPlan p = plan_for(nn::AttentionImpl::Auto, s, dt, causal, rope_in_kernel);
  return p.core == nn::AttentionCore::Cudnn ? Impl::Cudnn : Impl::Rotor;
}

// A random tensor (uniform in [-1, 1]; xorshift: fast enough for 10^8 values).
Tensor random_tensor(const rotor::Shape& shape, DType dt, Device dev, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f = static_cast<float>(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
  return Tensor::from_floats(v, shape, dt, dev);
}

// The position bias a case adds inside the core.
enum class Bias { None, Alibi, T5 };

// rope_in_kernel: the split does not rotate; the attention core does
// (AttentionOptions::rope, the tensor-core kernel only).
Timing run_shape(const Shape4& s, DType dt, Impl impl, bool causal, int iters,
                 bool rope_in_kernel = false, Bias bias = Bias::None) {
  if (impl == Impl::Auto) impl = auto_impl(s, dt, causal, rope_in_kernel);
  const Device gpu = Device::cuda(0);
  const bool reference = impl == Impl::Reference;
  const int64_t d = s.H * s.D;
  Tensor x = random_tensor({s.B, s.T, 3 * d}, dt, gpu, 1);  // the QKV projection output
  Tensor dx = Tensor::empty({s.B, s.T, 3 * d}, dt, gpu);
  std::vector<Tensor> parts, dparts;
  for (int i = 0; i < 3; ++i) {
    parts.push_back(Tensor::empty({s.B, s.H, s.T, s.D}, dt, gpu));
    dparts.push_back(Tensor::empty({s.B, s.H, s.T, s.D}, dt, gpu));
  }
  Tensor out = Tensor::empty({s.B, s.H, s.T, s.D}, dt, gpu);
  Tensor dout = random_tensor({s.B, s.H, s.T, s.D}, dt, gpu, 2);
  Tensor lse = Tensor::empty({s.B, s.H, s.T}, DType::F32, gpu);
  Tensor probs;
  if (reference) probs = Tensor::empty({s.B, s.H, s.T, s.T}, dt, gpu);
  ops::SplitHeadsOptions so;
  so.n_heads = s.H;
  so.rope_parts = rope_in_kernel ? 0 : 2;
  so.part0_scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  ops::AttentionOptions ao;
  ao.causal = causal;
  if (!reference && impl != Impl::Cudnn)
    ao.flash_kernel = flash_kernel_for(impl, s, dt, causal, rope_in_kernel);
  if (rope_in_kernel) {
    // q is not scaled in the split when it is rotated later: scale in the core
    // instead (the rotation commutes with the scale).
    so.part0_scale = 1.0f;
    ao.scale = 1.0f / std::sqrt(static_cast<float>(s.D));
    ao.rope = true;
    ao.rope_params = so.rope;
  }
  if (bias == Bias::Alibi) ao.alibi = true;
  if (bias == Bias::T5) {
    // T5's default reach and a random table; the backward adds into the
    // gradient every call (its value does not matter here).
    ao.rel_max = 128;
    ao.rel_bias = random_tensor({2 * ao.rel_max + 1, s.H}, DType::F32, gpu, 3);    // f32 [R, H]
    ao.rel_bias_grad = Tensor::zeros({2 * ao.rel_max + 1, s.H}, DType::F32, gpu);  // f32 [R, H]
  }
  if (impl == Impl::Cudnn) {
    std::string why;
    if (!ops::cudnn_attention_supported(parts[0], parts[1], ao, &why))
      ROTOR_FAIL("cuDNN attention does not run {}: {}", s.name(), why);
  }

  auto forward = [&] {
    ops::split_heads_forward(x, parts, so);
    if (reference)
      ops::attention_forward(parts[0], parts[1], parts[2], ao, out, probs);
    else if (impl == Impl::Cudnn)
      ops::cudnn_attention_forward(parts[0], parts[1], parts[2], ao, out, lse);
    else
      ops::flash_attention_forward(parts[0], parts[1], parts[2], ao, out, lse);
  };
  auto backward = [&] {
    if (reference)
      ops::attention_backward(parts[0], parts[1], parts[2], probs, dout, ao, dparts[0], dparts[1],
                              dparts[2]);
    else if (impl == Impl::Cudnn)
      ops::cudnn_attention_backward(parts[0], parts[1], parts[2], out, lse, dout, ao, dparts[0],
                                    dparts[1], dparts[2]);
    else
      ops::flash_attention_backward(parts[0], parts[1], parts[2], out, lse, dout, ao, dparts[0],
                                    dparts[1], dparts[2]);
    ops::split_heads_backward(dparts, dx, so);
  };
  Timing t;
  t.fwd_ms = time_ms(forward, iters);
  forward();
  t.bwd_ms = time_ms(backward, iters);
  t.fwdbwd_ms = time_ms(
      [&] {
        forward();
        backward();
      },
      iters);
  return t;
}

std::map<std::string, Timing> read_peer(const std::string& path) {
  const json_io::Json root = json_io::load(path);
  const json_io::Json& results = json_io::at(root, "results", path);
  if (!results.is_array())
    ROTOR_FAIL("{}: \"results\" is {}, expected an array", path, json_io::type_name(results));
  std::map<std::string, Timing> m;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string where = fmt::format("{}: results[{}]", path, i);
    const json_io::Json& r = results[i];
    Timing t;
    t.fwd_ms = json_io::get_double(r, "fwd_ms", where);
    t.bwd_ms = json_io::get_double(r, "bwd_ms", where);
    t.fwdbwd_ms = json_io::get_double(r, "fwdbwd_ms", where);
    m[json_io::get_string(r, "name", where)] = t;
  }
  return m;
}

// scripts/gpu/measure.sh runs --impl cudnn when the usage names it: only in a
// build with the cuDNN frontend.
const char* kUsage =
    "usage: bench_attention [--dtype bf16|fp16|fp32] "
#if ROTOR_WITH_CUDNN_FRONTEND
    "[--impl auto|rotor|tc|portable|cudnn|reference|all] "
#else
    "[--impl auto|rotor|tc|portable|reference|all] "
#endif
    "[--iters N] [--causal] [--peer peer.json] [--rope-placement] [--bias-cost] "
    "[--shape BxTxHxD ...]\n";

double tflops(double flop, double ms) {
  return flop / (ms * 1e-3) / 1e12;
}

// One implementation over the shapes, in the table format of the first
// version of this benchmark (scripts/gpu/measure.sh quotes it).
std::map<std::string, Timing> run_impl(Impl impl, DType dt, bool causal, int iters,
                                       const std::map<std::string, Timing>& peer) {
  std::map<std::string, Timing> results;
  std::printf("attention core + RoPE split, %s, %s, %s\n", dtype_name(dt),
              impl == Impl::Auto        ? "attention.impl auto (core per row)"
              : impl == Impl::Reference ? "reference"
              : impl == Impl::Rotor     ? "rotor flash"
              : impl == Impl::Tc        ? "rotor flash (tensor-core kernel)"
              : impl == Impl::Portable  ? "rotor flash (portable kernel)"
                                        : "cuDNN",
              causal ? "causal" : "non-causal");
  std::printf("%-22s %9s %9s %9s %9s %9s %9s", "shape", "fwd ms", "bwd ms", "f+b ms", "fwd TF/s",
              "bwd TF/s", "f+b TF/s");
  if (!peer.empty()) std::printf(" %8s %8s %8s", "fwd x", "bwd x", "f+b x");
  std::printf("\n");
  for (const Shape4& s : kShapes) {
    if (impl == Impl::Reference && s.T > 1024) continue;  // [T, T] matrices do not fit sensibly
    if (impl == Impl::Portable && s.T > 4096) continue;   // ~1 s per call: minutes of a window
    Timing t;
    try {
      t = run_shape(s, dt, impl, causal, iters);
    } catch (const std::exception& e) {
      std::printf("%-22s %s\n", s.name().c_str(), e.what());
      continue;
    }
    results[s.name()] = t;
    const double flop = 4.0 * s.B * s.H * s.T * s.T * s.D * (causal ? 0.5 : 1.0);
    std::printf("%-22s %9.3f %9.3f %9.3f %9.1f %9.1f %9.1f", s.name().c_str(), t.fwd_ms, t.bwd_ms,
                t.fwdbwd_ms, tflops(flop, t.fwd_ms), tflops(2.5 * flop, t.bwd_ms),
                tflops(3.5 * flop, t.fwdbwd_ms));
    auto it = peer.find(s.name());
    if (it != peer.end())
      std::printf(" %8.2f %8.2f %8.2f", it->second.fwd_ms / t.fwd_ms, it->second.bwd_ms / t.bwd_ms,
                  it->second.fwdbwd_ms / t.fwdbwd_ms);
    if (impl == Impl::Auto) std::printf("  %s", impl_name(auto_impl(s, dt, causal, false)));
    std::printf("\n");
  }
  return results;
}

// RoPE in the head split vs in the tensor-core kernel, rotor's flash core.
// Bytes: the split reads x and writes q, k, v either way (the rotation is
// fused into that copy), so the bytes differ only by the kernel's cos/sin
// table (positions x D/2 float2, written once and read from L2); the time
// difference is the in-kernel rotation of each Q tile and of every K tile a
// query block visits.
void rope_placement(DType dt, bool causal, int iters) {
  std::printf(
      "RoPE placement, %s, %s: split with rotation + attention vs split only + "
      "attention with RoPE in the kernel\n",
      dtype_name(dt), causal ? "causal" : "non-causal");
  std::printf("%-22s %10s %10s %10s %10s %10s %10s %12s %12s\n", "shape", "split fwd", "kern fwd",
              "split bwd", "kern bwd", "split f+b", "kern f+b", "split MB", "table MB");
  for (const Shape4& s : kShapes) {
    Timing a, b;
    try {
      a = run_shape(s, dt, Impl::Rotor, causal, iters, false);
      b = run_shape(s, dt, Impl::Rotor, causal, iters, true);
    } catch (const std::exception& e) {
      std::printf("%-22s %s\n", s.name().c_str(), e.what());
      continue;
    }
    const double elem = static_cast<double>(dtype_size(dt));
    const double split_mb = 2.0 * 3.0 * s.B * s.T * s.H * s.D * elem / 1e6;  // fwd: read + write
    const double table_mb = static_cast<double>(s.T) * (s.D / 2) * 8.0 / 1e6;
    std::printf("%-22s %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %12.1f %12.3f\n", s.name().c_str(),
                a.fwd_ms, b.fwd_ms, a.bwd_ms, b.bwd_ms, a.fwdbwd_ms, b.fwdbwd_ms, split_mb,
                table_mb);
  }
}

// rotor's flash core without a position bias, with ALiBi's and with T5's,
// and T5's on the reference core: fwd+bwd ms, and each bias's cost as a
// ratio to no bias. The kernel is the one attention.impl rotor runs (the
// plan's: tc for f16/bf16 on sm_80+).
void bias_cost(DType dt, bool causal, int iters) {
  std::printf("position bias inside the core, %s, %s: fwd+bwd ms (x: against no bias)\n",
              dtype_name(dt), causal ? "causal" : "non-causal");
  std::printf("%-22s %10s %10s %10s %10s %8s %8s %8s\n", "shape", "none", "alibi", "t5", "t5 ref",
              "alibi x", "t5 x", "ref x");
  for (const Shape4& s : kShapes) {
    Timing none, alibi, t5, ref;
    try {
      none = run_shape(s, dt, Impl::Rotor, causal, iters, false, Bias::None);
      alibi = run_shape(s, dt, Impl::Rotor, causal, iters, false, Bias::Alibi);
      t5 = run_shape(s, dt, Impl::Rotor, causal, iters, false, Bias::T5);
      if (s.T <= 1024) ref = run_shape(s, dt, Impl::Reference, causal, iters, false, Bias::T5);
    } catch (const std::exception& e) {
      std::printf("%-22s %s\n", s.name().c_str(), e.what());
      continue;
    }
    std::printf("%-22s %10.3f %10.3f %10.3f %10.3f %8.2f %8.2f %8.2f\n", s.name().c_str(),
                none.fwdbwd_ms, alibi.fwdbwd_ms, t5.fwdbwd_ms, ref.fwdbwd_ms,
                alibi.fwdbwd_ms / none.fwdbwd_ms, t5.fwdbwd_ms / none.fwdbwd_ms,
                ref.fwdbwd_ms / none.fwdbwd_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  DType dt = DType::BF16;
  bool causal = false, all = false, placement = false, bias = false, own_shapes = false;
  Impl impl = Impl::Rotor;
  int iters = 20;
  std::string peer_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_attention: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dtype") {
      const std::string v = next();
      dt = v == "fp16" ? DType::F16 : v == "fp32" ? DType::F32 : DType::BF16;
      if (v != "fp16" && v != "fp32" && v != "bf16") {
        std::fprintf(stderr, "bench_attention: --dtype bf16|fp16|fp32, got %s\n", v.c_str());
        return 2;
      }
    } else if (a == "--impl") {
      const std::string v = next();
      if (v == "auto") {
        impl = Impl::Auto;
      } else if (v == "rotor") {
        impl = Impl::Rotor;
      } else if (v == "tc") {
        impl = Impl::Tc;
      } else if (v == "portable") {
        impl = Impl::Portable;
      } else if (v == "cudnn") {
        impl = Impl::Cudnn;
      } else if (v == "reference") {
        impl = Impl::Reference;
      } else if (v == "all") {
        all = true;
      } else {
        std::fprintf(stderr,
                     "bench_attention: --impl auto|rotor|tc|portable|cudnn|reference|all, got %s\n",
                     v.c_str());
        return 2;
      }
    } else if (a == "--iters") {
      iters = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--causal") {
      causal = true;
    } else if (a == "--peer") {
      peer_path = next();
    } else if (a == "--rope-placement") {
      placement = true;
    } else if (a == "--bias-cost") {
      bias = true;
    } else if (a == "--shape") {
      const std::string v = next();
      long long b = 0, t = 0, h = 0, d = 0;
      char end = 0;
      if (std::sscanf(v.c_str(), "%lldx%lldx%lldx%lld%c", &b, &t, &h, &d, &end) != 4 || b < 1 ||
          t < 1 || h < 1 || d < 1) {
        std::fprintf(stderr, "bench_attention: --shape BxTxHxD (positive), got %s\n", v.c_str());
        return 2;
      }
      if (!own_shapes) kShapes.clear();
      own_shapes = true;
      kShapes.push_back({b, t, h, d});
    } else {
      std::fprintf(stderr, "%s", kUsage);
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "bench_attention: no GPU found\n");
    return 1;
  }
  try {
    std::map<std::string, Timing> peer;
    if (!peer_path.empty()) peer = read_peer(peer_path);
    if (placement) {
      rope_placement(dt, causal, iters);
      return 0;
    }
    if (bias) {
      bias_cost(dt, causal, iters);
      return 0;
    }
    if (!all) {
      run_impl(impl, dt, causal, iters, peer);
      return 0;
    }
    const std::vector<Impl> impls = {Impl::Tc, Impl::Portable, Impl::Cudnn};
    std::vector<std::map<std::string, Timing>> results;
    for (Impl i : impls) {
      results.push_back(run_impl(i, dt, causal, iters, peer));
      std::printf("\n");
    }
    std::printf("fwd+bwd ms side by side (%s, %s)\n%-22s", dtype_name(dt),
                causal ? "causal" : "non-causal", "shape");
    for (Impl i : impls) std::printf(" %10s", impl_name(i));
    std::printf("\n");
    for (const Shape4& s : kShapes) {
      std::printf("%-22s", s.name().c_str());
      for (const auto& r : results) {
        auto it = r.find(s.name());
        if (it == r.end())
          std::printf(" %10s", "-");
        else
          std::printf(" %10.3f", it->second.fwdbwd_ms);
      }
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
