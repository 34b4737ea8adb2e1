// The public side of cuDNN attention (ops/cudnn_attention.h): argument checks,
// what cuDNN supports and why not, and the graph key. The graphs themselves
// are built and run in cudnn_attention_cuda.cpp, compiled only where CUDA and
// the cuDNN frontend headers are (ROTOR_WITH_CUDNN_FRONTEND).
#include "ops/cudnn_attention.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <mutex>

#include "core/cuda_context.h"
#include "ops/attention_common.h"
#include "ops/cudnn_attention_cuda.h"
#include "ops/cudnn_graph_cache.h"
#include "ops/dispatch.h"

#ifndef ROTOR_WITH_CUDNN_FRONTEND
#define ROTOR_WITH_CUDNN_FRONTEND 0
#endif

namespace rotor::ops {

namespace {

// cudnnGetVersion() spelled out: 91400 -> "9.14.0" (cuDNN 9 and later), 8907
// -> "8.9.7" (cuDNN 8 counted minor versions in hundreds).
std::string version_str(int64_t v) {
  if (v < 10000) return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

size_t mix(size_t h, uint64_t v) {  // boost::hash_combine's recipe, 64-bit
  return h ^ (static_cast<size_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

uint32_t float_bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void check_lse(const Tensor& lse, const Tensor& q, const char* what) {
  check_shape(lse, {q.size(0), q.size(1), q.size(2)}, what);
  if (lse.dtype() != DType::F32) ROTOR_FAIL("{}: lse must be f32, got {}", what, lse.str());
  check_same_device(lse, q, what);
}

void require_supported(const Tensor& q, const Tensor& k, const AttentionOptions& o,
                       const char* op) {
  std::string why;
  if (!cudnn_attention_supported(q, k, o, &why)) ROTOR_FAIL("{}: {}", op, why);
}

}  // namespace

// ---------------------------------------------------------------------------- key

std::string SdpaGraphKey::str() const {
  return fmt::format("{} {} B{} H{} Tq{} Tk{} D{}{}{} drop{:g} scale{:g} cuda:{}",
                     backward ? "bwd" : "fwd", dtype_name(dtype), B, H, Tq, Tk, D,
                     causal ? " causal" : "", key_lengths ? " lengths" : "", dropout, scale,
                     device);
}

SdpaGraphKey sdpa_graph_key(const CudnnAttentionCase& c, float scale, int device, bool backward) {
  SdpaGraphKey k;
  k.device = device;
  k.backward = backward;
  k.dtype = c.dtype;
  k.B = c.B;
  k.H = c.H;
  k.Tq = c.Tq;
  k.Tk = c.Tk;
  k.D = c.D;
  k.causal = c.causal;
  k.key_lengths = c.key_lengths;
  k.dropout = c.dropout;
  k.scale = scale;
  return k;
}

size_t SdpaGraphKeyHash::operator()(const SdpaGraphKey& k) const {
  size_t h = 0;
  h = mix(h, static_cast<uint64_t>(k.device));
  h = mix(h, (k.backward ? 1u : 0u) | (k.causal ? 2u : 0u) | (k.key_lengths ? 4u : 0u) |
                 (static_cast<uint64_t>(k.dtype) << 3));
  for (int64_t v : {k.B, k.H, k.Tq, k.Tk, k.D}) h = mix(h, static_cast<uint64_t>(v));
  h = mix(h, float_bits_of(k.dropout));
  h = mix(h, float_bits_of(k.scale));
  return h;
}

// ---------------------------------------------------------------- what is supported

CudnnCapability cudnn_capability(const Device& device) {
  CudnnCapability cap;
  cap.built = ROTOR_WITH_CUDNN_FRONTEND != 0;
#if ROTOR_WITH_CUDA
  if (!device.is_cuda()) return cap;
  static std::mutex mutex;
  static std::map<int, CudnnCapability> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(device.index);
  if (it != known.end()) return it->second;
  for (const cuda::DeviceInfo& d : cuda::devices())
    if (d.index == device.index) cap.sm = 10 * d.cc_major + d.cc_minor;
  cap.cudnn_version = cuda_impl::cudnn_library_version();
  known[device.index] = cap;
#else
  (void)device;
#endif
  return cap;
}

std::string cudnn_attention_unsupported(const CudnnAttentionCase& c, const CudnnCapability& cap) {
  if (!cap.built)
    return "rotor was built without the cuDNN frontend headers (scripts/deps.sh fetches them; "
           "then reconfigure)";
  if (cap.sm == 0) return "cuDNN attention runs on CUDA devices only";
  if (cap.sm < 80)
    return fmt::format("cuDNN attention needs sm_80 or newer, this GPU is sm_{}", cap.sm);
  if (cap.cudnn_version < 90000)
    return fmt::format("cuDNN attention needs cuDNN 9 or newer, the loaded library is {}",
                       version_str(cap.cudnn_version));
  if (cap.cudnn_version == 91000 || cap.cudnn_version == 91001)
    return fmt::format("cuDNN {} has known attention bugs (9.10.2 or newer fixes them)",
                       version_str(cap.cudnn_version));
  if (c.dtype != DType::F16 && c.dtype != DType::BF16)
    return fmt::format("cuDNN attention computes in f16 or bf16, not {} (precision: fp16 or bf16)",
                       dtype_name(c.dtype));
  if (c.D % 8 != 0 || c.D > 128 || c.D < 8)
    return fmt::format("head dim {}: cuDNN attention takes multiples of 8 up to 128", c.D);
  if (c.B == 0 || c.H == 0 || c.Tq == 0 || c.Tk == 0)
    return "an empty batch leaves nothing for cuDNN attention";
  // Seen on an H200 with cuDNN 9.14 (docs/performance.md, 2026-11-27): the
  // backward graph fails validation with "s_q = s_kv = 1 is not supported".
  if (c.Tq == 1 && c.Tk == 1)
    return "one query and one key: cuDNN 9's attention graphs refuse s_q = s_kv = 1";
  if (c.causal && c.Tq != c.Tk) {
    // rotor's causal mask is aligned at the bottom right (query i sees keys
    // j <= i + Tk - Tq); cuDNN's bottom-right diagonal takes neither padding
    // nor dropout nor more queries than keys.
    if (c.Tq > c.Tk)
      return fmt::format("a causal mask with more queries ({}) than keys ({})", c.Tq, c.Tk);
    if (c.key_lengths || c.dropout > 0.0f)
      return fmt::format(
          "a causal mask with {} queries and {} keys takes neither key lengths nor dropout in "
          "cuDNN",
          c.Tq, c.Tk);
  }
  return "";
}

CudnnAttentionCase cudnn_attention_case(const Tensor& q, const Tensor& k,
                                        const AttentionOptions& options) {
  CudnnAttentionCase c;
  c.dtype = q.dtype();
  c.B = q.size(0);
  c.H = q.size(1);
  c.Tq = q.size(2);
  c.D = q.size(3);
  c.Tk = k.size(2);
  c.causal = options.causal;
  c.key_lengths = options.key_lengths.defined();
  c.dropout = options.dropout;
  return c;
}

bool cudnn_attention_supported(const Tensor& q, const Tensor& k, const AttentionOptions& options,
                               std::string* why) {
  std::string reason;
  if (q.dim() != 4 || k.dim() != 4) {
    reason = "q and k must be [B, H, T, D]";
  } else if (options.rope) {
    reason = "options.rope (RoPE inside the kernel) is only in rotor's tensor-core flash kernel";
  } else if (options.alibi) {
    reason = "options.alibi (ALiBi) is not in cuDNN's attention (rotor's cores add it)";
  } else if (options.rel_bias.defined()) {
    reason = "options.rel_bias (T5's bias) is not in cuDNN's attention (rotor's cores add it)";
  } else if (options.score_bias.defined()) {
    reason = "options.score_bias is added by rotor's materialized core alone";
  } else {
    const CudnnAttentionCase c = cudnn_attention_case(q, k, options);
    reason = cudnn_attention_unsupported(c, cudnn_capability(q.device()));
#if ROTOR_WITH_CUDA && ROTOR_WITH_CUDNN_FRONTEND
    // What only cuDNN can say: whether it builds graphs for this case (cached).
    if (reason.empty())
      reason = cuda_impl::cudnn_attention_prepare(c, options.scale, q.device().index);
#endif
  }
  if (!reason.empty() && why) *why = reason;
  return reason.empty();
}

// ------------------------------------------------------------------------ the op

void cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse) {
  const char* op = "cudnn_attention_forward";
  detail::check_attention_args(q, k, v, options, op);
  detail::check_like(out, q.shape(), q, "cudnn_attention_forward out");
  check_lse(lse, q, "cudnn_attention_forward lse");
  require_supported(q, k, options, op);
#if ROTOR_WITH_CUDA && ROTOR_WITH_CUDNN_FRONTEND
  cuda_impl::cudnn_attention_forward(q, k, v, options, out, lse);
#else
  ROTOR_FAIL("{}: unreachable without the cuDNN frontend", op);
#endif
}

void cudnn_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  const char* op = "cudnn_attention_backward";
  detail::check_attention_args(q, k, v, options, op);
  detail::check_like(out, q.shape(), q, "cudnn_attention_backward out");
  detail::check_like(dout, q.shape(), q, "cudnn_attention_backward dout");
  check_lse(lse, q, "cudnn_attention_backward lse");
  detail::check_like(dq, q.shape(), q, "cudnn_attention_backward dq");
  detail::check_like(dk, k.shape(), q, "cudnn_attention_backward dk");
  detail::check_like(dv, v.shape(), q, "cudnn_attention_backward dv");
  require_supported(q, k, options, op);
#if ROTOR_WITH_CUDA && ROTOR_WITH_CUDNN_FRONTEND
  cuda_impl::cudnn_attention_backward(q, k, v, out, lse, dout, options, dq, dk, dv);
#else
  ROTOR_FAIL("{}: unreachable without the cuDNN frontend", op);
#endif
}

}  // namespace rotor::ops
