// The CPU side of cuDNN attention: the graph key and its LRU cache
// (ops/cudnn_graph_cache.h), what cuDNN serves and why not on made-up
// machines (ops/cudnn_attention.h). The plan that picks cuDNN or another core
// is tested in test_attention_plan.cpp; the cuDNN graphs themselves run in
// tests/gpu/test_cudnn_attention_cuda.cpp.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "ops/cudnn_attention.h"
#include "ops/cudnn_graph_cache.h"

namespace rotor {
namespace {

using ops::CudnnAttentionCase;
using ops::CudnnCapability;
using ops::SdpaGraphKey;

// The RoFormer-base masked-LM cell: bf16, 64 x 512, 12 heads of 64.
CudnnAttentionCase mlm_case() {
  CudnnAttentionCase c;
  c.dtype = DType::BF16;
  c.B = 64;
  c.H = 12;
  c.Tq = c.Tk = 512;
  c.D = 64;
  c.key_lengths = true;
  c.dropout = 0.1f;
  return c;
}

const CudnnCapability kH100{true, 90, 91400};
const CudnnCapability kA100{true, 80, 90100};

// ------------------------------------------------------------------- graph key

TEST(CudnnGraphKey, EveryFieldCounts) {
  const SdpaGraphKey base = ops::sdpa_graph_key(mlm_case(), 1.0f, 0, false);
  std::vector<SdpaGraphKey> variants(11, base);
  variants[0].device = 1;
  variants[1].backward = true;
  variants[2].dtype = DType::F16;
  variants[3].B = 63;
  variants[4].H = 8;
  variants[5].Tq = 511;
  variants[6].Tk = 511;
  variants[7].D = 128;
  variants[8].causal = true;
  variants[9].key_lengths = false;
  variants[10].dropout = 0.0f;
  SdpaGraphKey scaled = base;
  scaled.scale = 0.125f;
  variants.push_back(scaled);
  const ops::SdpaGraphKeyHash hash;
  std::set<size_t> hashes{hash(base)};
  for (const SdpaGraphKey& v : variants) {
    EXPECT_FALSE(v == base) << v.str();
    hashes.insert(hash(v));
  }
  EXPECT_EQ(hashes.size(), variants.size() + 1) << "distinct keys should hash apart";
  const SdpaGraphKey same = ops::sdpa_graph_key(mlm_case(), 1.0f, 0, false);
  EXPECT_TRUE(same == base);
  EXPECT_EQ(hash(same), hash(base));
}

TEST(CudnnGraphKey, NamesTheShape) {
  CudnnAttentionCase c = mlm_case();
  c.causal = true;
  EXPECT_EQ(ops::sdpa_graph_key(c, 0.125f, 1, true).str(),
            "bwd bf16 B64 H12 Tq512 Tk512 D64 causal lengths drop0.1 scale0.125 cuda:1");
  c = mlm_case();
  c.key_lengths = false;
  c.dropout = 0.0f;
  EXPECT_EQ(ops::sdpa_graph_key(c, 1.0f, 0, false).str(),
            "fwd bf16 B64 H12 Tq512 Tk512 D64 drop0 scale1 cuda:0");
}

// ------------------------------------------------------------------- LRU cache

TEST(CudnnGraphCache, BuildsOncePerKeyAndForgetsTheLeastRecentlyUsed) {
  ops::LruCache<int, std::string> cache(2);
  int builds = 0;
  auto get = [&](int k) {
    return *cache.get(k, [&] {
      ++builds;
      return std::make_shared<std::string>("graph" + std::to_string(k));
    });
  };
  EXPECT_EQ(get(1), "graph1");
  EXPECT_EQ(get(1), "graph1");
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  get(2);
  get(1);  // 1 is now the most recent: 2 goes first
  get(3);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_TRUE(cache.contains(1));
  EXPECT_FALSE(cache.contains(2));
  EXPECT_TRUE(cache.contains(3));
  EXPECT_EQ(builds, 3);
  get(2);  // rebuilt after its eviction
  EXPECT_EQ(builds, 4);
  EXPECT_FALSE(cache.contains(1));
}

TEST(CudnnGraphCache, AFailedBuildLeavesNothingAndAnEvictedGraphLivesOnInUse) {
  ops::LruCache<int, int> cache(1);
  EXPECT_THROW(cache.get(7, []() -> std::shared_ptr<int> { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_EQ(cache.size(), 0u);
  std::shared_ptr<int> held = cache.get(1, [] { return std::make_shared<int>(11); });
  cache.get(2, [] { return std::make_shared<int>(22); });  // evicts 1
  EXPECT_FALSE(cache.contains(1));
  EXPECT_EQ(*held, 11);
}

TEST(CudnnGraphCache, KeyedBySdpaKeys) {
  ops::LruCache<SdpaGraphKey, int, ops::SdpaGraphKeyHash> cache(ops::kSdpaGraphCacheCapacity);
  int builds = 0;
  auto build = [&] { return std::make_shared<int>(++builds); };
  const CudnnAttentionCase c = mlm_case();
  const int fwd = *cache.get(ops::sdpa_graph_key(c, 1.0f, 0, false), build);
  const int bwd = *cache.get(ops::sdpa_graph_key(c, 1.0f, 0, true), build);
  EXPECT_NE(fwd, bwd);
  EXPECT_EQ(*cache.get(ops::sdpa_graph_key(c, 1.0f, 0, false), build), fwd);
  // A translation run: one graph per (B, T) until the capacity, then reuse.
  for (int64_t t = 1; t <= 600; ++t) {
    CudnnAttentionCase s = c;
    s.Tq = s.Tk = t;
    cache.get(ops::sdpa_graph_key(s, 1.0f, 0, false), build);
  }
  EXPECT_EQ(cache.size(), ops::kSdpaGraphCacheCapacity);
}

// --------------------------------------------------------- what cuDNN serves

TEST(CudnnAttentionSupport, ThePaperCellsOnAmpereAndHopper) {
  for (const CudnnCapability& cap : {kA100, kH100})
    for (DType dt : {DType::F16, DType::BF16})
      for (int64_t D : {64, 128})
        for (bool causal : {false, true}) {
          CudnnAttentionCase c = mlm_case();
          c.dtype = dt;
          c.D = D;
          c.causal = causal;
          EXPECT_EQ(ops::cudnn_attention_unsupported(c, cap), "")
              << dtype_name(dt) << " D" << D << (causal ? " causal" : "") << " sm_" << cap.sm;
        }
  // Decoder cross-attention (Tq != Tk, key lengths, dropout, not causal).
  CudnnAttentionCase cross = mlm_case();
  cross.Tq = 37;
  cross.Tk = 45;
  EXPECT_EQ(ops::cudnn_attention_unsupported(cross, kH100), "");
  // Causal with fewer queries than keys: cuDNN's bottom-right diagonal, alone.
  CudnnAttentionCase tail = cross;
  tail.causal = true;
  tail.key_lengths = false;
  tail.dropout = 0.0f;
  EXPECT_EQ(ops::cudnn_attention_unsupported(tail, kH100), "");
}

TEST(CudnnAttentionSupport, SaysWhyNot) {
  struct Refusal {
    const char* what;
    CudnnAttentionCase c;
    CudnnCapability cap;
    const char* reason_contains;
  };
  auto with = [](auto change) {
    CudnnAttentionCase c = mlm_case();
    change(c);
    return c;
  };
  const Refusal refusals[] = {
      {"no frontend", mlm_case(), {false, 90, 91400}, "built without the cuDNN frontend"},
      {"cpu", mlm_case(), {true, 0, 0}, "CUDA devices only"},
      {"turing", mlm_case(), {true, 75, 91400}, "sm_80 or newer, this GPU is sm_75"},
      {"cudnn 8", mlm_case(), {true, 90, 8907}, "cuDNN 9 or newer, the loaded library is 8.9.7"},
      {"cudnn 9.10.0", mlm_case(), {true, 90, 91000}, "cuDNN 9.10.0 has known attention bugs"},
      {"f32", with([](auto& c) { c.dtype = DType::F32; }), kH100, "f16 or bf16, not f32"},
      {"head dim 100", with([](auto& c) { c.D = 100; }), kH100, "head dim 100"},
      {"head dim 256", with([](auto& c) { c.D = 256; }), kH100, "multiples of 8 up to 128"},
      {"empty", with([](auto& c) { c.B = 0; }), kH100, "empty batch"},
      {"one query, one key", with([](auto& c) { c.Tq = c.Tk = 1; }), kH100,
       "refuse s_q = s_kv = 1"},
      {"causal, more queries", with([](auto& c) {
         c.causal = true;
         c.Tq = 9;
         c.Tk = 5;
       }),
       kH100, "more queries (9) than keys (5)"},
      {"causal tail with lengths", with([](auto& c) {
         c.causal = true;
         c.Tq = 5;
         c.dropout = 0.0f;
       }),
       kH100, "neither key lengths nor dropout"},
      {"causal tail with dropout", with([](auto& c) {
         c.causal = true;
         c.Tq = 5;
         c.key_lengths = false;
       }),
       kH100, "neither key lengths nor dropout"},
  };
  for (const Refusal& r : refusals) {
    const std::string why = ops::cudnn_attention_unsupported(r.c, r.cap);
    EXPECT_NE(why.find(r.reason_contains), std::string::npos) << r.what << ": " << why;
  }
}

TEST(CudnnAttentionSupport, CpuTensorsAreRefusedAndTheOpSaysWhy) {
  const Tensor q = Tensor::zeros({1, 2, 16, 64}, DType::BF16);
  ops::AttentionOptions o;
  std::string why;
  EXPECT_FALSE(ops::cudnn_attention_supported(q, q, o, &why));
  EXPECT_FALSE(why.empty());
  Tensor out = Tensor::zeros({1, 2, 16, 64}, DType::BF16), lse = Tensor::zeros({1, 2, 16});
  try {
    ops::cudnn_attention_forward(q, q, q, o, out, lse);
    FAIL() << "expected a rotor::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cudnn_attention_forward: " + why), std::string::npos)
        << e.what();
  }
  Tensor bad_lse = Tensor::zeros({1, 2, 15});
  EXPECT_THROW(ops::cudnn_attention_forward(q, q, q, o, out, bad_lse), Error);
  Tensor dq = Tensor::zeros({1, 2, 16, 64}, DType::BF16);
  Tensor dk = Tensor::zeros({1, 2, 16, 64}, DType::F16);  // q's dtype expected
  EXPECT_THROW(ops::cudnn_attention_backward(q, q, q, out, lse, out, o, dq, dk, dq), Error);
}

}  // namespace
}  // namespace rotor
