// Packed documents (data.packing documents, nn::DocLayout) on the GPU: the
// regrouping runs through the CUDA index_select and every CUDA core takes
// the documents as rows of their own with key lengths. A packed batch's
// logits equal each document's alone on the GPU, and the CPU's packed
// logits (f32), for the attention impls auto, rotor (flash), reference and
// linear attention, with RoPE, ALiBi and learned positions; in bf16 the
// packed and the one-by-one logits agree within bf16's rounding, and the
// gradients of the packed batch equal the sum over the documents alone.
// The CPU twin of these checks is tests/cpu/test_lm_packing.cpp. Skipped
// (one line) without a GPU.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/decoder_lm.h"
#include "nn/attention.h"
#include "nn/position.h"
#include "support/model_gradcheck.h"
#include "support/test_util.h"

namespace rotor {
namespace {

const Device kGpu = Device::cuda(0);
constexpr int64_t kVocab = 40;

struct Core {
  const char* name;
  nn::AttentionImpl impl;
  nn::AttentionKind kind;
};

models::DecoderLmOptions tiny_lm(nn::PositionKind position, const Core& core) {
  models::DecoderLmOptions o;
  o.vocab_size = kVocab;
  o.num_layers = 2;
  o.layer.d_model = 128;
  o.layer.n_heads = 2;  // D = 64: every CUDA kernel's head size
  o.layer.d_ff = 256;
  o.layer.activation = ops::Activation::GELU;
  o.layer.dropout = 0.0f;
  o.layer.attention_dropout = 0.0f;
  o.layer.impl = core.impl;
  o.layer.attention_kind = core.kind;
  o.position = position;
  o.max_positions = 16;
  return o;
}

// Row 0: documents of 4, 1 and 3 tokens; row 1: 5 tokens and 3 of padding.
struct Packed {
  std::vector<std::vector<int32_t>> docs{{5, 12, 3, 30}, {17}, {4, 6, 8}, {22, 9, 13, 25, 31}};
  std::vector<int64_t> row{0, 0, 0, 1}, start{0, 4, 5, 0};
  static constexpr int64_t B = 2, T = 8;
  models::LmBatch batch(Device device) const {
    std::vector<int32_t> ids(B * T, 0), tg(B * T, 0), pos(B * T, 0), seg(B * T, -1);
    std::vector<int32_t> next(B, 0);
    for (size_t i = 0; i < docs.size(); ++i) {
      for (size_t t = 0; t < docs[i].size(); ++t) {
        const int64_t at = row[i] * T + start[i] + static_cast<int64_t>(t);
        ids[at] = docs[i][t];
        tg[at] = (docs[i][t] * 7 + 3) % (kVocab - 1) + 1;
        pos[at] = static_cast<int32_t>(t);
        seg[at] = next[row[i]];
      }
      ++next[row[i]];
    }
    models::LmBatch m;
    m.input_ids = Tensor::from_ints(ids, {B, T});
    m.targets = Tensor::from_ints(tg, {B, T});
    m.tokens = 13;
    m.segments = seg;
    m.positions = Tensor::from_ints(pos, {B, T});
    return m.to(device);
  }
  models::LmBatch alone(size_t i, Device device) const {
    const std::vector<int32_t> tg = batch(Device::cpu()).targets.to_ints();
    const int64_t n = static_cast<int64_t>(docs[i].size());
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) t[k] = tg[row[i] * T + start[i] + k];
    models::LmBatch m;
    m.input_ids = Tensor::from_ints(docs[i], {1, n});
    m.targets = Tensor::from_ints(t, {1, n});
    m.tokens = n;
    return m.to(device);
  }
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - b[i]));
  return a.size() == b.size() ? m : INFINITY;
}

struct Model {
  nn::ParameterStore store;
  std::unique_ptr<models::DecoderLM> lm;
  nn::Context ctx;
  Model(nn::PositionKind position, const Core& core, Device device, DType dtype) {
    lm = std::make_unique<models::DecoderLM>(tiny_lm(position, core), store);
    store.allocate(device);
    store.initialize(4);
    test::jitter(store, 5, 0.1f);
    if (dtype != DType::F32) store.set_compute_dtype(dtype);
    ctx.device = device;
    ctx.dtype = dtype;
  }
};

struct Param {
  Core core;
  nn::PositionKind position;
  DType dtype;
  std::string name;
  friend void PrintTo(const Param& p, std::ostream* os) { *os << p.name; }
};

std::vector<Param> params() {
  const std::vector<Core> cores = {
      {"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax},
      {"rotor", nn::AttentionImpl::Rotor, nn::AttentionKind::Softmax},
      {"reference", nn::AttentionImpl::Reference, nn::AttentionKind::Softmax},
      {"linear", nn::AttentionImpl::Auto, *nn::attention_kind("linear")},
  };
  std::vector<Param> out;
  for (const Core& c : cores)
    for (const char* pos : {"rope", "alibi", "learned"}) {
      const nn::PositionKind k = *nn::position_kind(pos);
      if (c.kind != nn::AttentionKind::Softmax && k->alibi) continue;
      for (DType dt : {DType::F32, DType::BF16})
        out.push_back({c, k, dt, fmt::format("{}_{}_{}", c.name, pos, dtype_name(dt))});
    }
  return out;
}

class LmPackingCuda : public ::testing::TestWithParam<Param> {};

TEST_P(LmPackingCuda, PackedBatchEqualsDocumentsAloneAndTheCpu) {
  ROTOR_REQUIRE_GPU();
  const Param& p = GetParam();
  const bool f32 = p.dtype == DType::F32;
  const double tol = f32 ? 2e-4 : 0.1;  // bf16 rounds every product input
  Model gpu(p.position, p.core, kGpu, p.dtype);
  const Packed pk;
  const std::vector<float> packed =
      gpu.lm->forward_logits(pk.batch(kGpu), gpu.ctx).to(Device::cpu()).to_floats();
  for (size_t i = 0; i < pk.docs.size(); ++i) {
    const std::vector<float> alone =
        gpu.lm->forward_logits(pk.alone(i, kGpu), gpu.ctx).to(Device::cpu()).to_floats();
    const size_t off = static_cast<size_t>((pk.row[i] * Packed::T + pk.start[i]) * kVocab);
    const std::vector<float> part(packed.begin() + static_cast<int64_t>(off),
                                  packed.begin() + static_cast<int64_t>(off + alone.size()));
    EXPECT_LT(max_diff(part, alone), tol) << "document " << i;
  }
  if (f32) {  // the CPU's packed logits, same weights
    Model cpu(p.position, p.core, Device::cpu(), DType::F32);
    const std::vector<float> host =
        cpu.lm->forward_logits(pk.batch(Device::cpu()), cpu.ctx).to_floats();
    for (int64_t b = 0; b < Packed::B; ++b)
      for (int64_t t = 0; t < Packed::T; ++t) {
        if (b == 1 && t >= 5) continue;  // padding: no document
        for (int64_t v = 0; v < kVocab; ++v) {
          const size_t j = static_cast<size_t>((b * Packed::T + t) * kVocab + v);
          ASSERT_NEAR(packed[j], host[j], tol) << "row " << b << " token " << t;
        }
      }
  }
  nn::Context train = gpu.ctx;
  train.training = true;
  gpu.store.zero_grad();
  gpu.lm->forward_loss(pk.batch(kGpu), train);
  gpu.lm->backward(1.0f);
  const std::vector<float> g_packed = gpu.store.grads().to(Device::cpu()).to_floats();
  gpu.store.zero_grad();
  for (size_t i = 0; i < pk.docs.size(); ++i) {
    gpu.lm->forward_loss(pk.alone(i, kGpu), train);
    gpu.lm->backward(1.0f);
  }
  const std::vector<float> g_alone = gpu.store.grads().to(Device::cpu()).to_floats();
  double scale = 0;
  for (float g : g_alone) scale = std::max(scale, std::abs(double(g)));
  EXPECT_LT(max_diff(g_packed, g_alone), (f32 ? 1e-4 : 0.05) * std::max(scale, 1.0));
}

INSTANTIATE_TEST_SUITE_P(Cores, LmPackingCuda, ::testing::ValuesIn(params()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rotor
