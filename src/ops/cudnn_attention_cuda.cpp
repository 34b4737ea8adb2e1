// cuDNN attention through the cuDNN frontend's graph API (header-only, fetched
// by scripts/deps.sh): one SDPA forward graph and one backward graph per
// shape key, built on first use and kept in an LRU cache
// (ops/cudnn_graph_cache.h). Tensors are rotor's contiguous [B, H, T, D]; the
// log-sum-exp output of the forward ("Stats", natural log of the scaled
// scores) is rotor's lse [B, H, Tq]. Key lengths become cuDNN's padding mask
// (query lengths all Tq); dropout uses cuDNN's Philox with a seed derived from
// rotor's (seed, stream).
#if ROTOR_WITH_CUDA

#include "ops/cudnn_attention_cuda.h"

#include <cudnn.h>

namespace rotor::ops::cuda_impl {
int64_t cudnn_library_version() {
  return static_cast<int64_t>(cudnnGetVersion());
}
}  // namespace rotor::ops::cuda_impl

#if ROTOR_WITH_CUDNN_FRONTEND

#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "core/cuda_context.h"
#include "kernels/cudnn_attention_inputs.cuh"
#include "ops/cuda_glue.h"
#include "ops/cudnn_graph_cache.h"

namespace rotor::ops::cuda_impl {

namespace {

namespace fe = cudnn_frontend;
using Uid = fe::graph::Tensor_attributes::uid_t;
using TensorAttr = std::shared_ptr<fe::graph::Tensor_attributes>;

// Tensor ids of the variant packs.
enum : Uid { kQ = 1, kK, kV, kO, kStats, kSeqQ, kSeqKv, kSeed, kOffset, kDO, kDQ, kDK, kDV };

// A built graph, or cuDNN's refusal (kept too, so that it is asked once).
struct SdpaGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string refused;
};

LruCache<SdpaGraphKey, SdpaGraph, SdpaGraphKeyHash>& graph_cache() {
  static LruCache<SdpaGraphKey, SdpaGraph, SdpaGraphKeyHash> cache(kSdpaGraphCacheCapacity);
  return cache;
}

// Makes `device` current for the scope.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) : device_(device), prev_(cuda::current_device()) {
    if (prev_ != device_) cuda::set_device(device_);
  }
  ~CurrentDevice() {
    if (prev_ != device_) (void)cudaSetDevice(prev_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int device_, prev_;
};

// One cuDNN handle per device, created with the device current. Never
// destroyed: at process exit the CUDA context may already be gone. Null,
// with the reason in *why, where cudnnCreate fails (a cuDNN that cannot
// start on this machine: the plan then leaves cuDNN, as for any refusal).
cudnnHandle_t handle_for(int device, std::string* why) {
  static std::mutex mutex;
  static std::map<int, std::pair<cudnnHandle_t, std::string>> handles;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(device);
  if (it == handles.end()) {
    CurrentDevice scope(device);
    cudnnHandle_t h = nullptr;
    const cudnnStatus_t s = cudnnCreate(&h);
    std::string failed;
    if (s != CUDNN_STATUS_SUCCESS) {
      failed = fmt::format("cudnnCreate on cuda:{} failed: {}", device, cudnnGetErrorString(s));
      h = nullptr;
    }
    it = handles.emplace(device, std::make_pair(h, failed)).first;
  }
  if (why) *why = it->second.second;
  return it->second.first;
}

std::vector<int64_t> bhtd_strides(int64_t H, int64_t T, int64_t D) {
  return {H * T * D, T * D, D, 1};
}

TensorAttr bhtd(fe::graph::Graph& g, const char* name, Uid uid, int64_t B, int64_t H, int64_t T,
                int64_t D) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, H, T, D})
                      .set_stride(bhtd_strides(H, T, D)));
}

TensorAttr stats_tensor(fe::graph::Graph& g, int64_t B, int64_t H, int64_t Tq) {  // lse [B, H, Tq]
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("stats")
                      .set_uid(kStats)
                      .set_dim({B, H, Tq, 1})
                      .set_stride({H * Tq, Tq, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}

TensorAttr scalar_i64(fe::graph::Graph& g, const char* name, Uid uid) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({1, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT64));
}

TensorAttr lengths(fe::graph::Graph& g, const char* name, Uid uid, int64_t B) {  // i32 [B]
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({B, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}

// The mask and dropout options, the same in both directions. rotor's causal
// mask is aligned at the bottom right (query i sees keys j <= i + Tk - Tq):
// top-left when Tq == Tk (the same, and what cuDNN pairs with padding and
// dropout), bottom-right otherwise (cudnn_attention_unsupported has excluded
// the combinations cuDNN refuses).
template <class Attrs>
void set_masks(Attrs& a, fe::graph::Graph& g, const SdpaGraphKey& k) {
  a.set_attn_scale(k.scale);
  if (k.causal) {
    a.set_diagonal_alignment(k.Tq == k.Tk ? fe::DiagonalAlignment_t::TOP_LEFT
                                          : fe::DiagonalAlignment_t::BOTTOM_RIGHT)
        .set_diagonal_band_right_bound(0);
  }
  if (k.key_lengths) {
    a.set_padding_mask(true)
        .set_seq_len_q(lengths(g, "seq_q", kSeqQ, k.B))
        .set_seq_len_kv(lengths(g, "seq_kv", kSeqKv, k.B));
  }
  if (k.dropout > 0.0f)
    a.set_dropout(k.dropout, scalar_i64(g, "seed", kSeed), scalar_i64(g, "offset", kOffset));
}

std::shared_ptr<SdpaGraph> build_graph(const SdpaGraphKey& k) {
  auto r = std::make_shared<SdpaGraph>();
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(k.dtype == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const TensorAttr q = bhtd(*g, "q", kQ, k.B, k.H, k.Tq, k.D);
  const TensorAttr kk = bhtd(*g, "k", kK, k.B, k.H, k.Tk, k.D);
  const TensorAttr v = bhtd(*g, "v", kV, k.B, k.H, k.Tk, k.D);
  if (!k.backward) {
    auto a = fe::graph::SDPA_attributes().set_name("rotor_sdpa").set_generate_stats(true);
    set_masks(a, *g, k);
    auto [o, stats] = g->sdpa(q, kk, v, a);
    o->set_output(true)
        .set_uid(kO)
        .set_dim({k.B, k.H, k.Tq, k.D})
        .set_stride(bhtd_strides(k.H, k.Tq, k.D));
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({k.B, k.H, k.Tq, 1})
        .set_stride({k.H * k.Tq, k.Tq, 1, 1});
  } else {
    const TensorAttr o = bhtd(*g, "o", kO, k.B, k.H, k.Tq, k.D);
    const TensorAttr d_o = bhtd(*g, "do", kDO, k.B, k.H, k.Tq, k.D);
    const TensorAttr stats = stats_tensor(*g, k.B, k.H, k.Tq);
    auto a = fe::graph::SDPA_backward_attributes().set_name("rotor_sdpa_backward");
    set_masks(a, *g, k);
    auto [dq, dk, dv] = g->sdpa_backward(q, kk, v, o, d_o, stats, a);
    dq->set_output(true)
        .set_uid(kDQ)
        .set_dim({k.B, k.H, k.Tq, k.D})
        .set_stride(bhtd_strides(k.H, k.Tq, k.D));
    dk->set_output(true)
        .set_uid(kDK)
        .set_dim({k.B, k.H, k.Tk, k.D})
        .set_stride(bhtd_strides(k.H, k.Tk, k.D));
    dv->set_output(true)
        .set_uid(kDV)
        .set_dim({k.B, k.H, k.Tk, k.D})
        .set_stride(bhtd_strides(k.H, k.Tk, k.D));
  }
  CurrentDevice scope(k.device);
  std::string no_handle;
  const cudnnHandle_t h = handle_for(k.device, &no_handle);
  if (!h) {
    r->refused = "cuDNN cannot start here: " + no_handle;
    return r;
  }
  auto refuse = [&](fe::error_t e, const char* stage) {
    r->refused = fmt::format("cuDNN refused the {} graph ({}) at {}: {}",
                             k.backward ? "backward" : "forward", k.str(), stage, e.get_message());
    return r;
  };
  fe::error_t e = g->validate();
  if (e.is_bad()) return refuse(e, "validate");
  e = g->build_operation_graph(h);
  if (e.is_bad()) return refuse(e, "build_operation_graph");
  e = g->create_execution_plans({fe::HeurMode_t::A});
  if (e.is_bad()) return refuse(e, "create_execution_plans");
  e = g->check_support(h);
  if (e.is_bad()) return refuse(e, "check_support");
  e = g->build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
  if (e.is_bad()) return refuse(e, "build_plans");
  e = g->get_workspace_size(r->workspace);
  if (e.is_bad()) return refuse(e, "get_workspace_size");
  r->graph = std::move(g);
  return r;
}

std::shared_ptr<SdpaGraph> graph_for(const SdpaGraphKey& k) {
  return graph_cache().get(k, [&] { return build_graph(k); });
}

// cuDNN's Philox takes a seed and a counter offset. Offsets of nearby streams
// would overlap in counter space (correlated masks across layers), so the
// stream goes into the seed (splitmix64 finalizers) and the offset stays 0.
int64_t dropout_seed(uint64_t seed, uint64_t stream) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return static_cast<int64_t>(mix(seed ^ mix(stream)) >> 1);  // a non-negative int64
}

// Runs graph `k` with the tensors of `pack` plus the inputs rotor makes here
// (query lengths, dropout seed and offset) and the workspace.
void run(const SdpaGraphKey& k, const AttentionOptions& o, std::unordered_map<Uid, void*>& pack,
         const cuda_glue::DeviceScope& s, const char* op) {
  const std::shared_ptr<SdpaGraph> graph = graph_for(k);
  if (!graph->refused.empty()) ROTOR_FAIL("{}: {}", op, graph->refused);
  const size_t len_bytes = k.key_lengths ? ((static_cast<size_t>(k.B) * 4 + 15) & ~size_t(15)) : 0;
  const size_t seed_bytes = k.dropout > 0.0f ? 2 * sizeof(int64_t) : 0;
  cuda_glue::Scratch inputs(len_bytes + seed_bytes, s.index());
  int32_t* seq_q = k.key_lengths ? inputs.as<int32_t>() : nullptr;
  int64_t* seed_offset =
      seed_bytes ? reinterpret_cast<int64_t*>(inputs.as<char>() + len_bytes) : nullptr;
  ROTOR_CUDA_CHECK(kernels::sdpa_write_inputs(seq_q, k.B, static_cast<int32_t>(k.Tq), seed_offset,
                                              dropout_seed(o.seed, o.stream), 0, s.stream()));
  if (seq_q) {
    pack[kSeqQ] = seq_q;
    pack[kSeqKv] = o.key_lengths.raw();
  }
  if (seed_offset) {
    pack[kSeed] = seed_offset;
    pack[kOffset] = seed_offset + 1;
  }
  cuda_glue::Scratch workspace(static_cast<size_t>(graph->workspace), s.index());
  std::string no_handle;
  const cudnnHandle_t h = handle_for(s.index(), &no_handle);  // a built graph had one
  if (!h) ROTOR_FAIL("{}: {}", op, no_handle);
  const cudnnStatus_t st = cudnnSetStream(h, s.stream());
  if (st != CUDNN_STATUS_SUCCESS) ROTOR_FAIL("{}: cudnnSetStream: {}", op, cudnnGetErrorString(st));
  fe::error_t e = graph->graph->execute(h, pack, workspace.get());
  if (e.is_bad()) ROTOR_FAIL("{}: cuDNN could not run {}: {}", op, k.str(), e.get_message());
}

}  // namespace

std::string cudnn_attention_prepare(const CudnnAttentionCase& c, float scale, int device) {
  for (bool backward : {false, true}) {
    const std::shared_ptr<SdpaGraph> g = graph_for(sdpa_graph_key(c, scale, device, backward));
    if (!g->refused.empty()) return g->refused;
  }
  return "";
}

void cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse) {
  cuda_glue::DeviceScope s(q);
  const SdpaGraphKey key =
      sdpa_graph_key(cudnn_attention_case(q, k, options), options.scale, s.index(), false);
  std::unordered_map<Uid, void*> pack{
      {kQ, q.raw()}, {kK, k.raw()}, {kV, v.raw()}, {kO, out.raw()}, {kStats, lse.raw()}};
  run(key, options, pack, s, "cudnn_attention_forward");
}

void cudnn_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  cuda_glue::DeviceScope s(q);
  const SdpaGraphKey key =
      sdpa_graph_key(cudnn_attention_case(q, k, options), options.scale, s.index(), true);
  std::unordered_map<Uid, void*> pack{{kQ, q.raw()},   {kK, k.raw()},       {kV, v.raw()},
                                      {kO, out.raw()}, {kStats, lse.raw()}, {kDO, dout.raw()},
                                      {kDQ, dq.raw()}, {kDK, dk.raw()},     {kDV, dv.raw()}};
  run(key, options, pack, s, "cudnn_attention_backward");
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDNN_FRONTEND
#endif  // ROTOR_WITH_CUDA
