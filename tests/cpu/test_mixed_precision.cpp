// Mixed precision (docs/design.md, "Precision") on the CPU, where fp16/bf16 are
// emulated: the ops' 16-bit path equals the f32 path on rounded inputs with
// the outputs rounded once (ops/cpu_f32.h); Transformer-XL, TUPE and DeBERTa
// (their terms in f32) in one pass against fp32; the 16-bit weight copy; the
// dynamic loss scaler; quickstart training in fp16 and bf16 against fp32; a
// NaN injected into a gradient is caught (the step skipped, the weights and
// moments untouched, the scale halved) and training goes on; an fp16 run
// resumes exactly, loss scale included.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "core/json_io.h"
#include "models/model_config.h"
#include "nn/parameters.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/embedding.h"
#include "ops/gemm.h"
#include "ops/layer_norm.h"
#include "ops/reduce.h"
#include "optim/loss_scaler.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace rotor {
namespace {
using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

namespace fs = std::filesystem;
using test::random_floats;
using test::TempDir;

const DType kHalfTypes[] = {DType::F16, DType::BF16};

// A tensor of `dtype` from random values (rounded to it), and its exact f32 twin.
struct Pair {
  Tensor lp, f32;
};
Pair random_pair(const Shape& shape, DType dtype, uint64_t seed, float lo = -1.0f,
                 float hi = 1.0f) {
  Tensor lp = Tensor::from_floats(
      random_floats(static_cast<size_t>(shape_numel(shape)), seed, lo, hi), shape, dtype);
  return {lp, Tensor::from_floats(lp.to_floats(), shape)};
}

// The f32 values rounded to `dtype` once (what a 16-bit output must hold).
std::vector<float> rounded(const Tensor& f32, DType dtype) {
  return Tensor::from_floats(f32.to_floats(), f32.shape(), dtype).to_floats();
}

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
        << what << " differs at " << i << ": " << a[i] << " vs " << b[i];
}

// ---- the ops' 16-bit path -------------------------------------------------------

TEST(MixedPrecisionOps, GemmHalfOutputWithEpilogue) {
  for (DType dt : kHalfTypes) {
    auto a = random_pair({2, 5, 7}, dt, 1), b = random_pair({6, 7}, dt, 2);
    auto bias = random_pair({6}, dt, 3);
    ops::GemmOptions o;
    o.trans_b = true;
    o.activation = ops::Activation::GELU;
    Tensor c16 = Tensor::empty({2, 5, 6}, dt), pre16 = Tensor::empty({2, 5, 6}, dt);
    o.bias = bias.lp;
    o.pre_activation = pre16;
    ops::gemm(a.lp, b.lp, c16, o);
    Tensor c32 = Tensor::empty({2, 5, 6}), pre32 = Tensor::empty({2, 5, 6});
    o.bias = bias.f32;
    o.pre_activation = pre32;
    ops::gemm(a.f32, b.f32, c32, o);
    expect_bitwise(c16.to_floats(), rounded(c32, dt), "C");
    expect_bitwise(pre16.to_floats(), rounded(pre32, dt), "pre-activation");
  }
}

// Weight gradients: 16-bit A and B accumulated (beta = 1) into an f32 C.
TEST(MixedPrecisionOps, GemmHalfInputsIntoF32Accumulator) {
  for (DType dt : kHalfTypes) {
    auto dy = random_pair({9, 4}, dt, 4), x = random_pair({9, 3}, dt, 5);
    const auto c0 = random_floats(12, 6);
    Tensor c_mixed = Tensor::from_floats(c0, {4, 3}), c_ref = Tensor::from_floats(c0, {4, 3});
    ops::GemmOptions o;
    o.trans_a = true;
    o.beta = 1.0f;
    ops::gemm(dy.lp, x.lp, c_mixed, o);
    ops::gemm(dy.f32, x.f32, c_ref, o);
    expect_bitwise(c_mixed.to_floats(), c_ref.to_floats(), "dW");
    // 16-bit C read and written (beta = 1): rounded once after the f32 sum.
    Tensor c16 = Tensor::from_floats(c0, {4, 3}, dt);
    Tensor c16_ref = Tensor::from_floats(c16.to_floats(), {4, 3});
    ops::gemm(dy.lp, x.lp, c16, o);
    ops::gemm(dy.f32, x.f32, c16_ref, o);
    expect_bitwise(c16.to_floats(), rounded(c16_ref, dt), "16-bit C");
  }
}

TEST(MixedPrecisionOps, SumRowsHalfIntoF32) {
  for (DType dt : kHalfTypes) {
    auto x = random_pair({33, 10}, dt, 7);
    Tensor a = Tensor::full({10}, 0.25f), b = Tensor::full({10}, 0.25f);
    ops::sum_rows(x.lp, a, true);
    ops::sum_rows(x.f32, b, true);
    expect_bitwise(a.to_floats(), b.to_floats(), "sum_rows");
  }
}

// 16-bit x with the f32 master gamma/beta; dgamma/dbeta into f32 gradients.
TEST(MixedPrecisionOps, LayerNormHalfActivationsF32Parameters) {
  for (DType dt : kHalfTypes) {
    const int64_t rows = 6, n = 16;
    auto x = random_pair({rows, n}, dt, 8, -3.0f, 3.0f), dy = random_pair({rows, n}, dt, 9);
    Tensor gamma = test::random_tensor({n}, 10, 0.5f, 1.5f), beta = test::random_tensor({n}, 11);
    Tensor y16 = Tensor::empty({rows, n}, dt), y32 = Tensor::empty({rows, n});
    Tensor m16 = Tensor::empty({rows}), r16 = Tensor::empty({rows});
    Tensor m32 = Tensor::empty({rows}), r32 = Tensor::empty({rows});
    ops::layer_norm_forward(x.lp, gamma, beta, 1e-5f, y16, m16, r16);
    ops::layer_norm_forward(x.f32, gamma, beta, 1e-5f, y32, m32, r32);
    expect_bitwise(y16.to_floats(), rounded(y32, dt), "y");
    expect_bitwise(m16.to_floats(), m32.to_floats(), "mean");
    expect_bitwise(r16.to_floats(), r32.to_floats(), "rstd");

    Tensor dx16 = Tensor::empty({rows, n}, dt), dx32 = Tensor::empty({rows, n});
    Tensor dg16 = Tensor::full({n}, 0.5f), db16 = Tensor::full({n}, -0.5f);
    Tensor dg32 = Tensor::full({n}, 0.5f), db32 = Tensor::full({n}, -0.5f);
    ops::layer_norm_backward(dy.lp, x.lp, gamma, m16, r16, dx16, dg16, db16);
    ops::layer_norm_backward(dy.f32, x.f32, gamma, m32, r32, dx32, dg32, db32);
    expect_bitwise(dx16.to_floats(), rounded(dx32, dt), "dx");
    expect_bitwise(dg16.to_floats(), dg32.to_floats(), "dgamma");
    expect_bitwise(db16.to_floats(), db32.to_floats(), "dbeta");
  }
}

TEST(MixedPrecisionOps, EmbeddingHalfRowsIntoF32Gradient) {
  for (DType dt : kHalfTypes) {
    const std::vector<int32_t> ids{3, 1, 3, 0, 2, 3};
    Tensor id = Tensor::from_ints(ids, {6});
    auto table = random_pair({5, 8}, dt, 12), dy = random_pair({6, 8}, dt, 13);
    Tensor out16 = Tensor::empty({6, 8}, dt), out32 = Tensor::empty({6, 8});
    ops::embedding_forward(id, table.lp, 2.0f, out16);
    ops::embedding_forward(id, table.f32, 2.0f, out32);
    expect_bitwise(out16.to_floats(), rounded(out32, dt), "lookup");
    Tensor g16 = Tensor::full({5, 8}, 0.125f), g32 = Tensor::full({5, 8}, 0.125f);
    ops::embedding_backward(id, dy.lp, 2.0f, g16, /*pad_id=*/0);
    ops::embedding_backward(id, dy.f32, 2.0f, g32, /*pad_id=*/0);
    expect_bitwise(g16.to_floats(), g32.to_floats(), "table gradient");
  }
}

// 16-bit logits, f32 loss; 16-bit dlogits carrying a loss scale.
TEST(MixedPrecisionOps, CrossEntropyHalfLogits) {
  for (DType dt : kHalfTypes) {
    const int64_t n = 5, v = 11;
    auto logits = random_pair({n, v}, dt, 14, -4.0f, 4.0f);
    Tensor targets = Tensor::from_ints({1, 0, 10, 3, 0}, {n});
    Tensor l16 = Tensor::empty({n}), nll16 = Tensor::empty({n}), lse16 = Tensor::empty({n});
    Tensor l32 = Tensor::empty({n}), nll32 = Tensor::empty({n}), lse32 = Tensor::empty({n});
    ops::cross_entropy_forward(logits.lp, targets, 0.1f, 0, l16, nll16, lse16);
    ops::cross_entropy_forward(logits.f32, targets, 0.1f, 0, l32, nll32, lse32);
    expect_bitwise(l16.to_floats(), l32.to_floats(), "loss");
    expect_bitwise(lse16.to_floats(), lse32.to_floats(), "lse");
    Tensor d16 = Tensor::empty({n, v}, dt), d32 = Tensor::empty({n, v});
    ops::cross_entropy_backward(logits.lp, targets, lse16, 0.1f, 0, 1024.0f, d16);
    ops::cross_entropy_backward(logits.f32, targets, lse32, 0.1f, 0, 1024.0f, d32);
    expect_bitwise(d16.to_floats(), rounded(d32, dt), "dlogits");
  }
}

TEST(MixedPrecisionOps, AttentionHalf) {
  for (DType dt : kHalfTypes) {
    auto q = random_pair({1, 2, 3, 4}, dt, 15), k = random_pair({1, 2, 5, 4}, dt, 16),
         v = random_pair({1, 2, 5, 4}, dt, 17);
    ops::AttentionOptions o;
    o.causal = true;
    Tensor out16 = Tensor::empty({1, 2, 3, 4}, dt), p16 = Tensor::empty({1, 2, 3, 5}, dt);
    Tensor out32 = Tensor::empty({1, 2, 3, 4}), p32 = Tensor::empty({1, 2, 3, 5});
    ops::attention_forward(q.lp, k.lp, v.lp, o, out16, p16);
    ops::attention_forward(q.f32, k.f32, v.f32, o, out32, p32);
    expect_bitwise(out16.to_floats(), rounded(out32, dt), "out");
    expect_bitwise(p16.to_floats(), rounded(p32, dt), "probs");
  }
}

TEST(MixedPrecisionOps, MixedDtypesOutsideTheRulesAreErrors) {
  Tensor a = Tensor::zeros({2, 2}, DType::F16), b = Tensor::zeros({2, 2}, DType::BF16);
  Tensor c = Tensor::zeros({2, 2}, DType::BF16);
  EXPECT_THROW(ops::gemm(a, b, c), Error);  // A and B differ
  Tensor c16 = Tensor::zeros({2, 2}, DType::BF16);
  EXPECT_THROW(ops::gemm(a, a, c16), Error);  // C neither A's dtype nor f32
  Tensor x32 = Tensor::zeros({2, 4}), g16 = Tensor::zeros({4}, DType::F16);
  Tensor y = Tensor::zeros({2, 4}), m = Tensor::zeros({2}), r = Tensor::zeros({2});
  EXPECT_THROW(ops::layer_norm_forward(x32, g16, g16, 1e-5f, y, m, r),
               Error);  // 16-bit gamma, f32 x
}

// ---- the dense-bias encodings in fp16 / bf16 -------------------------------------

// One forward and backward of a tiny model (no dropout) from the same
// weights in `dtype`: the loss, the whole f32 gradient buffer and the
// gradients of the encoding's own parameters (W_R, u and v; TUPE's table,
// projections and [CLS] scalars; DeBERTa's relative rows and their norm).
struct Pass {
  double loss = 0;
  std::vector<float> grads, position_grads;
};

Pass one_pass(const std::string& task, const std::string& position, DType dtype) {
  const std::string layers = task == "mlm" ? "  encoder_layers: 2\n" : "  decoder_layers: 2\n";
  const Config c = load_config_from_string(
      "task: " + task + "\nmodel:\n  d_model: 16\n  n_heads: 2\n  d_ff: 32\n" + layers +
          "  max_positions: 32\n  dropout: 0.0\n  attention_dropout: 0.0\n  position: " + position +
          "\ndata:\n  seq_len: 16\n",
      "configs/x.yaml");
  constexpr int64_t kVocab = 40;
  nn::ParameterStore store;
  std::unique_ptr<models::BertForMaskedLM> mlm;
  std::unique_ptr<models::DecoderLM> lm;
  if (task == "mlm")
    mlm = std::make_unique<models::BertForMaskedLM>(models::bert_options(c, kVocab), store);
  else
    lm = std::make_unique<models::DecoderLM>(models::lm_options(c, kVocab), store);
  store.allocate(Device::cpu());
  store.initialize(5);
  if (dtype != DType::F32) store.set_compute_dtype(dtype);
  store.zero_grad();
  nn::Context ctx;
  ctx.training = true;
  ctx.dtype = dtype;
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 2 * 12; ++i) ids.push_back(1 + (i * 7 + 3) % 39);
  Pass out;
  if (mlm) {
    models::MlmBatch b;
    b.input_ids = Tensor::from_ints(ids, {2, 12});
    b.lengths = Tensor::from_ints({12, 9}, {2});
    b.masked_positions = Tensor::from_ints({1, 4, 6, 13, 19}, {5});
    b.masked_targets = Tensor::from_ints({3, 17, 22, 5, 30}, {5});
    b.masked_tokens = 5;
    b.tokens = 21;
    out.loss = mlm->forward_loss(b, ctx).loss;
    mlm->backward(1.0f);
  } else {
    models::LmBatch b;
    b.input_ids = Tensor::from_ints(ids, {2, 12});
    std::vector<int32_t> next(ids.begin() + 1, ids.end());
    next.push_back(2);
    b.targets = Tensor::from_ints(next, {2, 12});
    b.tokens = 24;
    out.loss = lm->forward_loss(b, ctx).loss;
    lm->backward(1.0f);
  }
  out.grads = store.grads().to_floats();
  for (const auto& p : store.parameters())
    for (const char* part : {".r_proj.", ".r_w_bias", ".r_r_bias", ".tupe.", ".rel_embeddings."})
      if (p->name.find(part) != std::string::npos) {
        const std::vector<float> g = p->grad.to_floats();
        out.position_grads.insert(out.position_grads.end(), g.begin(), g.end());
      }
  return out;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

// Transformer-XL's terms, TUPE's correlation and DeBERTa's terms train in
// fp16 and bf16 (they compute in f32 from f32 copies of q and k, nn/attention.cpp):
// the loss and gradients of one pass stay close to fp32's, and differ from
// them (the 16-bit path ran).
TEST(MixedPrecisionModels, DenseBiasEncodingsTrackFp32) {
  const std::pair<const char*, const char*> cases[] = {
      {"mlm", "transformer_xl"}, {"mlm", "tupe"}, {"mlm", "deberta"}, {"lm", "transformer_xl"}};
  for (const auto& [task, position] : cases) {
    const Pass f32 = one_pass(task, position, DType::F32);
    ASSERT_GT(f32.loss, 0.0);
    for (DType dt : kHalfTypes) {
      SCOPED_TRACE(fmt::format("{} {} {}", task, position, dtype_name(dt)));
      const Pass half = one_pass(task, position, dt);
      EXPECT_NE(half.loss, f32.loss);
      EXPECT_LE(std::abs(half.loss - f32.loss), 0.002 * f32.loss)
          << half.loss << " vs " << f32.loss;
      ASSERT_EQ(half.grads.size(), f32.grads.size());
      EXPECT_GT(cosine(half.grads, f32.grads), dt == DType::F16 ? 0.9999 : 0.995);
      ASSERT_FALSE(f32.position_grads.empty());
      EXPECT_GT(cosine(half.position_grads, f32.position_grads), dt == DType::F16 ? 0.9999 : 0.995);
    }
  }
}

// ---- the 16-bit weight copy ------------------------------------------------------

TEST(MixedPrecisionParameters, CopyFollowsTheMasters) {
  for (DType dt : kHalfTypes) {
    nn::ParameterStore store;
    nn::Parameter* w = store.add("w", {3, 4}, nn::Init::normal(1.0));
    nn::Parameter* b = store.add("b", {4}, nn::Init::ones(), true);
    store.allocate(Device::cpu());
    store.initialize(3);
    EXPECT_THROW(w->value_in(dt), Error);  // no copy yet
    store.set_compute_dtype(dt);
    EXPECT_EQ(store.compute_dtype(), dt);
    expect_bitwise(w->value_in(dt).to_floats(), rounded(w->value, dt), "copy after set");
    EXPECT_EQ(w->value_in(DType::F32).raw(), w->value.raw());  // f32 reads the masters
    EXPECT_THROW(w->value_in(dt == DType::F16 ? DType::BF16 : DType::F16), Error);
    // The copy changes only when refreshed (the trainer: after every step).
    w->value.copy_from(test::random_tensor({3, 4}, 4));
    const auto stale = w->value_in(dt).to_floats();
    store.refresh_compute_copy();
    expect_bitwise(w->value_in(dt).to_floats(), rounded(w->value, dt), "copy after refresh");
    EXPECT_NE(stale, w->value_in(dt).to_floats());
    EXPECT_EQ(store.span({w, b}, {16}, false, dt).dtype(), dt);
    EXPECT_EQ(w->grad.dtype(), DType::F32);  // gradients stay f32
    store.set_compute_dtype(DType::F32);
    EXPECT_FALSE(w->value_lp.defined());
  }
}

// ---- the dynamic loss scaler -----------------------------------------------------

TEST(LossScaler, HalvesOnOverflowDoublesAfterTheWindow) {
  optim::LossScalerOptions o;
  o.init_scale = 1024;
  o.window = 3;
  optim::DynamicLossScaler s(o);
  using C = optim::DynamicLossScaler::Change;
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.update(true), C::Shrank);
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.update(false), C::None);
  EXPECT_EQ(s.update(false), C::None);
  EXPECT_EQ(s.good_steps(), 2);
  EXPECT_EQ(s.update(true), C::Shrank);  // an overflow restarts the count
  EXPECT_EQ(s.scale(), 256);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_EQ(s.update(false), C::None);
  EXPECT_EQ(s.update(false), C::None);
  EXPECT_EQ(s.update(false), C::Grew);  // the third good step in a row
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.good_steps(), 0);
  // A checkpoint's state continues the count.
  optim::DynamicLossScaler r(o);
  r.restore(64, 2);
  EXPECT_EQ(r.update(false), C::Grew);
  EXPECT_EQ(r.scale(), 128);
}

TEST(LossScaler, GrowthStopsAtTheCapAndDivergenceIsAnError) {
  optim::LossScalerOptions o;
  o.init_scale = 4;
  o.window = 1;
  o.max_scale = 8;
  optim::DynamicLossScaler s(o);
  s.update(false);
  EXPECT_EQ(s.scale(), 8);
  s.update(false);
  EXPECT_EQ(s.scale(), 8);
  o.init_scale = 2 * o.min_scale;
  optim::DynamicLossScaler d(o);
  d.update(true);
  EXPECT_THROW(d.update(true), Error);  // non-finite at every scale: the loss diverged
}

// ---- training through the rotor binary -------------------------------------------

using rotor::test::RunResult;
using rotor::test::slurp;

RunResult rotor_run(const TempDir& dir, const std::string& args, const std::string& env = "") {
  return rotor::test::run_rotor(dir, args, env + " OMP_NUM_THREADS=1");
}

// The JSON records of metrics.jsonl with "split" == split.
std::vector<json_io::Json> records(const std::string& run, const std::string& split) {
  std::vector<json_io::Json> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    json_io::Json v = json_io::parse(line, "metrics.jsonl");
    if (v.at("split").get<std::string>() == split) out.push_back(std::move(v));
  }
  return out;
}

void expect_same_tensors(const std::string& a, const std::string& b) {
  SafetensorsFile fa(a), fb(b);
  ASSERT_EQ(fa.names(), fb.names());
  for (const auto& name : fa.names()) {
    Tensor ta = fa.load(name), tb = fb.load(name);
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << name;
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0) << name << ": " << a << " vs " << b;
  }
}

bool same_tensors(const std::string& a, const std::string& b) {
  SafetensorsFile fa(a), fb(b);
  for (const auto& name : fa.names()) {
    Tensor ta = fa.load(name), tb = fb.load(name);
    if (std::memcmp(ta.raw(), tb.raw(), ta.nbytes()) != 0) return false;
  }
  return true;
}

json_io::Json trainer_state(const std::string& checkpoint) {
  return json_io::load(checkpoint + "/trainer_state.json");
}

// The quickstart model cut to 1 + 1 layers of d_model 64, for the loss-scaler tests.
constexpr const char* kSmallModel =
    "--set model.encoder_layers=1 --set model.decoder_layers=1 --set model.d_model=64 "
    "--set model.d_ff=128 --set data.max_tokens=512";

class MixedPrecisionTraining : public ::testing::Test {
 protected:
  // The quickstart's data at a third of its size (the model and recipe are
  // configs/quickstart/numbers_rope.yaml's).
  void SetUp() override {
    auto r = rotor_run(dir_, rotor::test::synth_args(dir_ / "data", {6000, 300, 10, 10, 1}));
    ASSERT_EQ(r.code, 0) << r.err;
  }

  RunResult train(const std::string& run, const std::string& precision, const std::string& extra,
                  const std::string& env = "") {
    return rotor_run(
        dir_,
        "train " + std::string(ROTOR_SOURCE_DIR) +
            "/configs/quickstart/numbers_rope.yaml --set device=cpu --set precision=" + precision +
            " --set output_dir=" + (dir_ / run) + " --set data.train=" + (dir_ / "data/train") +
            " --set data.valid=" + (dir_ / "data/valid") + " " + extra,
        env);
  }

  TempDir dir_;
};

// The criterion at reduced length and size: fp16 and bf16 end within
// 2% of the fp32 loss (the train loss of the last 25 updates, and the
// validation loss, computed in fp32 from each run's master weights), on the
// 1 + 1 layer model with a 20-update warmup (the train loss of updates 76-100
// is about 3.79; with the recipe's 200-update warmup it stays at 4.46,
// barely trained; 28 s here, against 197 s for the full quickstart model
// in CI). tests/gpu runs the full model for 300 updates on
// a GPU.
TEST_F(MixedPrecisionTraining, HalfPrecisionRunsStayWithinTwoPercentOfFp32) {
  const int updates = 100;
  const std::string extra = fmt::format(
      "{1} --set optim.warmup_updates=20 --set train.max_updates={0} --set train.log_interval=25 "
      "--set train.valid_interval={0} --set train.save_interval={0}",
      updates, kSmallModel);
  std::map<std::string, std::pair<double, double>> loss;  // precision -> (train, valid)
  for (const char* precision : {"fp32", "fp16", "bf16"}) {
    auto r = train(precision, precision, extra);
    ASSERT_EQ(r.code, 0) << precision << ": " << r.err;
    const auto tr = records(dir_ / precision, "train"), va = records(dir_ / precision, "valid");
    ASSERT_FALSE(tr.empty() || va.empty()) << precision;
    EXPECT_EQ(tr.back().at("step").get<int64_t>(), updates);
    loss[precision] = {tr.back().at("loss").get<double>(), va.back().at("loss").get<double>()};
    std::printf(
        "%s: train loss %.4f (last 25 updates), valid loss %.4f%s\n", precision,
        loss[precision].first, loss[precision].second,
        tr.back().contains("loss_scale")
            ? fmt::format(", loss scale {}", tr.back().at("loss_scale").get<double>()).c_str()
            : "");
    if (std::string(precision) == "fp16") {
      EXPECT_NE(r.err.find("emulated"), std::string::npos) << "the CPU emulation is not logged";
      // The default initial scale (128) fits per-token logit gradients: no
      // update is lost to an overflow.
      EXPECT_EQ(r.err.find("gradient overflow"), std::string::npos) << r.err;
    }
  }
  const auto [train32, valid32] = loss["fp32"];
  for (const char* precision : {"fp16", "bf16"}) {
    const auto [tr, va] = loss[precision];
    EXPECT_LE(std::abs(tr - train32), 0.02 * train32) << precision << " train loss vs fp32";
    EXPECT_LE(std::abs(va - valid32), 0.02 * valid32) << precision << " valid loss vs fp32";
  }
  EXPECT_NE(loss["fp16"].first, train32);  // it did compute in another precision
  EXPECT_NE(loss["bf16"].first, train32);
}

// Update 3 finds a NaN in a gradient: it is skipped and logged, the loss
// scale halves, the weights and Adam moments after it equal those before it,
// and training goes on.
TEST_F(MixedPrecisionTraining, InjectedNanIsCaughtByTheLossScaler) {
  const std::string extra = std::string(kSmallModel) +
                            " --set train.max_updates=6 --set train.log_interval=1 "
                            "--set train.valid_interval=0 --set train.save_interval=1 "
                            "--set train.keep_last=10 --set train.loss_scale=1024";
  auto r = train("nan", "fp16", extra, "ROTOR_TEST_NAN_GRAD_AT=3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("update 3: gradient overflow, skipped; loss scale -> 512"),
            std::string::npos)
      << r.err;
  const std::string ck = dir_ / "nan/checkpoints";
  const auto before = trainer_state(ck + "/step_2"), after = trainer_state(ck + "/step_3");
  EXPECT_EQ(before.at("loss_scale").get<double>(), 1024.0);
  EXPECT_EQ(after.at("loss_scale").get<double>(), 512.0);
  EXPECT_EQ(after.at("skipped_steps").get<int64_t>(),
            before.at("skipped_steps").get<int64_t>() + 1);
  expect_same_tensors(ck + "/step_2/model.safetensors", ck + "/step_3/model.safetensors");
  expect_same_tensors(ck + "/step_2/optimizer.safetensors", ck + "/step_3/optimizer.safetensors");
  // Training went on: the next updates change the weights, which stay finite.
  EXPECT_FALSE(same_tensors(ck + "/step_3/model.safetensors", ck + "/step_6/model.safetensors"));
  SafetensorsFile last(ck + "/step_6/model.safetensors");
  for (const auto& name : last.names())
    for (float x : last.load(name).to_floats()) ASSERT_TRUE(std::isfinite(x)) << name;
  const auto tr = records(dir_ / "nan", "train");
  ASSERT_EQ(tr.size(), 6u);
  // A non-finite loss would be written as null.
  for (const auto& rec : tr)
    EXPECT_TRUE(rec.at("loss").is_number() && std::isfinite(rec.at("loss").get<double>()))
        << rec.dump();
}

// The scale doubles after scale_window good updates, is saved with the
// checkpoint and restored: 3 updates, then --resume to 6, equal 6 in one go
// (losses, loss scales and weights bitwise).
TEST_F(MixedPrecisionTraining, Fp16ResumeRestoresTheLossScale) {
  const std::string extra = std::string(kSmallModel) +
                            " --set train.log_interval=1 --set train.valid_interval=0 "
                            "--set train.save_interval=3 --set train.loss_scale=256 "
                            "--set train.scale_window=2";
  auto r = train("full", "fp16", extra + " --set train.max_updates=6");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("split", "fp16", extra + " --set train.max_updates=3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(trainer_state(dir_ / "split/checkpoints/step_3").at("loss_scale").get<double>(), 512.0);
  EXPECT_EQ(
      trainer_state(dir_ / "split/checkpoints/step_3").at("loss_scale_good_steps").get<int64_t>(),
      1);
  r = train("split", "fp16", extra + " --set train.max_updates=6 --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto full = records(dir_ / "full", "train"), split = records(dir_ / "split", "train");
  ASSERT_EQ(full.size(), 6u);
  ASSERT_EQ(split.size(), 6u);
  const double expected_scale[] = {256, 512, 512, 1024, 1024, 2048};  // no overflow at these scales
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(full[i].at("loss_scale").get<double>(), expected_scale[i]) << "update " << i + 1;
    EXPECT_EQ(split[i].at("loss_scale").get<double>(), expected_scale[i]) << "update " << i + 1;
    EXPECT_EQ(full[i].at("loss").get<double>(), split[i].at("loss").get<double>())
        << "update " << i + 1;
  }
  expect_same_tensors(dir_ / "full/checkpoints/step_6/model.safetensors",
                      dir_ / "split/checkpoints/step_6/model.safetensors");
  expect_same_tensors(dir_ / "full/checkpoints/step_6/optimizer.safetensors",
                      dir_ / "split/checkpoints/step_6/optimizer.safetensors");
}

}  // namespace
}  // namespace rotor
