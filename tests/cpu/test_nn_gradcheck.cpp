// Finite-difference gradient checks of every layer's backward and of a whole
// tiny encoder-decoder (docs/design.md, Tests. The CPU path computes in fp32, so
// the check is made robust rather than exact:
//   - the objective is a scalar L = sum(w * output) with fixed random w,
//     accumulated in double;
//   - central differences with step h, divided by the step that was actually
//     stored in fp32; a coordinate that misses the tolerance is retried at
//     h/4 (a ReLU kink inside [x - h, x + h] spoils one step, not both);
//   - |fd - analytic| <= 2e-3 + 2e-2 |analytic|;
//   - the analytic gradients must not be ~0 (every parameter tensor and input
//     gets a nonzero gradient), so the checks can fail; CheckerCatchesWrongGradient
//     makes sure they do;
//   - dropout stays on in some checks with a fixed Context step: the mask is a
//     pure function of (seed, step, layer), so every forward of the finite
//     differences draws the mask the analytic backward used.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/philox.h"
#include "models/transformer.h"
#include "nn/attention.h"
#include "nn/attention_kind.h"
#include "nn/feed_forward.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/residual.h"
#include "nn/transformer_layers.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using nn::Context;
using nn::ParameterStore;
using ops::Activation;

// The tensors are tiny: OpenMP threads only cost time here (and the 2 cores
// of CI are shared), so the checks run on one thread.
const int kOneThread = [] {
  omp_set_num_threads(1);
  return 1;
}();

Context make_ctx(bool training = false, uint64_t step = 7) {
  Context c;
  c.training = training;
  c.seed = 20240611;
  c.micro_step = step;
  return c;
}

// Initializes the store, then moves every value by U(-spread, spread): biases
// and layer-norm gains away from 0 and 1, where a missing term would hide.
// Rows listed in keep_zero (parameter name, row) stay zero.
void init_store(ParameterStore& store, uint64_t seed, float spread = 0.3f,
                const std::vector<std::pair<std::string, int64_t>>& keep_zero = {}) {
  store.allocate(Device::cpu());
  store.initialize(seed);
  auto noise = test::random_floats(static_cast<size_t>(store.numel()), seed + 1, -spread, spread);
  float* v = store.values().data<float>();
  for (int64_t i = 0; i < store.numel(); ++i) v[i] += noise[static_cast<size_t>(i)];
  for (const auto& [name, row] : keep_zero) {
    nn::Parameter* p = store.find(name);
    ASSERT_NE(p, nullptr) << name;
    const int64_t width = p->shape.back();
    float* r = p->value.data<float>() + row * width;
    for (int64_t i = 0; i < width; ++i) r[i] = 0.0f;
  }
}

double dot(const Tensor& w, const Tensor& y) {
  EXPECT_EQ(w.numel(), y.numel());
  const float* a = w.data<float>();
  const float* b = y.data<float>();
  double s = 0;
  for (int64_t i = 0; i < w.numel(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// ---- the checker ------------------------------------------------------------

struct Coord {
  float* value;     // a float the objective depends on
  double analytic;  // dL/dvalue from the backward
  std::string name;
};

struct CheckOptions {
  float step = 1e-2f;
  double abs_tol = 2e-3;
  double rel_tol = 2e-2;
};

struct CheckResult {
  int checked = 0, retried = 0, failed = 0, nonzero = 0;
  double max_abs_analytic = 0;
  std::vector<std::string> failures;
};

CheckResult check_coords(const std::function<double()>& objective, const std::vector<Coord>& coords,
                         const CheckOptions& o = {}) {
  CheckResult r;
  for (const Coord& c : coords) {
    auto fd_at = [&](float h) {
      const float x0 = *c.value;
      const float xp = x0 + h, xm = x0 - h;
      *c.value = xp;
      const double lp = objective();
      *c.value = xm;
      const double lm = objective();
      *c.value = x0;
      return (lp - lm) / (static_cast<double>(xp) - static_cast<double>(xm));
    };
    auto ok = [&](double fd) {
      return std::abs(fd - c.analytic) <= o.abs_tol + o.rel_tol * std::abs(c.analytic);
    };
    ++r.checked;
    r.max_abs_analytic = std::max(r.max_abs_analytic, std::abs(c.analytic));
    if (std::abs(c.analytic) > 1e-4) ++r.nonzero;
    double fd = fd_at(o.step);
    if (ok(fd)) continue;
    ++r.retried;
    const double fd2 = fd_at(o.step / 4);
    if (ok(fd2)) continue;
    ++r.failed;
    if (r.failures.size() < 12)
      r.failures.push_back(c.name + ": analytic " + std::to_string(c.analytic) + ", fd(h) " +
                           std::to_string(fd) + ", fd(h/4) " + std::to_string(fd2));
  }
  return r;
}

void expect_passed(const CheckResult& r, const std::string& what) {
  SCOPED_TRACE(what);
  std::string list;
  for (const auto& f : r.failures) list += "\n  " + f;
  EXPECT_EQ(r.failed, 0) << r.failed << " of " << r.checked << " coordinates disagree:" << list;
  EXPECT_GT(r.checked, 0);
  // Kinks are rare: more than a few retries means a systematic disagreement.
  EXPECT_LE(r.retried, std::max(4, r.checked / 10))
      << "retried " << r.retried << " of " << r.checked;
  // A check against all-zero gradients cannot fail.
  EXPECT_GT(r.max_abs_analytic, 1e-2) << "analytic gradients are all ~0";
  EXPECT_GE(r.nonzero, r.checked / 4)
      << "only " << r.nonzero << " of " << r.checked << " analytic gradients are nonzero";
}

// A layer under test: forward() -> the output (from the current parameter
// values and inputs), backward(dy) -> the gradients of `inputs` (in order)
// while accumulating the parameter gradients.
struct LayerUnderTest {
  ParameterStore* store = nullptr;
  std::vector<Tensor> inputs;  // f32 inputs whose gradients backward returns
  std::function<Tensor()> forward;
  std::function<std::vector<Tensor>(const Tensor& dy)> backward;
  // Parameter (name, row) whose analytic gradient must be exactly zero and
  // that the finite differences skip (the embedding pad row).
  std::vector<std::pair<std::string, int64_t>> no_grad_rows;
  // Parameters (by name suffix) or inputs ("input0") allowed an all-zero
  // gradient.
  std::vector<std::string> may_be_zero;
  uint64_t seed = 99;
  size_t max_param_coords = 100000;  // a sample of the parameters when fewer than all
};

bool may_be_zero(const std::vector<std::string>& suffixes, const std::string& name) {
  for (const auto& s : suffixes)
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      return true;
  return false;
}

// The key bias adds q.b_k to every score of a query: softmax cancels it, so
// its gradient is exactly zero (up to rounding) unless RoPE rotates it by a
// different angle at each key position.
const char* const kKeyBias = "k_proj.bias";

struct Analytic {
  Tensor w;                  // the weights of the objective
  std::vector<float> grads;  // the store's gradients
  std::vector<Tensor> dinputs;
};

Analytic run_analytic(LayerUnderTest& t) {
  Analytic a;
  Tensor y = t.forward();
  a.w = test::random_tensor(y.shape(), t.seed + 17);
  t.store->zero_grad();
  y = t.forward();
  std::vector<Tensor> dx = t.backward(a.w.clone());
  a.grads = t.store->grads().to_floats();
  for (auto& d : dx) a.dinputs.push_back(d.clone());
  // Parameter gradients accumulate: a second pass without zero_grad doubles them.
  y = t.forward();
  (void)t.backward(a.w.clone());
  std::vector<float> twice = t.store->grads().to_floats();
  for (size_t i = 0; i < twice.size(); ++i)
    EXPECT_NEAR(twice[i], 2.0f * a.grads[i], 1e-5f + 1e-5f * std::abs(a.grads[i]))
        << "parameter gradients do not accumulate (flat index " << i << ")";
  return a;
}

// Checks every parameter (or a sample) and every input element.
CheckResult check_layer(LayerUnderTest& t, CheckOptions o = {}) {
  Analytic a = run_analytic(t);
  std::vector<Coord> coords;
  PhiloxRng rng(t.seed, static_cast<uint64_t>(RngPurpose::Test));
  for (const auto& p : t.store->parameters()) {
    const int64_t n = shape_numel(p->shape);
    const int64_t width = p->shape.back();
    float* v = p->value.data<float>();
    double max_grad = 0;
    std::vector<int64_t> chosen;
    for (int64_t i = 0; i < n; ++i) {
      const double g = a.grads[static_cast<size_t>(p->offset + i)];
      bool skip = false;
      for (const auto& [name, row] : t.no_grad_rows)
        if (name == p->name && i / width == row) {
          EXPECT_EQ(g, 0.0) << p->name << " row " << row << " must get no gradient";
          skip = true;
        }
      if (skip) continue;
      max_grad = std::max(max_grad, std::abs(g));
      chosen.push_back(i);
    }
    if (!may_be_zero(t.may_be_zero, p->name)) {
      EXPECT_GT(max_grad, 1e-6) << p->name << " gets no gradient at all";
    }
    // A random sample when the tensor is large.
    while (chosen.size() > t.max_param_coords)
      chosen.erase(chosen.begin() + static_cast<int64_t>(rng.below(chosen.size())));
    for (int64_t i : chosen)
      coords.push_back({v + i, a.grads[static_cast<size_t>(p->offset + i)],
                        p->name + "[" + std::to_string(i) + "]"});
  }
  EXPECT_EQ(a.dinputs.size(), t.inputs.size());
  for (size_t k = 0; k < t.inputs.size() && k < a.dinputs.size(); ++k) {
    Tensor& x = t.inputs[k];
    const Tensor& dx = a.dinputs[k];
    EXPECT_EQ(dx.shape(), x.shape()) << "input " << k;
    if (dx.shape() != x.shape()) continue;
    const float* g = dx.data<float>();
    double max_grad = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      max_grad = std::max(max_grad, std::abs(static_cast<double>(g[i])));
      coords.push_back(
          {x.data<float>() + i, g[i], "input" + std::to_string(k) + "[" + std::to_string(i) + "]"});
    }
    if (!may_be_zero(t.may_be_zero, "input" + std::to_string(k))) {
      EXPECT_GT(max_grad, 1e-6) << "input " << k << " gets no gradient at all";
    }
  }
  auto objective = [&] { return dot(a.w, t.forward()); };
  return check_coords(objective, coords, o);
}

Tensor rand_input(const Shape& s, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return test::random_tensor(s, seed, lo, hi);
}

// ---- the checker itself -------------------------------------------------------

TEST(GradCheck, CheckerCatchesWrongGradient) {
  // f(x) = sum w * x^3: the correct analytic gradient passes, 5% off fails.
  std::vector<float> x = test::random_floats(20, 1, 0.3f, 1.0f);
  std::vector<float> w = test::random_floats(20, 2);
  auto objective = [&] {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += static_cast<double>(w[i]) * x[i] * x[i] * x[i];
    return s;
  };
  std::vector<Coord> right, wrong;
  for (size_t i = 0; i < x.size(); ++i) {
    const double g = 3.0 * w[i] * x[i] * x[i];
    right.push_back({&x[i], g, "x"});
    wrong.push_back({&x[i], g * 1.05 + 0.01, "x"});
  }
  CheckResult r = check_coords(objective, right);
  expect_passed(r, "right");
  CheckResult bad = check_coords(objective, wrong);
  EXPECT_GT(bad.failed, bad.checked / 2);
}

// ---- Linear -------------------------------------------------------------------

void check_linear(Activation act, bool bias, uint64_t seed) {
  ParameterStore store;
  nn::Linear lin(store, "lin", 5, 4, bias, nn::Init::xavier_uniform(), act);
  init_store(store, seed);
  Context ctx = make_ctx();
  LayerUnderTest t;
  t.store = &store;
  t.seed = seed;
  t.inputs = {rand_input({6, 5}, seed + 3)};
  t.forward = [&] { return lin.forward(t.inputs[0], ctx); };
  t.backward = [&](const Tensor& dy) { return std::vector<Tensor>{lin.backward(dy)}; };
  expect_passed(check_layer(t), std::string("linear ") + ops::activation_name(act));
  // need_dx = false still accumulates the parameter gradients.
  store.zero_grad();
  Tensor y = lin.forward(t.inputs[0], ctx);
  Tensor dy = test::random_tensor(y.shape(), seed + 5);
  EXPECT_FALSE(lin.backward(dy.clone(), false).defined());
  std::vector<float> g1 = store.grads().to_floats();
  store.zero_grad();
  lin.forward(t.inputs[0], ctx);
  lin.backward(dy.clone(), true);
  EXPECT_EQ(g1, store.grads().to_floats());
}

TEST(GradCheck, LinearNone) {
  check_linear(Activation::None, true, 10);
}
TEST(GradCheck, LinearNoBias) {
  check_linear(Activation::None, false, 11);
}
TEST(GradCheck, LinearReLU) {
  check_linear(Activation::ReLU, true, 12);
}
TEST(GradCheck, LinearGELU) {
  check_linear(Activation::GELU, true, 13);
}

TEST(GradCheck, LinearFusedPrefixes) {
  ParameterStore store;
  nn::Linear lin(store, std::vector<std::string>{"a", "b", "c"}, 5, std::vector<int64_t>{3, 2, 4},
                 true, nn::Init::xavier_uniform());
  init_store(store, 20);
  ASSERT_EQ(lin.out_features(), 9);
  // Weights back to back, then the biases: one [9, 5] matrix and one [9] bias.
  EXPECT_EQ(store.find("b.weight")->offset, store.find("a.weight")->offset + 15);
  EXPECT_EQ(store.find("c.weight")->offset, store.find("b.weight")->offset + 10);
  EXPECT_EQ(store.find("b.bias")->offset, store.find("a.bias")->offset + 3);
  Context ctx = make_ctx();
  LayerUnderTest t;
  t.store = &store;
  t.seed = 21;
  t.inputs = {rand_input({4, 5}, 22)};
  t.forward = [&] { return lin.forward(t.inputs[0], ctx); };
  t.backward = [&](const Tensor& dy) { return std::vector<Tensor>{lin.backward(dy)}; };
  expect_passed(check_layer(t), "fused linear");
  // Each part equals its own product: y[:, 3:5] = x b.weight^T + b.bias.
  Tensor y = lin.forward(t.inputs[0], ctx);
  auto yv = y.to_floats();
  auto x = t.inputs[0].to_floats();
  auto wb = store.find("b.weight")->value.to_floats();
  auto bb = store.find("b.bias")->value.to_floats();
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t o = 0; o < 2; ++o) {
      double s = bb[o];
      for (int64_t i = 0; i < 5; ++i) s += static_cast<double>(x[n * 5 + i]) * wb[o * 5 + i];
      EXPECT_NEAR(yv[n * 9 + 3 + o], s, 1e-5);
    }
}

// ---- LayerNorm, Embedding, PositionEncoding -----------------------------------

// Layer norm or RMSNorm (model.norm_type rms_norm: a weight, no bias, no
// mean) on rows with a mean and a scale of their own.
void check_norm(bool rms, uint64_t seed) {
  ParameterStore store;
  nn::LayerNorm ln(store, "ln", 6, 1e-5f, rms);
  EXPECT_EQ(store.find("ln.bias") == nullptr, rms);
  init_store(store, seed);
  Context ctx = make_ctx();
  LayerUnderTest t;
  t.store = &store;
  t.seed = seed + 1;
  Tensor x = rand_input({5, 6}, seed + 2);
  float* xp = x.data<float>();
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t i = 0; i < 6; ++i)
      xp[r * 6 + i] = xp[r * 6 + i] * (0.5f + 0.4f * r) + 0.7f * r - 1;
  t.inputs = {x};
  t.forward = [&] { return ln.forward(t.inputs[0], ctx); };
  t.backward = [&](const Tensor& dy) { return std::vector<Tensor>{ln.backward(dy)}; };
  expect_passed(check_layer(t), rms ? "rms norm" : "layer norm");
}

TEST(GradCheck, LayerNorm) {
  check_norm(false, 30);
}
TEST(GradCheck, RmsNorm) {
  check_norm(true, 33);
}

TEST(GradCheck, EmbeddingScaleAndPadRow) {
  const int pad = 1;
  ParameterStore store;
  nn::Embedding emb(store, "emb", 7, 4, pad, nn::Init::normal(0.5));
  emb.set_scale(2.5f);
  init_store(store, 40, 0.3f, {{"emb", pad}});
  Context ctx = make_ctx();
  // Token 4 twice: its gradient rows add up; pad twice: no gradient.
  Tensor ids = Tensor::from_ints({0, 4, 1, 2, 4, 6, 1, 3}, {8});
  LayerUnderTest t;
  t.store = &store;
  t.seed = 41;
  t.forward = [&] { return emb.forward(ids, ctx); };
  t.backward = [&](const Tensor& dy) {
    emb.backward(ids, dy);
    return std::vector<Tensor>{};
  };
  t.no_grad_rows = {{"emb", pad}};
  expect_passed(check_layer(t), "embedding");
  // The lookup is scaled, the pad row reads zero, and an unused row gets no gradient.
  Tensor y = emb.forward(ids, ctx);
  auto yv = y.to_floats();
  auto tv = emb.table()->value.to_floats();
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(yv[1 * 4 + i], 2.5f * tv[4 * 4 + i]);
    EXPECT_EQ(yv[2 * 4 + i], 0.0f);
  }
  store.zero_grad();
  emb.backward(ids, test::random_tensor({8, 4}, 42));
  auto g = emb.table()->grad.to_floats();
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(g[5 * 4 + i], 0.0f);
    EXPECT_EQ(g[pad * 4 + i], 0.0f);
  }
}

TEST(GradCheck, PositionEncodingLearned) {
  ParameterStore store;
  nn::PositionEncoding pos(store, "pos", nn::PositionKind::Learned, 8, 4, 0.5);
  init_store(store, 50);
  Context ctx = make_ctx();
  Tensor x = rand_input({2, 3, 4}, 51);
  for (int64_t offset : {0, 2}) {
    LayerUnderTest t;
    t.store = &store;
    t.seed = 52 + static_cast<uint64_t>(offset);
    t.forward = [&] {
      Tensor y = x.clone();
      pos.add(y, offset, ctx);
      return y;
    };
    t.backward = [&](const Tensor& dy) {
      pos.backward(dy, offset);
      return std::vector<Tensor>{};
    };
    CheckResult r = check_layer(t);
    // Rows outside [offset, offset + 3) are unused: zero gradient there.
    expect_passed(r, "learned positions, offset " + std::to_string(offset));
    auto g = store.grads().to_floats();
    for (int64_t row = 0; row < 8; ++row) {
      const bool used = row >= offset && row < offset + 3;
      double m = 0;
      for (int64_t i = 0; i < 4; ++i)
        m = std::max(m, std::abs(static_cast<double>(g[row * 4 + i])));
      if (used) {
        EXPECT_GT(m, 0.0) << "row " << row;
      } else {
        EXPECT_EQ(m, 0.0) << "row " << row;
      }
    }
  }
  // Sinusoidal and RoPE add no parameters; sinusoidal adds the fixed table,
  // RoPE nothing.
  ParameterStore none;
  nn::PositionEncoding sin(none, "s", nn::PositionKind::Sinusoidal, 8, 4, 0.5);
  nn::PositionEncoding rope(none, "r", nn::PositionKind::Rope, 8, 4, 0.5);
  EXPECT_EQ(none.numel(), 0);
  Tensor y = x.clone();
  rope.add(y, 0, ctx);
  EXPECT_EQ(y.to_floats(), x.to_floats());
  sin.add(y, 1, ctx);
  auto yv = y.to_floats(), xv = x.to_floats();
  // Position 1 (offset 1, t = 0): [sin(1), sin(1e-4), cos(1), cos(1e-4)] for d = 4.
  EXPECT_NEAR(yv[0] - xv[0], std::sin(1.0), 1e-6);
  EXPECT_NEAR(yv[1] - xv[1], std::sin(1e-4), 1e-6);
  EXPECT_NEAR(yv[2] - xv[2], std::cos(1.0), 1e-6);
  EXPECT_NEAR(yv[3] - xv[3], std::cos(1e-4), 1e-6);
}

// ---- Dropout ------------------------------------------------------------------

TEST(GradCheck, DropoutBackwardUsesForwardMask) {
  ParameterStore store;
  nn::Dropout drop(store, 0.3f);
  nn::Dropout other(store, 0.3f);
  Context ctx = make_ctx(true, 11);
  Tensor x = rand_input({40, 25}, 60, 0.5f, 1.5f);  // no zeros: y = 0 only where dropped
  Tensor y = drop.forward(x, ctx);
  // Another layer's forward and a later step in between must not change the mask.
  Context later = make_ctx(true, 12);
  (void)other.forward(x, later);
  Tensor ones = Tensor::full(x.shape(), 1.0f);
  Tensor dx = drop.backward(ones);
  auto xv = x.to_floats(), yv = y.to_floats(), gv = dx.to_floats();
  int dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    // y = m x and dx = m dy with one mask m in {0, 1/(1-p)}.
    EXPECT_NEAR(gv[i], yv[i] / xv[i], 1e-5) << i;
    EXPECT_TRUE(gv[i] == 0.0f || std::abs(gv[i] - 1.0f / 0.7f) < 1e-5f) << i;
    dropped += gv[i] == 0.0f;
  }
  EXPECT_GT(dropped, 200);  // about 300 of 1000
  EXPECT_LT(dropped, 400);
  // The same step draws the same mask; another step another one.
  EXPECT_EQ(drop.forward(x, ctx).to_floats(), yv);
  EXPECT_NE(drop.forward(x, later).to_floats(), yv);
  // Another layer (another id) draws another mask at the same step.
  EXPECT_NE(other.forward(x, ctx).to_floats(), yv);
  // Inference: identity both ways.
  Context eval = make_ctx(false);
  EXPECT_EQ(drop.forward(x, eval).to_floats(), xv);
  EXPECT_EQ(drop.backward(ones).to_floats(), ones.to_floats());
}

// ---- attention ----------------------------------------------------------------

struct AttnCase {
  bool cross = false, causal = false, rope = false;
  float dropout = 0.0f;
  bool training = false;
  std::vector<int32_t> key_lengths;  // empty: none
  int64_t Tq = 4, Tk = 4;
  std::string kind = "softmax";     // attention.kind
  nn::LinearKindOptions linear;     // kind linear's settings
  int64_t heads = 2, kv_heads = 0;  // model.kv_heads (0: heads)
  bool bias = true;                 // model.bias
};

void check_attention(const AttnCase& c, uint64_t seed, const std::string& what) {
  const int64_t B = 2, d = 8;
  ParameterStore store;
  nn::MultiHeadAttentionOptions cfg;
  cfg.d_model = d;
  cfg.n_heads = c.heads;
  cfg.kv_heads = c.kv_heads;
  cfg.bias = c.bias;
  cfg.causal = c.causal;
  cfg.rope = c.rope;
  cfg.dropout = c.dropout;
  cfg.kind = *nn::attention_kind(c.kind);
  cfg.linear = c.linear;
  nn::MultiHeadAttention attn(store, {"q", "k", "v", "o"}, cfg, c.cross);
  init_store(store, seed);
  // Larger weights make the attention far from uniform, so the softmax matters.
  float* vals = store.values().data<float>();
  for (int64_t i = 0; i < store.numel(); ++i) vals[i] *= 2.0f;
  Context ctx = make_ctx(c.training);
  Tensor lengths;
  if (!c.key_lengths.empty()) lengths = Tensor::from_ints(c.key_lengths, {B});
  LayerUnderTest t;
  t.store = &store;
  t.seed = seed;
  t.inputs = {rand_input({B, c.Tq, d}, seed + 1)};
  if (c.cross || !c.rope) t.may_be_zero = {"k.bias"};
  if (c.cross) t.inputs.push_back(rand_input({B, c.Tk, d}, seed + 2));
  const float base = 0.5f;  // d_memory starts here: the backward must add to it
  t.forward = [&] {
    return attn.forward(t.inputs[0], c.cross ? t.inputs[1] : Tensor(), lengths, ctx);
  };
  t.backward = [&](const Tensor& dy) {
    if (!c.cross) return std::vector<Tensor>{attn.backward(dy, nullptr)};
    Tensor dmem = Tensor::full({B, c.Tk, d}, base);
    Tensor dx = attn.backward(dy, &dmem);
    float* p = dmem.data<float>();
    for (int64_t i = 0; i < dmem.numel(); ++i) p[i] -= base;
    return std::vector<Tensor>{dx, dmem};
  };
  expect_passed(check_layer(t), what);

  // Padded keys get no gradient and do not change the output.
  if (!c.key_lengths.empty() && c.dropout == 0.0f) {
    Tensor& kv_input = c.cross ? t.inputs[1] : t.inputs[0];
    const int64_t Tk = c.Tk;
    Tensor y0 = t.forward();
    float* p = kv_input.data<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = c.key_lengths[static_cast<size_t>(b)]; j < Tk; ++j)
        for (int64_t i = 0; i < d; ++i) p[(b * Tk + j) * d + i] += 3.0f;
    Tensor y1 = t.forward();
    auto a = y0.to_floats(), b1 = y1.to_floats();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t q = 0; q < (c.cross ? c.Tq : c.key_lengths[static_cast<size_t>(b)]); ++q)
        for (int64_t i = 0; i < d; ++i) {
          const size_t k = static_cast<size_t>((b * c.Tq + q) * d + i);
          EXPECT_NEAR(a[k], b1[k], 1e-5) << what << ": padded key changed query " << q;
        }
  }
}

TEST(GradCheck, SelfAttention) {
  check_attention({}, 70, "self");
}
// Grouped-query attention: 4 query heads read 2 key/value heads (and 1),
// whose shared rows collect both heads' gradients; without biases.
TEST(GradCheck, SelfAttentionGroupedKeyValueHeads) {
  AttnCase c;
  c.heads = 4;
  c.kv_heads = 2;
  c.rope = true;
  c.causal = true;
  c.key_lengths = {4, 3};
  check_attention(c, 76, "self, 4 heads over 2 key/value heads, rope, causal");
  c.kv_heads = 1;
  c.bias = false;
  c.causal = false;
  check_attention(c, 77, "self, 4 heads over 1 key/value head, no biases");
}
TEST(GradCheck, CrossAttentionGroupedKeyValueHeads) {
  AttnCase c;
  c.cross = true;
  c.heads = 4;
  c.kv_heads = 2;
  c.Tk = 5;
  c.key_lengths = {5, 3};
  check_attention(c, 78, "cross, 4 heads over 2 key/value heads");
}
TEST(GradCheck, SelfAttentionKeyPadding) {
  AttnCase c;
  c.key_lengths = {4, 2};
  check_attention(c, 71, "self, key padding");
}
TEST(GradCheck, SelfAttentionRopeKeyPadding) {
  AttnCase c;
  c.rope = true;
  c.key_lengths = {3, 4};
  check_attention(c, 72, "self, rope, key padding");
}
TEST(GradCheck, SelfAttentionCausal) {
  AttnCase c;
  c.causal = true;
  check_attention(c, 73, "self, causal");
}
TEST(GradCheck, SelfAttentionRopeCausalKeyPadding) {
  AttnCase c;
  c.rope = true;
  c.causal = true;
  c.key_lengths = {4, 3};
  check_attention(c, 74, "self, rope, causal, key padding");
}
TEST(GradCheck, SelfAttentionRopeCausalDropout) {
  AttnCase c;
  c.rope = true;
  c.causal = true;
  c.dropout = 0.25f;
  c.training = true;
  check_attention(c, 75, "self, rope, causal, attention dropout (fixed mask)");
}
// attention.kind linear (ops/linear_attention.h through nn/attention_kinds/
// linear.cpp): the head split leaves q unscaled, the op rotates q and k (or
// their features) itself, FAVOR+'s projection is the layer's draw.
AttnCase linear_case(ops::LinearFeatureMap map, ops::LinearRope placement, bool rope, bool causal,
                     std::vector<int32_t> key_lengths = {}) {
  AttnCase c;
  c.kind = "linear";
  c.linear.feature_map = map;
  c.linear.rope = placement;
  c.linear.seed = 5;
  c.rope = rope;
  c.causal = causal;
  c.key_lengths = std::move(key_lengths);
  c.Tq = c.Tk = 5;
  // FAVOR+'s stabilizers (the row max for queries, one max over the keys)
  // are constants for the gradient: they cancel in num / (den + eps) up to
  // eps only. A causal query that sees a few keys far below the keys' max
  // has den near the default eps of 1e-6, so the check runs with an eps
  // that leaves the cancellation exact in float.
  if (map == ops::LinearFeatureMap::Favor) c.linear.eps = 1e-12f;
  return c;
}
constexpr auto kElu1 = ops::LinearFeatureMap::Elu1;
constexpr auto kFavor = ops::LinearFeatureMap::Favor;
constexpr auto kAfter = ops::LinearRope::AfterFeatureMap;
constexpr auto kBefore = ops::LinearRope::BeforeFeatureMap;

TEST(GradCheck, LinearSelfAttentionElu1) {
  check_attention(linear_case(kElu1, kAfter, false, false, {5, 3}), 90, "linear elu1, padding");
}
TEST(GradCheck, LinearSelfAttentionElu1Causal) {
  check_attention(linear_case(kElu1, kAfter, false, true), 91, "linear elu1, causal");
}
TEST(GradCheck, LinearSelfAttentionElu1RopeAfter) {
  check_attention(linear_case(kElu1, kAfter, true, false, {4, 5}), 92,
                  "linear elu1, rope after the feature map, padding");
}
TEST(GradCheck, LinearSelfAttentionElu1RopeAfterCausal) {
  check_attention(linear_case(kElu1, kAfter, true, true), 93,
                  "linear elu1, rope after the feature map, causal");
}
TEST(GradCheck, LinearSelfAttentionElu1RopeBeforeCausal) {
  check_attention(linear_case(kElu1, kBefore, true, true, {5, 4}), 94,
                  "linear elu1, rope before the feature map, causal, padding");
}
TEST(GradCheck, LinearSelfAttentionFavorRopeAfter) {
  AttnCase c = linear_case(kFavor, kAfter, true, false, {3, 5});
  c.linear.features = 6;
  check_attention(c, 95, "linear favor, rope after the feature map, padding");
}
TEST(GradCheck, LinearSelfAttentionFavorRopeAfterCausal) {
  check_attention(linear_case(kFavor, kAfter, true, true), 96,
                  "linear favor (default M), rope after the feature map, causal");
}
TEST(GradCheck, LinearSelfAttentionFavorRopeBefore) {
  check_attention(linear_case(kFavor, kBefore, true, false), 97,
                  "linear favor, rope before the feature map");
}
TEST(GradCheck, LinearSelfAttentionFavorRopeBeforeCausal) {
  AttnCase c = linear_case(kFavor, kBefore, true, true, {5, 2});
  c.linear.features = 7;
  check_attention(c, 98, "linear favor, rope before the feature map, causal, padding");
}
TEST(GradCheck, LinearCrossAttentionStaysSoftmax) {
  // A cross-attention given kind linear is softmax attention (translation's
  // encoder-decoder attention): the key bias keeps its exact zero gradient.
  AttnCase c = linear_case(kElu1, kAfter, true, false, {5, 2});
  c.cross = true;
  c.Tq = 3;
  check_attention(c, 99, "cross, kind linear asked");
}

TEST(GradCheck, CrossAttention) {
  AttnCase c;
  c.cross = true;
  c.Tq = 3;
  c.Tk = 5;
  c.key_lengths = {5, 2};
  check_attention(c, 76, "cross, key padding");
}
TEST(GradCheck, CrossAttentionRopeParamsNeverRotates) {
  // cfg.rope on a cross-attention is ignored (decision 7): same gradients, too.
  AttnCase c;
  c.cross = true;
  c.rope = true;
  c.Tq = 2;
  c.Tk = 3;
  c.key_lengths = {3, 1};
  check_attention(c, 77, "cross, rope requested");
}

// RoPE acts: the same weights with and without it give other outputs, and a
// rotated self-attention depends only on relative positions, so it is not
// permutation-equivariant like plain attention is.
TEST(GradCheck, RopeChangesSelfAttention) {
  auto run = [](bool rope) {
    ParameterStore store;
    nn::MultiHeadAttentionOptions cfg;
    cfg.d_model = 8;
    cfg.n_heads = 2;
    cfg.rope = rope;
    nn::MultiHeadAttention attn(store, {"q", "k", "v", "o"}, cfg, false);
    init_store(store, 78);
    Context ctx = make_ctx();
    return attn.forward(rand_input({1, 4, 8}, 79), Tensor(), Tensor(), ctx).to_floats();
  };
  auto a = run(false), b = run(true);
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff = std::max(diff, std::abs(static_cast<double>(a[i] - b[i])));
  EXPECT_GT(diff, 1e-3);
}

// ---- FeedForward and Residual ---------------------------------------------------

void check_ffn(Activation act, float dropout, bool training, uint64_t seed, bool gated = false,
               bool bias = true) {
  ParameterStore store;
  nn::FeedForwardOptions o;
  o.d_model = 6;
  o.d_ff = 10;
  o.activation = act;
  o.activation_dropout = dropout;
  o.gated = gated;
  o.bias = bias;
  nn::FeedForward ffn(store, "fc1", "fc2", o);
  EXPECT_EQ(store.find("fc1_gate.weight") != nullptr, gated);
  EXPECT_EQ(store.find("fc2.bias") != nullptr, bias);
  init_store(store, seed);
  Context ctx = make_ctx(training);
  LayerUnderTest t;
  t.store = &store;
  t.seed = seed;
  t.inputs = {rand_input({5, 6}, seed + 1)};
  t.forward = [&] { return ffn.forward(t.inputs[0], ctx); };
  t.backward = [&](const Tensor& dy) { return std::vector<Tensor>{ffn.backward(dy)}; };
  expect_passed(check_layer(t), std::string("ffn ") + ops::activation_name(act) +
                                    (gated ? " gated" : "") + (bias ? "" : " no bias"));
}

TEST(GradCheck, FeedForwardReLU) {
  check_ffn(Activation::ReLU, 0.0f, false, 80);
}
TEST(GradCheck, FeedForwardGELU) {
  check_ffn(Activation::GELU, 0.0f, false, 81);
}
TEST(GradCheck, FeedForwardActivationDropout) {
  check_ffn(Activation::GELU, 0.3f, true, 82);
}
TEST(GradCheck, FeedForwardSiLU) {
  check_ffn(Activation::SiLU, 0.0f, false, 83);
}
// Gated (GLU variants): SwiGLU without biases as Llama, GEGLU and ReGLU with
// them, and SwiGLU with dropout after the product.
TEST(GradCheck, FeedForwardGated) {
  check_ffn(Activation::SiLU, 0.0f, false, 84, true, false);
  check_ffn(Activation::GELU, 0.0f, false, 85, true, true);
  check_ffn(Activation::ReLU, 0.0f, false, 86, true, true);
  check_ffn(Activation::SiLU, 0.3f, true, 87, true, false);
}

void check_residual(bool post, float dropout, bool training, uint64_t seed) {
  ParameterStore store;
  nn::Residual res(store, "norm", 6, 1e-5f, dropout, post);
  nn::Linear f(store, "f", 6, 6, true, nn::Init::xavier_uniform());
  init_store(store, seed);
  Context ctx = make_ctx(training);
  LayerUnderTest t;
  t.store = &store;
  t.seed = seed;
  t.inputs = {rand_input({5, 6}, seed + 1)};
  t.forward = [&] {
    const Tensor& x = t.inputs[0];
    Tensor h = res.begin(x, ctx);
    return res.end(x, f.forward(h, ctx), ctx);
  };
  t.backward = [&](const Tensor& dy) {
    Tensor d_fx = res.end_backward(dy);
    return std::vector<Tensor>{res.begin_backward(f.backward(d_fx))};
  };
  expect_passed(check_layer(t), post ? "residual post" : "residual pre");
  // The inference path computes what the training path computes (no dropout).
  if (!training) {
    const Tensor& x = t.inputs[0];
    auto y = t.forward().to_floats();
    auto z = res.apply_end(x, f.apply(res.apply_begin(x, ctx), ctx), ctx).to_floats();
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], z[i], 1e-6);
  }
}

TEST(GradCheck, ResidualPostNorm) {
  check_residual(true, 0.0f, false, 90);
}
TEST(GradCheck, ResidualPreNorm) {
  check_residual(false, 0.0f, false, 91);
}
TEST(GradCheck, ResidualPostNormDropout) {
  check_residual(true, 0.3f, true, 92);
}
TEST(GradCheck, ResidualPreNormDropout) {
  check_residual(false, 0.3f, true, 93);
}

// ---- encoder and decoder layers -------------------------------------------------

nn::LayerOptions layer_options(bool post, bool rope, float dropout, bool rms = false) {
  nn::LayerOptions c;
  c.rms_norm = rms;
  c.d_model = 8;
  c.n_heads = 2;
  c.d_ff = 12;
  c.activation = Activation::GELU;
  c.dropout = dropout;
  c.attention_dropout = dropout;
  c.activation_dropout = dropout;
  c.post_norm = post;
  c.rope = rope;
  return c;
}

// Llama's layer: pre-RMSNorm, RoPE, SwiGLU, no biases, grouped key/value heads.
nn::LayerOptions llama_layer_options() {
  nn::LayerOptions c = layer_options(false, true, 0.0f, true);
  c.n_heads = 4;
  c.kv_heads = 2;
  c.activation = Activation::SiLU;
  c.gated_ffn = true;
  c.bias = false;
  return c;
}

void check_encoder_layer(bool post, bool rope, float dropout, uint64_t seed, bool rms = false,
                         const nn::LayerOptions* options = nullptr) {
  ParameterStore store;
  nn::EncoderLayer layer(store, models::bart_encoder_layer_names("enc"),
                         options ? *options : layer_options(post, rope, dropout, rms));
  init_store(store, seed);
  Context ctx = make_ctx(dropout > 0);
  Tensor lengths = Tensor::from_ints({4, 2}, {2});
  LayerUnderTest t;
  t.store = &store;
  t.seed = seed;
  t.inputs = {rand_input({2, 4, 8}, seed + 1)};
  t.max_param_coords = 40;
  if (!rope) t.may_be_zero = {kKeyBias};
  t.forward = [&] { return layer.forward(t.inputs[0], lengths, ctx); };
  t.backward = [&](const Tensor& dy) { return std::vector<Tensor>{layer.backward(dy)}; };
  expect_passed(check_layer(t), std::string("encoder layer ") + (post ? "post" : "pre") +
                                    (rope ? " rope" : "") + (dropout > 0 ? " dropout" : "") +
                                    (rms ? " rms" : ""));
}

TEST(GradCheck, EncoderLayerPost) {
  check_encoder_layer(true, false, 0.0f, 100);
}
TEST(GradCheck, EncoderLayerPre) {
  check_encoder_layer(false, false, 0.0f, 101);
}
TEST(GradCheck, EncoderLayerPostRope) {
  check_encoder_layer(true, true, 0.0f, 102);
}
TEST(GradCheck, EncoderLayerPreRopeDropout) {
  check_encoder_layer(false, true, 0.2f, 103);
}
TEST(GradCheck, EncoderLayerPostRms) {
  check_encoder_layer(true, true, 0.0f, 104, true);
}
TEST(GradCheck, EncoderLayerPreRms) {
  check_encoder_layer(false, false, 0.0f, 105, true);
}
TEST(GradCheck, EncoderLayerLlama) {
  const nn::LayerOptions o = llama_layer_options();
  check_encoder_layer(false, true, 0.0f, 106, true, &o);
}

void check_decoder_layer(bool post, bool rope, float dropout, uint64_t seed, bool rms = false,
                         const nn::LayerOptions* options = nullptr) {
  ParameterStore store;
  nn::DecoderLayer layer(store, "dec",
                         options ? *options : layer_options(post, rope, dropout, rms));
  init_store(store, seed);
  Context ctx = make_ctx(dropout > 0);
  Tensor mem_lengths = Tensor::from_ints({5, 3}, {2});
  LayerUnderTest t;
  t.store = &store;
  t.seed = seed;
  t.inputs = {rand_input({2, 4, 8}, seed + 1), rand_input({2, 5, 8}, seed + 2)};
  t.max_param_coords = 40;
  t.may_be_zero = {rope ? "encoder_attn.k_proj.bias" : kKeyBias};
  t.forward = [&] { return layer.forward(t.inputs[0], t.inputs[1], mem_lengths, ctx); };
  t.backward = [&](const Tensor& dy) {
    Tensor dmem = Tensor::zeros({2, 5, 8});
    Tensor dx = layer.backward(dy, dmem);
    return std::vector<Tensor>{dx, dmem};
  };
  expect_passed(check_layer(t), std::string("decoder layer ") + (post ? "post" : "pre") +
                                    (rope ? " rope" : "") + (dropout > 0 ? " dropout" : "") +
                                    (rms ? " rms" : ""));
}

TEST(GradCheck, DecoderLayerPost) {
  check_decoder_layer(true, false, 0.0f, 110);
}
TEST(GradCheck, DecoderLayerPre) {
  check_decoder_layer(false, false, 0.0f, 111);
}
TEST(GradCheck, DecoderLayerPostRope) {
  check_decoder_layer(true, true, 0.0f, 112);
}
TEST(GradCheck, DecoderLayerPreRopeDropout) {
  check_decoder_layer(false, true, 0.2f, 113);
}
TEST(GradCheck, DecoderLayerPreRopeRms) {
  check_decoder_layer(false, true, 0.0f, 114, true);
}
// Llama's settings in a translation decoder: cross-attention groups its
// key/value heads too.
TEST(GradCheck, DecoderLayerLlama) {
  const nn::LayerOptions o = llama_layer_options();
  check_decoder_layer(false, true, 0.0f, 115, true, &o);
}

// ---- the whole model ---------------------------------------------------------------

constexpr int kPad = 0, kBos = 2, kEos = 3;
constexpr int64_t kVocab = 13;

// Three pairs of different lengths, right padded: src lengths 5, 3, 4 and
// target lengths 4, 2, 3 (bos + tokens in, tokens + eos out).
models::TranslationBatch tiny_batch() {
  const std::vector<std::vector<int32_t>> src = {{5, 6, 7, 8, 9}, {10, 4, 11}, {12, 5, 4, 6}};
  const std::vector<std::vector<int32_t>> tgt = {{7, 9, 11}, {4}, {8, 12}};
  const int64_t B = 3, S = 5, T = 4;
  std::vector<int32_t> s(B * S, kPad), tin(B * T, kPad), tout(B * T, kPad), sl;
  models::TranslationBatch b;
  for (int64_t i = 0; i < B; ++i) {
    for (size_t j = 0; j < src[i].size(); ++j) s[i * S + j] = src[i][j];
    sl.push_back(static_cast<int32_t>(src[i].size()));
    tin[i * T] = kBos;
    for (size_t j = 0; j < tgt[i].size(); ++j) {
      tin[i * T + 1 + j] = tgt[i][j];
      tout[i * T + j] = tgt[i][j];
    }
    tout[i * T + tgt[i].size()] = kEos;
    b.tgt_tokens += static_cast<int64_t>(tgt[i].size()) + 1;
    b.src_tokens += static_cast<int64_t>(src[i].size());
  }
  b.src = Tensor::from_ints(s, {B, S});
  b.src_lengths = Tensor::from_ints(sl, {B});
  b.tgt_in = Tensor::from_ints(tin, {B, T});
  b.tgt_out = Tensor::from_ints(tout, {B, T});
  return b;
}

void check_model(nn::PositionKind position, bool post, float dropout, uint64_t seed,
                 Activation activation = Activation::GELU) {
  const std::string what = std::string("model ") + std::string(to_string(position)) +
                           (post ? " post" : " pre") + (dropout > 0 ? " dropout " : " ") +
                           ops::activation_name(activation);
  SCOPED_TRACE(what);
  models::TransformerOptions cfg;
  cfg.vocab_size = kVocab;
  cfg.pad_id = kPad;
  cfg.encoder_layers = 2;
  cfg.decoder_layers = 2;
  cfg.layer = layer_options(post, false, dropout);
  cfg.layer.activation = activation;
  cfg.position = position;
  cfg.max_positions = 8;
  // T5's tables: few buckets, so that the sampled ones are mostly in use
  // (exact up to 2 on each side of an encoder, log-spaced to 12).
  cfg.layer.t5_buckets = 8;
  cfg.layer.t5_max_distance = 12;
  ParameterStore store;
  models::EncoderDecoder model(cfg, store);
  init_store(store, seed, 0.2f, {{"model.shared.weight", kPad}});
  const models::TranslationBatch batch = tiny_batch();
  Context ctx = make_ctx(dropout > 0);
  const float smoothing = 0.1f;

  store.zero_grad();
  models::LossSums sums = model.forward_loss(batch, smoothing, ctx);
  EXPECT_EQ(sums.tokens, 9);
  EXPECT_GT(sums.nll, 0.0);
  EXPECT_GT(sums.loss, 0.0);
  model.backward(1.0f);
  const std::vector<float> grads = store.grads().to_floats();
  // loss_scale scales, and the gradients accumulate.
  model.forward_loss(batch, smoothing, ctx);
  model.backward(0.5f);
  const std::vector<float> more = store.grads().to_floats();
  for (size_t i = 0; i < grads.size(); ++i)
    ASSERT_NEAR(more[i], 1.5f * grads[i], 1e-5f + 1e-4f * std::abs(grads[i])) << i;

  // Every parameter tensor gets a gradient; a sample of coordinates of each
  // (more of the shared embedding) is checked.
  PhiloxRng rng(seed, static_cast<uint64_t>(RngPurpose::Test));
  std::vector<Coord> coords;
  for (const auto& p : store.parameters()) {
    const int64_t n = shape_numel(p->shape);
    double m = 0;
    for (int64_t i = 0; i < n; ++i)
      m = std::max(m, std::abs(static_cast<double>(grads[p->offset + i])));
    const bool key_bias =
        may_be_zero({kKeyBias}, p->name) &&
        (position != nn::PositionKind::Rope || p->name.find("encoder_attn") != std::string::npos);
    if (!key_bias) {
      EXPECT_GT(m, 1e-6) << p->name << " gets no gradient";
    }
    const int take = p->name == "model.shared.weight" ? 40 : 4;
    for (int k = 0; k < take; ++k) {
      const int64_t i = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
      coords.push_back({p->value.data<float>() + i, grads[static_cast<size_t>(p->offset + i)],
                        p->name + "[" + std::to_string(i) + "]"});
    }
  }
  EXPECT_GE(coords.size(), 150u);
  auto objective = [&] { return model.forward_loss(batch, smoothing, ctx).loss; };
  // GELU is smooth. ReLU has hundreds of kinks in this model (every unit of
  // every token): a smaller step makes crossing one rare.
  CheckOptions o;
  if (activation == Activation::ReLU) o.step = 2e-3f;
  expect_passed(check_coords(objective, coords, o), what);
}

TEST(GradCheck, ModelSinusoidalPost) {
  check_model(nn::PositionKind::Sinusoidal, true, 0.0f, 120);
}
TEST(GradCheck, ModelSinusoidalPre) {
  check_model(nn::PositionKind::Sinusoidal, false, 0.0f, 121);
}
TEST(GradCheck, ModelLearnedPost) {
  check_model(nn::PositionKind::Learned, true, 0.0f, 122);
}
TEST(GradCheck, ModelLearnedPre) {
  check_model(nn::PositionKind::Learned, false, 0.0f, 123);
}
TEST(GradCheck, ModelRopePost) {
  check_model(nn::PositionKind::Rope, true, 0.0f, 124);
}
TEST(GradCheck, ModelRopePre) {
  check_model(nn::PositionKind::Rope, false, 0.0f, 125);
}
TEST(GradCheck, ModelNonePost) {
  check_model(nn::PositionKind::None, true, 0.0f, 126);
}
TEST(GradCheck, ModelNonePre) {
  check_model(nn::PositionKind::None, false, 0.0f, 127);
}
TEST(GradCheck, ModelRopePreDropout) {
  check_model(nn::PositionKind::Rope, false, 0.1f, 128);
}
TEST(GradCheck, ModelLearnedPostDropout) {
  check_model(nn::PositionKind::Learned, true, 0.1f, 129);
}
TEST(GradCheck, ModelRopePreReLU) {
  check_model(nn::PositionKind::Rope, false, 0.0f, 130, Activation::ReLU);
}
TEST(GradCheck, ModelSinusoidalPostReLU) {
  check_model(nn::PositionKind::Sinusoidal, true, 0.0f, 131, Activation::ReLU);
}
// T5's relative bias: both stacks' tables, shared by their layers.
TEST(GradCheck, ModelT5Post) {
  check_model(*nn::position_kind("t5"), true, 0.0f, 132);
}
TEST(GradCheck, ModelT5PreDropout) {
  check_model(*nn::position_kind("t5"), false, 0.1f, 133);
}
// Transformer-XL's terms: each layer's W_R, u and v.
TEST(GradCheck, ModelTransformerXlPost) {
  check_model(*nn::position_kind("transformer_xl"), true, 0.0f, 134);
}
TEST(GradCheck, ModelTransformerXlPreDropout) {
  check_model(*nn::position_kind("transformer_xl"), false, 0.1f, 135);
}

}  // namespace
}  // namespace rotor
