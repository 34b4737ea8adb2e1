// cuDNN attention (ops/cudnn_attention.h) on a GPU beyond the kernel table of
// test_attention_kernels_cuda.cpp (which holds cuDNN, without dropout, to the
// CPU twin like rotor's kernels). With dropout cuDNN draws its own mask, so the check reads the
// mask back: with V the identity, out is the dropped-out probability matrix itself, and every
// gradient is recomputed in double from it. And the layer: `attention.impl:
// auto` at 512 keys runs cuDNN and agrees with rotor's kernel. Skipped (one
// line) without a GPU of sm_80 or newer or without the cuDNN frontend.
//
// And the causal LM with packed documents (data.packing documents,
// nn::DocLayout) on the GPU: the regrouping runs through the CUDA
// index_select and every CUDA core takes the documents as rows of their own
// with key lengths. A packed batch's logits equal each document's alone on
// the GPU, and the CPU's packed logits (f32), for the attention impls auto,
// rotor (flash), reference and linear attention, with RoPE, ALiBi and
// learned positions; in bf16 within bf16's rounding; and the packed batch's
// gradients equal the sum over the documents alone. The CPU twin of these
// checks is tests/cpu/test_lm_packing.cpp. Likewise variable-length
// translation batches (pairs end to end; cross-attention with two layouts)
// against each pair alone and the CPU (twin: test_translation_packing.cpp),
// and classifier examples packed into rows, single-label and multiple choice
// (each example's pairs as documents), against one a row and the CPU (twins:
// test_mlm_packing.cpp's ClassifierPacking, test_multiple_choice.cpp).
// The dense-bias encodings on CUDA: TUPE's classifier step, Transformer-XL's
// terms (the op and the translation model) and DeBERTa's (the op and the
// classifier) against the CPU.
// (They share this program with
// the cuDNN layer test: one more program of the model stack would put the
// GPU archive over check_pack.sh's limit.) Skipped without a GPU.
#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cuda_context.h"
#include "core/deberta_bias.h"
#include "data/classification.h"
#include "models/bert.h"
#include "models/bert_classifier.h"
#include "models/decoder_lm.h"
#include "models/transformer.h"
#include "nn/attention.h"
#include "nn/position.h"
#include "ops/attention.h"
#include "ops/cudnn_attention.h"
#include "ops/deberta_bias.h"
#include "ops/flash_attention.h"
#include "ops/xl_bias.h"
#include "support/classifier_step.h"
#include "support/model_gradcheck.h"
#include "support/op_case.h"
#include "support/packed_lm.h"
#include "support/test_util.h"
#include "tasks/classifier/outputs.h"
#include "tasks/translation/data.h"

namespace rotor {
namespace {

using ops::AttentionOptions;
using test::random_floats;

const Device kGpu = Device::cuda(0);

#define ROTOR_REQUIRE_CUDNN_ATTENTION()                                                     \
  do {                                                                                      \
    ROTOR_REQUIRE_GPU();                                                                    \
    const ops::CudnnCapability cap = ops::cudnn_capability(kGpu);                           \
    if (!cap.built) GTEST_SKIP() << "rotor built without the cuDNN frontend: test skipped"; \
    if (cap.sm < 80) GTEST_SKIP() << "cuDNN attention needs sm_80+, GPU is sm_" << cap.sm;  \
  } while (0)

// ---------------------------------------------------------------------- dropout

// Host arrays of a [B, H, T, D] tensor.
std::vector<double> host(const Tensor& t) {
  const auto f = t.to_floats();
  return {f.begin(), f.end()};
}

// With V = the identity (Tk == D), out[b, h, i, j] = P_ij M_ij / (1 - p):
// cuDNN's dropped-out probabilities. The test checks that the kept entries
// are P / (1 - p) of the CPU's P, that about p of them are dropped, that the
// same (seed, stream) gives the same mask and another stream another, and
// that the backward used that very mask (dq, dk, dv recomputed in double).
TEST(CudnnAttention, DropoutMaskIsConsistentBetweenForwardAndBackward) {
  ROTOR_REQUIRE_CUDNN_ATTENTION();
  const int64_t B = 2, H = 2, T = 64, D = 64;
  const float p = 0.2f;
  const Shape s{B, H, T, D};
  const std::vector<int32_t> lens{64, 40};
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const double unit = dt == DType::F16 ? 9.8e-4 : 7.8e-3;
    const auto qv = random_floats(shape_numel(s), 1, -0.5f, 0.5f);
    const auto kv = random_floats(shape_numel(s), 2, -0.5f, 0.5f);
    const auto dov = random_floats(shape_numel(s), 3);
    std::vector<float> eye(static_cast<size_t>(shape_numel(s)), 0.0f);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t j = 0; j < T; ++j) eye[(bh * T + j) * D + j] = 1.0f;
    const Tensor q = Tensor::from_floats(qv, s, dt, kGpu), k = Tensor::from_floats(kv, s, dt, kGpu);
    const Tensor v = Tensor::from_floats(eye, s, dt, kGpu),
                 dout = Tensor::from_floats(dov, s, dt, kGpu);
    AttentionOptions o;
    o.scale = 0.125f;
    o.key_lengths = Tensor::from_ints(lens, {B}, kGpu);
    o.dropout = p;
    o.seed = 77;
    o.stream = rng_stream(3, 1, RngPurpose::AttentionDropout, 0);
    Tensor y = Tensor::zeros(s, dt, kGpu), lse = Tensor::zeros({B, H, T}, DType::F32, kGpu);
    ops::cudnn_attention_forward(q, k, v, o, y, lse);
    Tensor dq = Tensor::zeros(s, dt, kGpu), dk = Tensor::zeros(s, dt, kGpu),
           dv = Tensor::zeros(s, dt, kGpu);
    ops::cudnn_attention_backward(q, k, v, y, lse, dout, o, dq, dk, dv);
    const auto pd = host(y);  // [B, H, T, T]: P o M / (1 - p)

    Tensor again = Tensor::zeros(s, dt, kGpu), other = Tensor::zeros(s, dt, kGpu);
    ops::cudnn_attention_forward(q, k, v, o, again, lse);
    EXPECT_EQ(again.to_floats(), y.to_floats()) << "same seed and stream, another mask";
    AttentionOptions o2 = o;
    o2.stream = rng_stream(3, 2, RngPurpose::AttentionDropout, 0);
    ops::cudnn_attention_forward(q, k, v, o2, other, lse);
    EXPECT_NE(other.to_floats(), y.to_floats()) << "another stream, the same mask";

    // P in double from the rounded inputs; the mask from cuDNN's output.
    const auto qh = host(q), kh = host(k), doh = host(dout);
    std::vector<double> P(pd.size(), 0.0), M(pd.size(), 0.0);
    int64_t kept = 0, visible = 0;
    double worst_kept = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t row = ((b * H + h) * T + i) * T;
          std::vector<double> sc(T);
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < lens[b]; ++j) {
            double d = 0;
            for (int64_t x = 0; x < D; ++x)
              d += qh[((b * H + h) * T + i) * D + x] * kh[((b * H + h) * T + j) * D + x];
            sc[j] = d * o.scale;
            mx = std::max(mx, sc[j]);
          }
          for (int64_t j = 0; j < lens[b]; ++j) sum += std::exp(sc[j] - mx);
          for (int64_t j = 0; j < T; ++j) {
            if (j >= lens[b]) {
              EXPECT_EQ(pd[row + j], 0.0) << "a padded key got weight";
              continue;
            }
            P[row + j] = std::exp(sc[j] - mx) / sum;
            ++visible;
            if (pd[row + j] != 0.0) {
              M[row + j] = 1.0;
              ++kept;
              worst_kept = std::max(worst_kept, std::abs(pd[row + j] * (1 - p) / P[row + j] - 1));
            }
          }
        }
    EXPECT_NEAR(1.0 - double(kept) / double(visible), p, 0.03) << "fraction dropped";
    EXPECT_LE(worst_kept, 4 * unit) << "kept entries are P / (1 - p)";

    // The gradients of out = (P o M / (1 - p)) V with that mask, in double.
    std::vector<double> gq(qh.size(), 0.0), gk(qh.size(), 0.0), gv(qh.size(), 0.0);
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < T; ++i) {
        const int64_t row = (bh * T + i) * T;
        std::vector<double> dp(T);
        double delta = 0;
        for (int64_t j = 0; j < T; ++j) {
          const double w = P[row + j] * M[row + j] / (1 - p);
          double dpd = 0;  // dO_i . V_j = dO[i, j] (V the identity)
          dpd = doh[(bh * T + i) * D + j];
          for (int64_t x = 0; x < D; ++x) gv[(bh * T + j) * D + x] += w * doh[(bh * T + i) * D + x];
          dp[j] = dpd * M[row + j] / (1 - p);
          delta += P[row + j] * dp[j];
        }
        for (int64_t j = 0; j < T; ++j) {
          const double ds = P[row + j] * (dp[j] - delta) * o.scale;
          if (ds == 0.0) continue;
          for (int64_t x = 0; x < D; ++x) {
            gq[(bh * T + i) * D + x] += ds * kh[(bh * T + j) * D + x];
            gk[(bh * T + j) * D + x] += ds * qh[(bh * T + i) * D + x];
          }
        }
      }
    auto rel = [](const std::vector<double>& got, const std::vector<double>& want) {
      double scale = 0, err = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, std::abs(want[i]));
        err = std::max(err, std::abs(got[i] - want[i]));
      }
      return err / std::max(scale, 1e-30);
    };
    EXPECT_LE(rel(host(dv), gv), 8 * unit) << "dv";
    EXPECT_LE(rel(host(dq), gq), 8 * unit) << "dq";
    EXPECT_LE(rel(host(dk), gk), 8 * unit) << "dk";
  }
}

// ------------------------------------------------------------------------ layer

// A RoFormer self-attention layer at 512 keys in bf16: `auto` runs cuDNN, and
// its output and gradients agree with `rotor` (the flash kernel) within the
// rounding of bf16.
TEST(CudnnAttention, LayerAutoRunsCudnnAndAgreesWithRotor) {
  ROTOR_REQUIRE_CUDNN_ATTENTION();
  const int64_t B = 2, T = 512, d = 256;
  const Tensor x = Tensor::from_floats(random_floats(B * T * d, 5), {B, T, d}, DType::BF16, kGpu);
  const Tensor dy = Tensor::from_floats(random_floats(B * T * d, 6), {B, T, d}, DType::BF16, kGpu);
  const Tensor lengths = Tensor::from_ints({512, 300}, {B}, kGpu);
  struct Result {
    std::vector<float> y, dx, grads;
  };
  auto run = [&](nn::AttentionImpl impl) {
    nn::ParameterStore store;
    nn::MultiHeadAttentionOptions cfg;
    cfg.d_model = d;
    cfg.n_heads = 4;
    cfg.rope = true;
    cfg.impl = impl;
    nn::MultiHeadAttention attn(store, {"q", "k", "v", "o"}, cfg, false);
    store.allocate(kGpu);
    store.initialize(5);
    store.set_compute_dtype(DType::BF16);
    store.zero_grad();
    nn::Context ctx;
    ctx.device = kGpu;
    ctx.dtype = DType::BF16;
    Tensor y = attn.forward(x, Tensor(), lengths, ctx);
    Tensor dx = attn.backward(dy, nullptr);
    return Result{y.to_floats(), dx.to_floats(), store.grads().to_floats()};
  };
  const Result cudnn = run(nn::AttentionImpl::Cudnn);
  const Result autop = run(nn::AttentionImpl::Auto);
  const Result rotor = run(nn::AttentionImpl::Rotor);
  EXPECT_EQ(autop.y, cudnn.y) << "auto at 512 keys should run cuDNN";
  EXPECT_LT(test::max_rel_error(cudnn.y, rotor.y), 0.03);
  EXPECT_LT(test::max_rel_error(cudnn.dx, rotor.dx), 0.03);
  EXPECT_LT(test::max_rel_error(cudnn.grads, rotor.grads), 0.03);
}

// Where cuDNN is built but cannot start (cudnnCreate fails: a machine whose
// cuDNN is broken, or the emulated device with ROTOR_EMU_CUDNN=off), the
// plan refuses cuDNN with the reason, as for any case it cannot serve, and
// attention.impl auto runs rotor's kernels: the same outputs, bit for bit,
// as attention.impl rotor (so too for any other refusal). Skipped where
// cuDNN serves the case (the test above).
TEST(CudnnCannotStart, AutoRunsRotorsKernelsAndSaysWhy) {
  ROTOR_REQUIRE_CUDNN_ATTENTION();
  const int64_t B = 1, H = 2, T = 256, D = 64;
  const Tensor q = Tensor::from_floats(random_floats(B * H * T * D, 7), {B, H, T, D}, DType::BF16,
                                       kGpu);  // [B, H, T, D]
  ops::AttentionOptions o;
  o.scale = 0.125f;
  std::string why;
  if (ops::cudnn_attention_supported(q, q, o, &why)) GTEST_SKIP() << "cuDNN starts here";
  SCOPED_TRACE(why);  // on the emulated device: "cuDNN cannot start here: cudnnCreate ..."
  const int64_t d = H * D;
  const Tensor x = Tensor::from_floats(random_floats(B * T * d, 8), {B, T, d}, DType::BF16, kGpu);
  auto run = [&](nn::AttentionImpl impl) {
    nn::ParameterStore store;
    nn::MultiHeadAttentionOptions cfg;
    cfg.d_model = d;
    cfg.n_heads = H;
    cfg.impl = impl;
    nn::MultiHeadAttention attn(store, {"q", "k", "v", "o"}, cfg, false);
    store.allocate(kGpu);
    store.initialize(5);
    store.set_compute_dtype(DType::BF16);
    nn::Context ctx;
    ctx.device = kGpu;
    ctx.dtype = DType::BF16;
    return attn.forward(x, Tensor(), Tensor(), ctx).to_floats();
  };
  EXPECT_EQ(run(nn::AttentionImpl::Auto), run(nn::AttentionImpl::Rotor));
}

// Validation and inference run in f32 under every precision, which cuDNN does
// not compute: there `attention.impl: cudnn` takes auto's core (the same
// outputs, bit for bit), where it used to stop a bf16 run at its first
// validation. A training forward in f32 is still refused.
TEST(CudnnAttention, ImplCudnnOutsideTrainingInF32RunsAutosCore) {
  ROTOR_REQUIRE_CUDNN_ATTENTION();
  const int64_t B = 2, T = 256, d = 128;
  const Tensor x = Tensor::from_floats(random_floats(B * T * d, 9), {B, T, d}, DType::F32, kGpu);
  const Tensor lengths = Tensor::from_ints({256, 100}, {B}, kGpu);
  auto run = [&](nn::AttentionImpl impl, bool training) {
    nn::ParameterStore store;
    nn::MultiHeadAttentionOptions cfg;
    cfg.d_model = d;
    cfg.n_heads = 2;
    cfg.rope = true;
    cfg.impl = impl;
    nn::MultiHeadAttention attn(store, {"q", "k", "v", "o"}, cfg, false);
    store.allocate(kGpu);
    store.initialize(5);
    nn::Context ctx;
    ctx.device = kGpu;
    ctx.training = training;
    return attn.forward(x, Tensor(), lengths, ctx).to_floats();
  };
  EXPECT_EQ(run(nn::AttentionImpl::Cudnn, false), run(nn::AttentionImpl::Auto, false));
  EXPECT_THROW(run(nn::AttentionImpl::Cudnn, true), Error);
}

// ------------------------------------------------------------ packed documents

namespace packing {

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

using test::max_diff;

// The packing tests' parameters: allocated on `device`, drawn with seed 4,
// jittered, computed in `dtype`; ctx set to match.
void prepare(nn::ParameterStore& store, nn::Context& ctx, Device device, DType dtype) {
  store.allocate(device);
  store.initialize(4);
  test::jitter(store, 5, 0.1f);
  if (dtype != DType::F32) store.set_compute_dtype(dtype);
  ctx.device = device;
  ctx.dtype = dtype;
}

struct Model {
  nn::ParameterStore store;
  std::unique_ptr<models::DecoderLM> lm;
  nn::Context ctx;
  Model(nn::PositionKind position, const Core& core, Device device, DType dtype) {
    lm = std::make_unique<models::DecoderLM>(tiny_lm(position, core), store);
    prepare(store, ctx, device, dtype);
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
  const test::PackedDocs pk;
  const std::vector<float> packed =
      gpu.lm->forward_logits(pk.batch(kGpu), gpu.ctx).to(Device::cpu()).to_floats();
  for (size_t i = 0; i < pk.docs.size(); ++i) {
    const std::vector<float> alone =
        gpu.lm->forward_logits(pk.alone(i, kGpu), gpu.ctx).to(Device::cpu()).to_floats();
    const size_t off = pk.logit_offset(i);
    const std::vector<float> part(packed.begin() + static_cast<int64_t>(off),
                                  packed.begin() + static_cast<int64_t>(off + alone.size()));
    EXPECT_LT(max_diff(part, alone), tol) << "document " << i;
  }
  if (f32) {  // the CPU's packed logits, same weights
    Model cpu(p.position, p.core, Device::cpu(), DType::F32);
    const std::vector<float> host =
        cpu.lm->forward_logits(pk.batch(Device::cpu()), cpu.ctx).to_floats();
    for (int64_t b = 0; b < test::PackedDocs::B; ++b)
      for (int64_t t = 0; t < test::PackedDocs::T; ++t) {
        if (b == 1 && t >= 5) continue;  // padding: no document
        for (int64_t v = 0; v < kVocab; ++v) {
          const size_t j = static_cast<size_t>((b * test::PackedDocs::T + t) * kVocab + v);
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

// Variable-length translation (data.packing documents): the batch's pairs
// end to end, one row per side, against each pair alone on the GPU --
// logits and gradients -- and the fp32 logits against the CPU's, through
// the encoder's and the decoder's self-attention and the cross-attention's
// two layouts.
struct Translator {
  nn::ParameterStore store;
  std::unique_ptr<models::EncoderDecoder> model;
  nn::Context ctx;
  Translator(nn::PositionKind position, const Core& core, Device device, DType dtype) {
    models::TransformerOptions o;
    o.vocab_size = kVocab;
    o.encoder_layers = o.decoder_layers = 2;
    o.layer = tiny_lm(position, core).layer;
    o.position = position;
    o.max_positions = 16;
    model = std::make_unique<models::EncoderDecoder>(o, store);
    prepare(store, ctx, device, dtype);
  }
};

class TranslationVarlenCuda : public ::testing::TestWithParam<Param> {};

TEST_P(TranslationVarlenCuda, VariableLengthEqualsPairsAloneAndTheCpu) {
  ROTOR_REQUIRE_GPU();
  const Param& p = GetParam();
  const bool f32 = p.dtype == DType::F32;
  const double tol = f32 ? 2e-4 : 0.1;
  Translator gpu(p.position, p.core, kGpu, p.dtype);
  const test::TranslationPairs pairs;
  const models::TranslationBatch varlen = tasks::to_model_batch(pairs.all(), kGpu, true);
  const std::vector<float> all =
      gpu.model->forward_logits(varlen, gpu.ctx).to(Device::cpu()).to_floats();
  for (size_t i = 0; i < pairs.src.size(); ++i) {
    const std::vector<float> alone =
        gpu.model->forward_logits(tasks::to_model_batch(pairs.batch({i}), kGpu), gpu.ctx)
            .to(Device::cpu())
            .to_floats();
    const size_t off = pairs.offset(i);
    const std::vector<float> part(all.begin() + static_cast<int64_t>(off),
                                  all.begin() + static_cast<int64_t>(off + alone.size()));
    EXPECT_LT(max_diff(part, alone), tol) << "pair " << i;
  }
  if (f32) {
    Translator cpu(p.position, p.core, Device::cpu(), DType::F32);
    const std::vector<float> host =
        cpu.model->forward_logits(tasks::to_model_batch(pairs.all(), Device::cpu(), true), cpu.ctx)
            .to_floats();
    EXPECT_LT(max_diff(all, host), tol) << "against the CPU";
  }
  nn::Context train = gpu.ctx;
  train.training = true;
  gpu.store.zero_grad();
  gpu.model->forward_loss(varlen, 0.1f, train);
  gpu.model->backward(1.0f);
  const std::vector<float> g_varlen = gpu.store.grads().to(Device::cpu()).to_floats();
  gpu.store.zero_grad();
  for (size_t i = 0; i < pairs.src.size(); ++i) {
    gpu.model->forward_loss(tasks::to_model_batch(pairs.batch({i}), kGpu), 0.1f, train);
    gpu.model->backward(1.0f);
  }
  const std::vector<float> g_alone = gpu.store.grads().to(Device::cpu()).to_floats();
  double scale = 0;
  for (float g : g_alone) scale = std::max(scale, std::abs(double(g)));
  EXPECT_LT(max_diff(g_varlen, g_alone), (f32 ? 1e-4 : 0.05) * std::max(scale, 1.0));
}

INSTANTIATE_TEST_SUITE_P(Cores, TranslationVarlenCuda, ::testing::ValuesIn(params()),
                         [](const auto& info) { return info.param.name; });

// Classifier examples packed into rows (data.packing documents), single-label
// and multiple choice (each example's pairs as documents), against one
// example (one pair) a row on the GPU -- scores, loss and gradients -- and
// the fp32 scores against the CPU's packed ones, through the BERT encoder's
// regrouping and the head's [CLS] gather.
data::ClassificationSet classifier_set(int64_t choices) {
  data::ClassificationSet set;
  set.has_labels = true;
  set.num_labels = 3;
  set.choices = choices;
  auto pair = [](int i, int k, std::vector<int32_t>& ids, std::vector<int32_t>& types) {
    const int a = 1 + (i + k) % 4, b = (i * 5 + k) % 3;
    ids = {5};
    for (int t = 0; t < a; ++t) ids.push_back(7 + (i * 3 + k * 11 + t * 5) % 30);
    ids.push_back(6);
    types.assign(ids.size(), 0);
    for (int t = 0; t < b; ++t) {
      ids.push_back(7 + (i * 7 + k * 13 + t * 3) % 30);
      types.push_back(1);
    }
    ids.push_back(6);
    types.push_back(1);
  };
  for (int i = 0; i < 6; ++i) {
    data::ClassificationExample ex;
    ex.label = i % 3;
    if (choices == 0) {
      pair(i, 0, ex.ids, ex.types);
    } else {
      ex.choice_ids.resize(static_cast<size_t>(choices));
      ex.choice_types.resize(static_cast<size_t>(choices));
      for (int64_t k = 0; k < choices; ++k)
        pair(i, static_cast<int>(k), ex.choice_ids[static_cast<size_t>(k)],
             ex.choice_types[static_cast<size_t>(k)]);
    }
    set.examples.push_back(ex);
  }
  return set;
}

struct Classifier {
  nn::ParameterStore store;
  std::unique_ptr<models::BertForSequenceClassification> model;
  nn::Context ctx;
  Classifier(nn::PositionKind position, const Core& core, int64_t choices, Device device,
             DType dtype, bool label_attention = false) {
    models::BertClassifierOptions o;
    o.encoder.vocab_size = kVocab;
    o.encoder.num_layers = 2;
    o.encoder.layer.d_model = 128;
    o.encoder.layer.n_heads = 2;  // D = 64
    o.encoder.layer.d_ff = 256;
    o.encoder.layer.dropout = o.encoder.layer.attention_dropout = 0.0f;
    o.encoder.layer.impl = core.impl;
    o.encoder.layer.attention_kind = core.kind;
    o.encoder.position = position;
    o.encoder.max_positions = 16;
    o.num_labels = choices > 0 ? 1 : 3;
    o.choices = choices;
    o.dropout = 0.0f;
    o.label_attention = label_attention;
    model = std::make_unique<models::BertForSequenceClassification>(o, store);
    prepare(store, ctx, device, dtype);
  }
};

class ClassifierPackingCuda : public ::testing::TestWithParam<Param> {};

TEST_P(ClassifierPackingCuda, PackedExamplesEqualOneARowAndTheCpu) {
  ROTOR_REQUIRE_GPU();
  const Param& p = GetParam();
  const bool f32 = p.dtype == DType::F32;
  const double tol = f32 ? 2e-4 : 0.1;
  for (const int64_t choices : {0, 3}) {
    SCOPED_TRACE(choices ? "multiple choice" : "single label");
    Classifier gpu(p.position, p.core, choices, kGpu, p.dtype);
    const data::ClassificationSet set = classifier_set(choices);
    const std::vector<int64_t> ids{4, 0, 5, 2, 1, 3};
    const data::ClassificationHostBatch packed =
        data::make_classification_batch(set, ids, false, 16);
    const data::ClassificationHostBatch rows = data::make_classification_batch(set, ids, false);
    ASSERT_LT(packed.input_ids.size(0), rows.input_ids.size(0));
    nn::Context train = gpu.ctx;
    train.training = true;
    const test::ClassifierStep a = test::classifier_step(*gpu.model, gpu.store, packed, train),
                               b = test::classifier_step(*gpu.model, gpu.store, rows, train);
    ASSERT_EQ(a.scores.size(), static_cast<size_t>(6 * 3));
    EXPECT_LT(max_diff(a.scores, b.scores), tol) << "scores";
    EXPECT_NEAR(a.sums.loss, b.sums.loss,
                (f32 ? 1e-4 : 0.05) * std::max(1.0, std::abs(b.sums.loss)));
    double scale = 0;
    for (float g : b.grads) scale = std::max(scale, std::abs(double(g)));
    EXPECT_LT(max_diff(a.grads, b.grads), (f32 ? 1e-4 : 0.05) * std::max(scale, 1.0));
    if (f32) {  // the CPU's packed scores, same weights
      Classifier cpu(p.position, p.core, choices, Device::cpu(), DType::F32);
      std::vector<float> host;
      cpu.model->forward_loss(tasks::to_model_batch(packed, Device::cpu()), cpu.ctx, &host);
      EXPECT_LT(max_diff(a.scores, host), tol) << "scores against the CPU";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cores, ClassifierPackingCuda, ::testing::ValuesIn(params()),
                         [](const auto& info) { return info.param.name; });

// The label-attention head (model.classifier_head label_attention) on a GPU:
// its gathers, the CUDA materialized core with key lengths, the element-wise
// products and the GEMMs against ones. One training step, packed examples
// against one a row, in fp32 and bf16; the fp32 scores, loss and every
// gradient against the CPU's.
TEST(LabelAttentionCuda, StepEqualsTheCpuAndPackingChangesNothing) {
  ROTOR_REQUIRE_GPU();
  const Core core{"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax};
  const data::ClassificationSet set = classifier_set(0);
  const std::vector<int64_t> ids{4, 0, 5, 2, 1, 3};
  const data::ClassificationHostBatch packed = data::make_classification_batch(set, ids, false, 16);
  const data::ClassificationHostBatch rows = data::make_classification_batch(set, ids, false);
  for (const DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const bool f32 = dtype == DType::F32;
    Classifier gpu(nn::PositionKind::Rope, core, 0, kGpu, dtype, true);
    nn::Context train = gpu.ctx;
    train.training = true;
    const test::ClassifierStep a = test::classifier_step(*gpu.model, gpu.store, packed, train),
                               b = test::classifier_step(*gpu.model, gpu.store, rows, train);
    ASSERT_EQ(a.scores.size(), static_cast<size_t>(6 * 3));
    EXPECT_LT(max_diff(a.scores, b.scores), f32 ? 2e-4 : 0.1) << "scores";
    double scale = 0;
    for (float g : b.grads) scale = std::max(scale, std::abs(double(g)));
    EXPECT_LT(max_diff(a.grads, b.grads), (f32 ? 1e-4 : 0.05) * std::max(scale, 1.0));
    if (!f32) continue;
    Classifier cpu(nn::PositionKind::Rope, core, 0, Device::cpu(), DType::F32, true);
    nn::Context cpu_train = cpu.ctx;
    cpu_train.training = true;
    const test::ClassifierStep c = test::classifier_step(*cpu.model, cpu.store, rows, cpu_train);
    EXPECT_LT(max_diff(b.scores, c.scores), 2e-4) << "scores against the CPU";
    EXPECT_NEAR(b.sums.loss, c.sums.loss, 1e-4 * std::max(1.0, std::abs(c.sums.loss)));
    EXPECT_LT(max_diff(b.grads, c.grads), 1e-4 * std::max(scale, 1.0)) << "against the CPU";
  }
}

// One training step of the LM `o` on packed documents: fp32 on the GPU
// against the CPU (logits, every gradient), and bf16 on the GPU against the
// CPU's fp32.
void expect_lm_step_equals_the_cpu(const models::DecoderLmOptions& o) {
  const test::PackedDocs pk;
  auto step = [&](Device device, DType dtype, std::vector<float>* logits) {
    nn::ParameterStore store;
    models::DecoderLM lm(o, store);
    nn::Context ctx;
    prepare(store, ctx, device, dtype);
    *logits = lm.forward_logits(pk.batch(device), ctx).to(Device::cpu()).to_floats();
    ctx.training = true;
    store.zero_grad();
    const models::LmSums sums = lm.forward_loss(pk.batch(device), ctx);
    lm.backward(1.0f);
    EXPECT_TRUE(std::isfinite(sums.loss));
    return store.grads().to(Device::cpu()).to_floats();
  };
  std::vector<float> gpu_logits, cpu_logits, bf16_logits;
  const std::vector<float> g_gpu = step(kGpu, DType::F32, &gpu_logits);
  const std::vector<float> g_cpu = step(Device::cpu(), DType::F32, &cpu_logits);
  const std::vector<float> g_bf16 = step(kGpu, DType::BF16, &bf16_logits);
  double scale = 0;
  for (float g : g_cpu) scale = std::max(scale, std::abs(double(g)));
  EXPECT_LT(max_diff(gpu_logits, cpu_logits), 2e-4) << "logits";
  EXPECT_LT(max_diff(g_gpu, g_cpu), 1e-4 * std::max(scale, 1.0)) << "gradients";
  EXPECT_LT(max_diff(bf16_logits, cpu_logits), 0.1) << "bf16 logits";
  EXPECT_LT(max_diff(g_bf16, g_cpu), 0.05 * std::max(scale, 1.0)) << "bf16 gradients";
}

// RMSNorm (model.norm_type rms_norm) on a GPU: a pre-LN LM with every norm
// RMSNorm.
TEST(RmsNormCuda, LmStepEqualsTheCpu) {
  ROTOR_REQUIRE_GPU();
  const Core core{"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax};
  models::DecoderLmOptions o = tiny_lm(nn::PositionKind::Rope, core);
  o.layer.post_norm = false;
  o.layer.rms_norm = true;
  expect_lm_step_equals_the_cpu(o);
}

// Llama's layer on a GPU: RMSNorm, SwiGLU (the GEMM of gate and value, the
// GLU kernels), no biases, and grouped key/value heads (the shared rows
// gathered and their gradients added back by the embedding kernels).
TEST(LlamaCuda, LmStepEqualsTheCpu) {
  ROTOR_REQUIRE_GPU();
  const Core core{"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax};
  models::DecoderLmOptions o = tiny_lm(nn::PositionKind::Rope, core);
  o.layer.post_norm = false;
  o.layer.rms_norm = true;
  o.layer.activation = ops::Activation::SiLU;
  o.layer.gated_ffn = true;
  o.layer.bias = false;
  o.layer.kv_heads = o.layer.n_heads / 2;
  expect_lm_step_equals_the_cpu(o);
}

// TUPE's correlation on a GPU: the correlation, its untied [CLS] and their
// backward run on the device (nn/tupe.cpp, ops/tupe_cls.h) and the CUDA
// materialized core adds it as a dense bias (ops::AttentionOptions::
// score_bias). One training step of the classifier, one example a row, in
// fp32: the scores, the loss and every gradient equal the CPU's.
TEST(TupeCuda, ClassifierStepEqualsTheCpu) {
  ROTOR_REQUIRE_GPU();
  const Core core{"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax};
  const nn::PositionKind tupe = *nn::position_kind("tupe");
  Classifier gpu(tupe, core, 0, kGpu, DType::F32), cpu(tupe, core, 0, Device::cpu(), DType::F32);
  const data::ClassificationSet set = classifier_set(0);
  const data::ClassificationHostBatch rows =
      data::make_classification_batch(set, {4, 0, 5, 2, 1, 3}, false);
  nn::Context on_gpu = gpu.ctx, on_cpu = cpu.ctx;
  on_gpu.training = on_cpu.training = true;
  const test::ClassifierStep a = test::classifier_step(*gpu.model, gpu.store, rows, on_gpu),
                             b = test::classifier_step(*cpu.model, cpu.store, rows, on_cpu);
  EXPECT_LT(max_diff(a.scores, b.scores), 2e-4) << "scores";
  EXPECT_NEAR(a.sums.loss, b.sums.loss, 1e-4 * std::max(1.0, std::abs(b.sums.loss)));
  double scale = 0;
  for (float g : b.grads) scale = std::max(scale, std::abs(double(g)));
  ASSERT_EQ(a.grads.size(), b.grads.size());
  EXPECT_LT(max_diff(a.grads, b.grads), 1e-4 * std::max(scale, 1.0)) << "gradients";
}

// The masked LM's training step on a GPU counts its hits (the masked tokens
// whose first largest logit is the original id) as the CPU does, without
// the [M, V] logits leaving the device; it used to count none in training.
TEST(MlmCuda, TrainingStepCountsTheCpusHits) {
  ROTOR_REQUIRE_GPU();
  models::BertOptions o;
  o.vocab_size = 40;
  o.num_layers = 2;
  o.layer = models::bert_base_layer();
  o.layer.d_model = 64;
  o.layer.n_heads = 2;
  o.layer.d_ff = 128;
  o.layer.dropout = o.layer.attention_dropout = 0.0f;
  o.position = *nn::position_kind("rope");
  o.max_positions = 16;
  o.init_std = 0.3;
  struct Side {
    nn::ParameterStore store;
    std::unique_ptr<models::BertForMaskedLM> model;
    nn::Context ctx;
  };
  auto make = [&](Device dev) {
    auto s = std::make_unique<Side>();
    s->model = std::make_unique<models::BertForMaskedLM>(o, s->store);
    s->store.allocate(dev);
    s->store.initialize(4);
    s->ctx.device = dev;
    return s;
  };
  const auto cpu = make(Device::cpu()), gpu = make(kGpu);
  models::MlmBatch b;
  const int64_t B = 2, T = 7, V = o.vocab_size;
  b.input_ids = Tensor::from_ints({5, 12, 4, 30, 17, 4, 6, 5, 22, 4, 9, 6, 0, 0}, {B, T});
  b.lengths = Tensor::from_ints({7, 5}, {B});
  const std::vector<int32_t> at = {2, 3, 5, 8, 9, 10};
  b.masked_positions = Tensor::from_ints(at, {6});
  b.tokens = 12;
  b.masked_tokens = 6;
  // Half the targets are the CPU's own predictions, half another id.
  const std::vector<float> lg =
      cpu->model->forward_logits(b.input_ids, Tensor(), b.lengths, cpu->ctx).to_floats();
  std::vector<int32_t> targets;
  for (size_t i = 0; i < at.size(); ++i) {
    const float* row = lg.data() + at[i] * V;
    const int32_t best = static_cast<int32_t>(std::max_element(row, row + V) - row);
    targets.push_back(i % 2 ? (best + 1) % static_cast<int32_t>(V) : best);
  }
  b.masked_targets = Tensor::from_ints(targets, {6});
  cpu->ctx.training = gpu->ctx.training = true;
  const models::MlmSums c = cpu->model->forward_loss(b, cpu->ctx);
  const models::MlmSums g = gpu->model->forward_loss(b.to(kGpu), gpu->ctx);
  EXPECT_TRUE(c.has_correct);
  EXPECT_TRUE(g.has_correct);
  EXPECT_EQ(c.correct, 3);
  EXPECT_EQ(g.correct, c.correct);
  EXPECT_NEAR(g.loss, c.loss, 1e-4 * std::max(1.0, std::abs(c.loss)));
}

// Transformer-XL's terms on a GPU: ops::xl_bias_forward and backward (the
// cuBLASLt products and kernels/xl_shift.cu's relative shift) against the
// CPU's, with a query offset as in decoding; then the translation model
// (the encoder's and the decoder's self-attention carry the terms) in fp32:
// logits and one step's gradients equal the CPU's.
TEST(XlCuda, TermsAndTranslationStepEqualTheCpu) {
  ROTOR_REQUIRE_GPU();
  const int64_t B = 2, H = 3, Tq = 5, Tk = 7, D = 8, off = 2, L = off + Tq + Tk - 1;
  const float scale = 0.35f;
  const Tensor q = test::random_tensor({B, H, Tq, D}, 11);       // [B, H, Tq, D]
  const Tensor k = test::random_tensor({B, H, Tk, D}, 12);       // [B, H, Tk, D]
  const Tensor r = test::random_tensor({L, H * D}, 13);          // [L, H D]
  const Tensor u = test::random_tensor({H, D}, 14);              // [H, D]
  const Tensor v = test::random_tensor({H, D}, 15);              // [H, D]
  const Tensor dbias = test::random_tensor({B, H, Tq, Tk}, 16);  // [B, H, Tq, Tk]
  struct Out {
    std::vector<float> bias, dq, dk, dr, du, dv;
  };
  auto run = [&](Device dev) {
    Tensor bias = Tensor::empty({B, H, Tq, Tk}, DType::F32, dev);  // [B, H, Tq, Tk]
    const Tensor qd = q.to(dev), kd = k.to(dev), rd = r.to(dev), ud = u.to(dev), vd = v.to(dev);
    ops::xl_bias_forward(qd, kd, rd, ud, vd, scale, off, bias);
    // Added into: copies, not q.to(dev) (on the CPU that is q itself, and the
    // op would read the inputs it is adding into).
    Tensor dq = q.clone().to(dev), dk = k.clone().to(dev), du = u.clone().to(dev),
           dv = v.clone().to(dev);
    Tensor dr = Tensor::empty({L, H * D}, DType::F32, dev);  // [L, H D]
    ops::xl_bias_backward(qd, kd, rd, ud, vd, scale, off, dbias.to(dev), dq, dk, dr, du, dv);
    auto host = [](const Tensor& t) { return t.to(Device::cpu()).to_floats(); };
    return Out{host(bias), host(dq), host(dk), host(dr), host(du), host(dv)};
  };
  const Out a = run(kGpu), b = run(Device::cpu());
  EXPECT_LT(max_diff(a.bias, b.bias), 1e-4) << "bias";
  EXPECT_LT(max_diff(a.dq, b.dq), 1e-4) << "dq";
  EXPECT_LT(max_diff(a.dk, b.dk), 1e-4) << "dk";
  EXPECT_LT(max_diff(a.dr, b.dr), 1e-4) << "dr";
  EXPECT_LT(max_diff(a.du, b.du), 1e-4) << "du";
  EXPECT_LT(max_diff(a.dv, b.dv), 1e-4) << "dv";

  const Core core{"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax};
  const nn::PositionKind xl = *nn::position_kind("transformer_xl");
  Translator gpu(xl, core, kGpu, DType::F32), cpu(xl, core, Device::cpu(), DType::F32);
  const test::TranslationPairs pairs;
  const std::vector<float> on_gpu =
      gpu.model->forward_logits(tasks::to_model_batch(pairs.all(), kGpu), gpu.ctx)
          .to(Device::cpu())
          .to_floats();
  const std::vector<float> on_cpu =
      cpu.model->forward_logits(tasks::to_model_batch(pairs.all(), Device::cpu()), cpu.ctx)
          .to_floats();
  EXPECT_LT(max_diff(on_gpu, on_cpu), 2e-4) << "logits";
  std::vector<float> grads[2];
  for (Translator* t : {&gpu, &cpu}) {
    nn::Context train = t->ctx;
    train.training = true;
    t->store.zero_grad();
    const Device dev = t == &gpu ? kGpu : Device::cpu();
    t->model->forward_loss(tasks::to_model_batch(pairs.all(), dev), 0.1f, train);
    t->model->backward(1.0f);
    grads[t == &gpu ? 0 : 1] = t->store.grads().to(Device::cpu()).to_floats();
  }
  double big = 0;
  for (float g : grads[1]) big = std::max(big, std::abs(double(g)));
  ASSERT_EQ(grads[0].size(), grads[1].size());
  EXPECT_LT(max_diff(grads[0], grads[1]), 1e-4 * std::max(big, 1.0)) << "gradients";
}

// DeBERTa's terms on a GPU: ops::deberta_bias_forward and backward (the
// cuBLASLt products and kernels/deberta_rows.cu's gather and scatter, with
// clamped rows that repeat) against the CPU's; then the classifier, whose
// layers project the shared relative rows on the device: one training
// step in fp32, the scores, the loss and every gradient equal the CPU's.
TEST(DebertaCuda, TermsAndClassifierStepEqualTheCpu) {
  ROTOR_REQUIRE_GPU();
  const int64_t B = 2, H = 3, T = 9, D = 8, span = 3, S = 2 * span;
  const float scale = 0.3f;
  const Tensor q = test::random_tensor({B, H, T, D}, 21);      // [B, H, T, D]
  const Tensor k = test::random_tensor({B, H, T, D}, 22);      // [B, H, T, D]
  const Tensor kr = test::random_tensor({S, H * D}, 23);       // [S, H D]
  const Tensor qr = test::random_tensor({S, H * D}, 24);       // [S, H D]
  const Tensor dbias = test::random_tensor({B, H, T, T}, 25);  // [B, H, T, T]
  const Tensor rows =                                          // i32 [T, T]
      Tensor::from_ints(deberta::relative_rows(T, T, 0, 0, span), {T, T});
  struct Out {
    std::vector<float> bias, dq, dk, dkr, dqr;
  };
  auto run = [&](Device dev) {
    Tensor bias = Tensor::empty({B, H, T, T}, DType::F32, dev);  // [B, H, T, T]
    const Tensor qd = q.to(dev), kd = k.to(dev), krd = kr.to(dev), qrd = qr.to(dev),
                 rd = rows.to(dev);
    ops::deberta_bias_forward(qd, kd, krd, qrd, rd, scale, bias);
    Tensor dq = q.clone().to(dev), dk = k.clone().to(dev);    // added into: copies, not q itself
    Tensor dkr = Tensor::empty({S, H * D}, DType::F32, dev);  // [S, H D]
    Tensor dqr = Tensor::empty({S, H * D}, DType::F32, dev);  // [S, H D]
    ops::deberta_bias_backward(qd, kd, krd, qrd, rd, scale, dbias.to(dev), dq, dk, dkr, dqr);
    auto host = [](const Tensor& t) { return t.to(Device::cpu()).to_floats(); };
    return Out{host(bias), host(dq), host(dk), host(dkr), host(dqr)};
  };
  const Out a = run(kGpu), b = run(Device::cpu());
  EXPECT_LT(max_diff(a.bias, b.bias), 1e-4) << "bias";
  EXPECT_LT(max_diff(a.dq, b.dq), 1e-4) << "dq";
  EXPECT_LT(max_diff(a.dk, b.dk), 1e-4) << "dk";
  EXPECT_LT(max_diff(a.dkr, b.dkr), 1e-4) << "dkr";
  EXPECT_LT(max_diff(a.dqr, b.dqr), 1e-4) << "dqr";

  const Core core{"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax};
  const nn::PositionKind deberta_kind = *nn::position_kind("deberta");
  Classifier gpu(deberta_kind, core, 0, kGpu, DType::F32),
      cpu(deberta_kind, core, 0, Device::cpu(), DType::F32);
  const data::ClassificationSet set = classifier_set(0);
  const data::ClassificationHostBatch batch =
      data::make_classification_batch(set, {4, 0, 5, 2, 1, 3}, false);
  nn::Context on_gpu = gpu.ctx, on_cpu = cpu.ctx;
  on_gpu.training = on_cpu.training = true;
  const test::ClassifierStep x = test::classifier_step(*gpu.model, gpu.store, batch, on_gpu),
                             y = test::classifier_step(*cpu.model, cpu.store, batch, on_cpu);
  EXPECT_LT(max_diff(x.scores, y.scores), 2e-4) << "scores";
  EXPECT_NEAR(x.sums.loss, y.sums.loss, 1e-4 * std::max(1.0, std::abs(y.sums.loss)));
  double big = 0;
  for (float g : y.grads) big = std::max(big, std::abs(double(g)));
  ASSERT_EQ(x.grads.size(), y.grads.size());
  EXPECT_LT(max_diff(x.grads, y.grads), 1e-4 * std::max(big, 1.0)) << "gradients";
}

// The dense-bias encodings in fp16 and bf16 on a GPU: the terms compute in
// f32 from f32 copies of q and k (nn/attention.cpp), the core is the 16-bit
// materialized one. One training step of the classifier tracks the same
// weights' fp32 step on the GPU within 16-bit tolerance (the CPU's 16-bit
// twin: tests/cpu/test_mixed_precision.cpp, DenseBiasEncodingsTrackFp32).
TEST(DenseBiasCuda, HalfPrecisionClassifierStepTracksFp32) {
  ROTOR_REQUIRE_GPU();
  const Core core{"auto", nn::AttentionImpl::Auto, nn::AttentionKind::Softmax};
  const data::ClassificationSet set = classifier_set(0);
  const data::ClassificationHostBatch batch =
      data::make_classification_batch(set, {4, 0, 5, 2, 1, 3}, false);
  for (const char* name : {"transformer_xl", "tupe", "deberta"})
    for (DType dt : {DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string(name) + " " + dtype_name(dt));
      const nn::PositionKind position = *nn::position_kind(name);
      Classifier half(position, core, 0, kGpu, dt), full(position, core, 0, kGpu, DType::F32);
      nn::Context a = half.ctx, b = full.ctx;
      a.training = b.training = true;
      const test::ClassifierStep x = test::classifier_step(*half.model, half.store, batch, a),
                                 y = test::classifier_step(*full.model, full.store, batch, b);
      EXPECT_LT(max_diff(x.scores, y.scores), 0.1) << "scores";
      EXPECT_NEAR(x.sums.loss, y.sums.loss, 0.05 * std::max(1.0, std::abs(y.sums.loss)));
      double big = 0;
      for (float g : y.grads) big = std::max(big, std::abs(double(g)));
      ASSERT_EQ(x.grads.size(), y.grads.size());
      EXPECT_LT(max_diff(x.grads, y.grads), 0.05 * std::max(big, 1.0)) << "gradients";
    }
}

}  // namespace packing

}  // namespace
}  // namespace rotor
