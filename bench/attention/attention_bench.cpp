// Attention-core benchmark at the shapes of docs/performance.md, RoPE included: the
// forward is split heads (bias-free QKV split, RoPE on q and k, 1/sqrt(d) on
// q) + the attention core; the backward is the core's backward + the split
// backward (rotating dq, dk back). Prints milliseconds and TFLOP/s counted as
// 4*B*H*Tq*Tk*D for the forward, 2.5x that for the backward, half when causal
// (the core only: RoPE is memory-bound and not counted).
//
//   bench_attention [--dtype bf16|fp16|fp32] [--impl rotor|reference]
//                   [--iters N] [--causal] [--peer peer.json]
//
// With --peer (the JSON written by scripts/bench/attention_peer.py on the
// same machine) it adds the ratio peer_time / rotor_time per shape (> 1:
// rotor is faster).
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
#include "ops/attention.h"
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

const std::vector<Shape4> kShapes = {
    {128, 32, 8, 64},  {128, 64, 8, 64},  {128, 128, 8, 64},
    {32, 512, 12, 64}, {4, 4096, 16, 64}, {4, 4096, 16, 128},
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

Timing run_shape(const Shape4& s, DType dt, bool reference, bool causal, int iters) {
  const Device gpu = Device::cuda(0);
  const int64_t d = s.H * s.D;
  Tensor x = Tensor::full({s.B, s.T, 3 * d}, 0.01f, dt, gpu);  // the QKV projection output
  Tensor dx = Tensor::empty({s.B, s.T, 3 * d}, dt, gpu);
  std::vector<Tensor> parts, dparts;
  for (int i = 0; i < 3; ++i) {
    parts.push_back(Tensor::empty({s.B, s.H, s.T, s.D}, dt, gpu));
    dparts.push_back(Tensor::empty({s.B, s.H, s.T, s.D}, dt, gpu));
  }
  Tensor out = Tensor::empty({s.B, s.H, s.T, s.D}, dt, gpu);
  Tensor dout = Tensor::full({s.B, s.H, s.T, s.D}, 0.01f, dt, gpu);
  Tensor lse = Tensor::empty({s.B, s.H, s.T}, DType::F32, gpu);
  Tensor probs;
  if (reference) probs = Tensor::empty({s.B, s.H, s.T, s.T}, dt, gpu);
  ops::SplitHeadsOptions so;
  so.n_heads = s.H;
  so.rotary_parts = 2;
  so.part0_scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  ops::AttentionOptions ao;
  ao.causal = causal;

  auto forward = [&] {
    ops::split_heads_forward(x, parts, so);
    if (reference)
      ops::attention_forward(parts[0], parts[1], parts[2], ao, out, probs);
    else
      ops::flash_attention_forward(parts[0], parts[1], parts[2], ao, out, lse);
  };
  auto backward = [&] {
    if (reference)
      ops::attention_backward(parts[0], parts[1], parts[2], probs, dout, ao, dparts[0], dparts[1],
                              dparts[2]);
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

}  // namespace

int main(int argc, char** argv) {
  DType dt = DType::BF16;
  bool reference = false, causal = false;
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
      if (v != "rotor" && v != "reference") {
        std::fprintf(stderr, "bench_attention: --impl rotor|reference, got %s\n", v.c_str());
        return 2;
      }
      reference = v == "reference";
    } else if (a == "--iters") {
      iters = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--causal") {
      causal = true;
    } else if (a == "--peer") {
      peer_path = next();
    } else {
      std::fprintf(stderr,
                   "usage: bench_attention [--dtype bf16|fp16|fp32] [--impl rotor|reference] "
                   "[--iters N] [--causal] [--peer peer.json]\n");
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
    std::printf("attention core + RoPE split, %s, %s, %s\n", dtype_name(dt),
                reference ? "reference" : "rotor flash", causal ? "causal" : "non-causal");
    std::printf("%-22s %9s %9s %9s %9s %9s %9s", "shape", "fwd ms", "bwd ms", "f+b ms", "fwd TF/s",
                "bwd TF/s", "f+b TF/s");
    if (!peer.empty()) std::printf(" %8s %8s %8s", "fwd x", "bwd x", "f+b x");
    std::printf("\n");
    for (const Shape4& s : kShapes) {
      if (reference && s.T > 1024) continue;  // the [T, T] matrices do not fit sensibly
      const Timing t = run_shape(s, dt, reference, causal, iters);
      const double flop = 4.0 * s.B * s.H * s.T * s.T * s.D * (causal ? 0.5 : 1.0);
      auto tf = [](double f, double ms) { return f / (ms * 1e-3) / 1e12; };
      std::printf("%-22s %9.3f %9.3f %9.3f %9.1f %9.1f %9.1f", s.name().c_str(), t.fwd_ms, t.bwd_ms,
                  t.fwdbwd_ms, tf(flop, t.fwd_ms), tf(2.5 * flop, t.bwd_ms),
                  tf(3.5 * flop, t.fwdbwd_ms));
      auto it = peer.find(s.name());
      if (it != peer.end())
        std::printf(" %8.2f %8.2f %8.2f", it->second.fwd_ms / t.fwd_ms,
                    it->second.bwd_ms / t.bwd_ms, it->second.fwdbwd_ms / t.fwdbwd_ms);
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
