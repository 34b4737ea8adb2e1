// CPU benchmark of linear attention (ops/linear_attention.h) against the
// softmax attention cores of the CPU at long sequences: the materializing
// reference (ops::attention_forward, a [T, T] probability matrix per head)
// and the tiled flash twin (ops::flash_attention_forward). Per token count it
// prints the mean time of a call (forward, or forward + backward with
// --backward) and the memory the call allocates: `peak` is the high-water
// mark of tensor bytes above what was held before (the allocator's
// statistics, core/allocator.h), `kept` what the call returns (out and what
// the backward needs: den, lse or probs; with --backward also dq, dk, dv),
// `work` = peak - kept, the op's own workspace. Linear attention's bytes grow
// linearly in T, the reference's quadratically. The softmax cores run
// without RoPE (linear attention's rotation is in its time). Speed is
// printed, never asserted; the first call of a token count is timed too.
// Heap scratch (std::vector, e.g. the reference backward's two [T, T]
// buffers) is not a tensor: this program counts operator new separately and
// adds its peak to `peak` (so `peak` is the sum of the two high-water marks,
// an upper bound of their joint one).
// With --device cuda the same calls run on the GPU (scripts/gpu/measure.sh):
// the times wait for the device's stream, `peak` and `kept` are bytes of the
// stream-ordered pool (the heap counter then only sees host scratch), and
// --dtype bf16 or f16 gives q, k, v in 16 bits (linear attention's states and
// sums stay in f32). A softmax core that fails (e.g. the reference's [T, T]
// matrix past the GPU's memory) prints its error as its row and the run
// goes on.
//
//   bench_linear_attention [--tokens 4096,8192,16384] [--heads H] [--dim D]
//                          [--features M] [--rope none|after|before] [--causal]
//                          [--backward] [--iters N] [--no-softmax] [--chunk C]
//                          [--device cpu|cuda] [--dtype f32|bf16|f16]
//                          [--maps elu1,favor]
// --maps: the feature maps timed (default both; e.g. favor alone for a
// FAVOR+ profile).
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cuda_context.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/flash_attention.h"
#include "ops/linear_attention.h"

using namespace rotor;

namespace {

std::atomic<size_t> g_heap{0}, g_heap_peak{0};

void heap_add(void* p) {
  const size_t now = g_heap += malloc_usable_size(p);
  size_t peak = g_heap_peak.load();
  while (now > peak && !g_heap_peak.compare_exchange_weak(peak, now)) {
  }
}

void* heap_new(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  heap_add(p);
  return p;
}

void heap_delete(void* p) noexcept {
  if (!p) return;
  g_heap -= malloc_usable_size(p);
  std::free(p);
}

}  // namespace

// Every plain new and delete of the program (the library's std::vectors
// included) goes through the counter.
void* operator new(size_t n) {
  return heap_new(n);
}
void* operator new[](size_t n) {
  return heap_new(n);
}
void operator delete(void* p) noexcept {
  heap_delete(p);
}
void operator delete[](void* p) noexcept {
  heap_delete(p);
}
void operator delete(void* p, size_t) noexcept {
  heap_delete(p);
}
void operator delete[](void* p, size_t) noexcept {
  heap_delete(p);
}

namespace {

const char* kUsage =
    "usage: bench_linear_attention [--tokens 4096,8192,16384] [--heads H] [--dim D] "
    "[--features M] [--rope none|after|before] [--causal] [--backward] [--iters N] "
    "[--no-softmax] [--chunk C] [--device cpu|cuda] [--dtype f32|bf16|f16] "
    "[--maps elu1,favor]\n";

struct Args {
  std::vector<int64_t> tokens{4096, 8192, 16384};
  int64_t heads = 1, dim = 64, features = 64;
  ops::LinearRope rope = ops::LinearRope::AfterFeatureMap;
  bool causal = false, backward = false, softmax = true;
  int iters = 1;
  int64_t chunk = 0;  // causal query rows per chunk; 0: the op's default
  Device device = Device::cpu();
  DType dtype = DType::F32;
  // The feature maps timed, in this order (--maps; default both).
  std::vector<ops::LinearFeatureMap> maps{ops::LinearFeatureMap::Elu1,
                                          ops::LinearFeatureMap::Favor};
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "bench_linear_attention: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

int64_t positive(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1)
    usage_error(flag + " needs a positive integer, got '" + text + "'");
  return v;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--tokens") {
      a.tokens.clear();
      std::stringstream s(next());
      for (std::string t; std::getline(s, t, ',');) a.tokens.push_back(positive(flag, t));
    } else if (flag == "--heads") {
      a.heads = positive(flag, next());
    } else if (flag == "--dim") {
      a.dim = positive(flag, next());
    } else if (flag == "--features") {
      a.features = positive(flag, next());
    } else if (flag == "--rope") {
      const std::string v = next();
      if (v == "none")
        a.rope = ops::LinearRope::None;
      else if (v == "after")
        a.rope = ops::LinearRope::AfterFeatureMap;
      else if (v == "before")
        a.rope = ops::LinearRope::BeforeFeatureMap;
      else
        usage_error("--rope none|after|before, got '" + v + "'");
    } else if (flag == "--causal") {
      a.causal = true;
    } else if (flag == "--backward") {
      a.backward = true;
    } else if (flag == "--iters") {
      a.iters = static_cast<int>(positive(flag, next()));
    } else if (flag == "--chunk") {
      a.chunk = positive(flag, next());
    } else if (flag == "--maps") {
      a.maps.clear();
      std::stringstream s(next());
      for (std::string m; std::getline(s, m, ',');) {
        if (m == "elu1")
          a.maps.push_back(ops::LinearFeatureMap::Elu1);
        else if (m == "favor")
          a.maps.push_back(ops::LinearFeatureMap::Favor);
        else
          usage_error("--maps takes elu1 and favor, got '" + m + "'");
      }
      if (a.maps.empty()) usage_error("--maps needs at least one of elu1, favor");
    } else if (flag == "--no-softmax") {
      a.softmax = false;
    } else if (flag == "--device") {
      try {
        a.device = resolve_device(next());
      } catch (const Error& e) {
        usage_error(std::string("--device: ") + e.what());
      }
    } else if (flag == "--dtype") {
      const std::string v = next();
      if (v == "f32")
        a.dtype = DType::F32;
      else if (v == "bf16")
        a.dtype = DType::BF16;
      else if (v == "f16")
        a.dtype = DType::F16;
      else
        usage_error("--dtype f32|bf16|f16, got '" + v + "'");
    } else {
      usage_error("unknown argument '" + flag + "'");
    }
  }
  return a;
}

// Uniform [-1, 1) values of `dtype` on `device`.
Tensor uniform(const Shape& shape, uint32_t seed, DType dtype, Device device) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  uint32_t x = seed * 2654435761u + 1u;
  for (float& e : v) {
    x = x * 1664525u + 1013904223u;
    e = static_cast<float>(x >> 8) / 8388608.0f - 1.0f;  // [-1, 1)
  }
  return Tensor::from_floats(v, shape, dtype).to(device);
}

void wait(Device device) {
  if (device.is_cuda()) cuda::synchronize(device.index);
}

// One implementation's call: allocates what it returns into `kept` and runs.
using Call = std::function<void(std::vector<Tensor>& kept)>;

void measure(const char* name, int64_t T, int iters, Device device, const Call& call) {
  wait(device);
  const size_t before = bytes_in_use(device), heap_before = g_heap.load();
  reset_peak_bytes(device);
  g_heap_peak = heap_before;
  double ms = 0.0;
  size_t kept_bytes = 0, peak = 0;
  for (int i = 0; i < iters; ++i) {
    std::vector<Tensor> kept;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      call(kept);
      wait(device);
    } catch (const Error& e) {
      std::printf("%-22s T=%-6lld failed: %s\n", name, static_cast<long long>(T), e.what());
      std::fflush(stdout);
      return;
    }
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0) {
      peak = peak_bytes(device) - before + (g_heap_peak.load() - heap_before);
      for (const Tensor& t : kept) kept_bytes += t.nbytes();
    }
  }
  const double mib = 1024.0 * 1024.0;
  std::printf("%-22s T=%-6lld %10.1f ms  peak %9.1f MiB  kept %9.1f MiB  work %9.2f MiB\n", name,
              static_cast<long long>(T), ms / iters, peak / mib, kept_bytes / mib,
              (peak - kept_bytes) / mib);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    const int64_t B = 1, H = a.heads, D = a.dim;
    const Device dev = a.device;
    const DType dt = a.dtype;
    std::printf("B=%d H=%lld D=%lld rope=%s causal=%d %s, %d iteration(s), %s %s\n", 1,
                static_cast<long long>(H), static_cast<long long>(D), ops::linear_rope_name(a.rope),
                a.causal ? 1 : 0, a.backward ? "forward+backward" : "forward", a.iters,
                dev.str().c_str(), dtype_name(dt));
    const Tensor proj = ops::favor_projection(1, 0, 0, a.features, D, dev);
    for (int64_t T : a.tokens) {
      const Tensor q = uniform({B, H, T, D}, 1, dt, dev), k = uniform({B, H, T, D}, 2, dt, dev),
                   v = uniform({B, H, T, D}, 3, dt, dev);
      auto grads = [&](std::vector<Tensor>& kept) {
        for (int i = 0; i < 3; ++i) kept.push_back(Tensor::empty({B, H, T, D}, dt, dev));
      };
      for (const auto map : a.maps) {
        ops::LinearAttentionOptions o;
        o.feature_map = map;
        if (a.chunk > 0) o.chunk = a.chunk;
        o.causal = a.causal;
        o.rope = a.rope;
        const Tensor p = map == ops::LinearFeatureMap::Favor ? proj : Tensor();
        const std::string name =
            std::string("linear ") + ops::linear_feature_map_name(map) +
            (map == ops::LinearFeatureMap::Favor ? " M=" + std::to_string(a.features)
                                                 : std::string());
        measure(name.c_str(), T, a.iters, dev, [&](std::vector<Tensor>& kept) {
          Tensor out = Tensor::empty({B, H, T, D}, dt, dev),
                 den = Tensor::empty({B, H, T}, DType::F32, dev);
          ops::linear_attention_forward(q, k, v, p, o, out, den);
          kept = {out, den};
          if (!a.backward) return;
          grads(kept);
          ops::linear_attention_backward(q, k, v, p, out, den, out, o, kept[2], kept[3], kept[4]);
        });
      }
      if (!a.softmax) continue;
      ops::AttentionOptions so;
      so.scale = 1.0f / std::sqrt(static_cast<float>(D));
      so.causal = a.causal;
      // On a GPU in 16 bits, the tensor-core kernel (what the plan picks there).
      if (dev.is_cuda() && dt != DType::F32) so.flash_kernel = ops::FlashKernel::TensorCore;
      measure(dev.is_cuda() && dt != DType::F32 ? "softmax flash (tc)" : "softmax flash (tiled)", T,
              a.iters, dev, [&](std::vector<Tensor>& kept) {
                Tensor out = Tensor::empty({B, H, T, D}, dt, dev),
                       lse = Tensor::empty({B, H, T}, DType::F32, dev);
                ops::flash_attention_forward(q, k, v, so, out, lse);
                kept = {out, lse};
                if (!a.backward) return;
                grads(kept);
                ops::flash_attention_backward(q, k, v, out, lse, out, so, kept[2], kept[3],
                                              kept[4]);
              });
      measure("softmax reference", T, a.iters, dev, [&](std::vector<Tensor>& kept) {
        Tensor out = Tensor::empty({B, H, T, D}, dt, dev),
               probs = Tensor::empty({B, H, T, T}, dt, dev);
        ops::attention_forward(q, k, v, so, out, probs);
        kept = {out, probs};
        if (!a.backward) return;
        grads(kept);
        ops::attention_backward(q, k, v, probs, out, so, kept[2], kept[3], kept[4]);
      });
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_linear_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
