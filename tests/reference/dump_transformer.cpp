// Dumps what tests/reference/transformer_reference.py checks against an
// independent PyTorch model (docs/design.md, Tests: a tiny EncoderDecoder's initial
// weights, its logits, label-smoothed loss and every gradient on a fixed padded
// batch, and its weights after three AdamW steps.
//
//   reference_dump_transformer --position rope --norm post --out OUT.safetensors
//
// Tensors written (all F32 unless noted):
//   NAME                 every parameter's initial value (Hugging Face names)
//   NAME.grad            d(loss_sum)/d(NAME) at the initial weights
//   NAME.after3          the value after three optimizer steps
//   logits               [B*T, V]
//   loss_sum, nll_sum    [1]: label-smoothed loss and NLL summed over target tokens
//   step_loss_sum        [3]: loss_sum before each of the three steps
//   batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out   (I32)
// The metadata records the configuration, so the reference builds the same model.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "models/transformer.h"
#include "optim/optimizer.h"

using namespace rotor;
using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "reference_dump_transformer: %s\n"
               "usage: reference_dump_transformer --position sinusoidal|learned|rope|none "
               "--norm post|pre [--activation relu|gelu] [--seed N] --out FILE\n",
               why.c_str());
  std::exit(2);
}

Tensor snapshot(const Tensor& t) {
  return Tensor::from_floats(t.to_floats(), t.shape());
}

// A fixed padded batch: B = 3, varying lengths, right padding with pad 0,
// tgt_in = bos(2) + tokens, tgt_out = tokens + eos(3). Token 9 occurs in the
// source and the target so that the tied embedding accumulates from both.
models::TranslationBatch make_batch() {
  constexpr int B = 3, S = 7, T = 7;
  const std::vector<int32_t> src = {5,  9, 14, 22, 31, 8, 3,  //
                                    12, 7, 19, 3,  0,  0, 0,  //
                                    33, 4, 27, 11, 3,  0, 0};
  const std::vector<std::vector<int32_t>> tgt = {
      {6, 18, 25, 9, 36}, {10, 21, 13, 29, 4, 17}, {30, 15}};
  std::vector<int32_t> tgt_in(B * T, 0), tgt_out(B * T, 0);
  models::TranslationBatch batch;
  for (int b = 0; b < B; ++b) {
    const auto& y = tgt[static_cast<size_t>(b)];
    tgt_in[b * T] = 2;
    for (size_t i = 0; i < y.size(); ++i) {
      tgt_in[b * T + static_cast<int>(i) + 1] = y[i];
      tgt_out[b * T + static_cast<int>(i)] = y[i];
    }
    tgt_out[b * T + static_cast<int>(y.size())] = 3;
    batch.tgt_tokens += static_cast<int64_t>(y.size()) + 1;
  }
  const std::vector<int32_t> src_lengths = {7, 4, 5};
  for (int32_t l : src_lengths) batch.src_tokens += l;
  batch.src = Tensor::from_ints(src, {B, S});
  batch.src_lengths = Tensor::from_ints(src_lengths, {B});
  batch.tgt_in = Tensor::from_ints(tgt_in, {B, T});
  batch.tgt_out = Tensor::from_ints(tgt_out, {B, T});
  return batch;
}

int run(int argc, char** argv) {
  std::string position, norm, activation = "relu", optimizer_name = "adamw", share = "true", out;
  uint64_t seed = 1234;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage("missing value for " + a);
    std::string v = argv[++i];
    if (a == "--position")
      position = v;
    else if (a == "--norm")
      norm = v;
    else if (a == "--activation")
      activation = v;
    else if (a == "--optimizer")
      optimizer_name = v;
    else if (a == "--share-embeddings")
      share = v;
    else if (a == "--seed")
      seed = std::stoull(v);
    else if (a == "--out")
      out = v;
    else
      usage("unknown option " + a);
  }
  if (position.empty() || out.empty()) usage("--position and --out are required");
  if (norm != "post" && norm != "pre") usage("--norm must be post or pre");
  if (activation != "relu" && activation != "gelu") usage("--activation must be relu or gelu");
  if (optimizer_name != "adam" && optimizer_name != "adamw")
    usage("--optimizer must be adam or adamw");
  if (share != "true" && share != "false") usage("--share-embeddings must be true or false");

  const float label_smoothing = 0.1f, layer_norm_eps = 1e-5f;
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.98, adam_eps = 1e-9, weight_decay = 0.01;
  constexpr int kSteps = 3;

  models::TransformerOptions config;
  config.vocab_size = 37;
  config.pad_id = 0;
  config.encoder_layers = 2;
  config.decoder_layers = 2;
  config.max_positions = 32;
  config.position = enum_from_string<nn::PositionKind>(position).value();
  config.scale_embeddings = true;
  config.share_embeddings = share == "true";
  config.layer.d_model = 16;
  config.layer.n_heads = 2;
  config.layer.d_ff = 24;
  config.layer.activation = activation == "gelu" ? ops::Activation::GELU : ops::Activation::ReLU;
  config.layer.dropout = config.layer.attention_dropout = config.layer.activation_dropout = 0.0f;
  config.layer.post_norm = norm == "post";
  config.layer.layer_norm_eps = layer_norm_eps;

  nn::ParameterStore store;
  models::EncoderDecoder model(config, store);
  store.allocate(Device::cpu());
  store.initialize(seed);

  nn::Context ctx;
  ctx.training = true;
  ctx.seed = seed;
  const models::TranslationBatch batch = make_batch();

  NamedTensors tensors;
  for (const auto& p : store.parameters()) tensors.emplace_back(p->name, snapshot(p->value));

  Tensor logits = snapshot(model.forward_logits(batch, ctx));
  store.zero_grad();
  models::LossSums sums = model.forward_loss(batch, label_smoothing, ctx);
  model.backward(1.0f);
  tensors.emplace_back("logits", logits);
  tensors.emplace_back("loss_sum", Tensor::from_floats({static_cast<float>(sums.loss)}, {1}));
  tensors.emplace_back("nll_sum", Tensor::from_floats({static_cast<float>(sums.nll)}, {1}));
  for (const auto& p : store.parameters())
    tensors.emplace_back(p->name + ".grad", snapshot(p->grad));
  tensors.emplace_back("batch.src", batch.src);
  tensors.emplace_back("batch.src_lengths", batch.src_lengths);
  tensors.emplace_back("batch.tgt_in", batch.tgt_in);
  tensors.emplace_back("batch.tgt_out", batch.tgt_out);

  // Three AdamW steps, each on a fresh forward/backward of the same batch,
  // gradients normalized by the target-token count as the trainer does.
  optim::OptimizerOptions oo;
  oo.beta1 = beta1;
  oo.beta2 = beta2;
  oo.eps = adam_eps;
  oo.weight_decay = weight_decay;
  oo.decoupled = optimizer_name == "adamw";
  oo.clip_norm = 0.0;
  optim::Optimizer optimizer(store, oo);
  std::vector<float> step_losses;
  for (int s = 0; s < kSteps; ++s) {
    store.zero_grad();
    ctx.step = static_cast<uint64_t>(s);
    models::LossSums st = model.forward_loss(batch, label_smoothing, ctx);
    step_losses.push_back(static_cast<float>(st.loss));
    model.backward(1.0f);
    optim::StepInfo info = optimizer.step(lr, 1.0 / static_cast<double>(st.tokens));
    if (info.skipped) {
      std::fprintf(stderr, "reference_dump_transformer: step %d skipped (non-finite gradients)\n",
                   s + 1);
      return 1;
    }
  }
  tensors.emplace_back("step_loss_sum", Tensor::from_floats(step_losses, {kSteps}));
  for (const auto& p : store.parameters())
    tensors.emplace_back(p->name + ".after3", snapshot(p->value));

  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    return std::string(buf);
  };
  Metadata meta = {
      {"position", position},
      {"norm", norm},
      {"activation", activation},
      {"optimizer", optimizer_name},
      {"share_embeddings", share},
      {"vocab_size", std::to_string(config.vocab_size)},
      {"pad_id", std::to_string(config.pad_id)},
      {"d_model", std::to_string(config.layer.d_model)},
      {"n_heads", std::to_string(config.layer.n_heads)},
      {"d_ff", std::to_string(config.layer.d_ff)},
      {"encoder_layers", std::to_string(config.encoder_layers)},
      {"decoder_layers", std::to_string(config.decoder_layers)},
      {"max_positions", std::to_string(config.max_positions)},
      {"rope_base", num(config.layer.rope_base)},
      {"layer_norm_eps", num(layer_norm_eps)},
      {"label_smoothing", num(label_smoothing)},
      {"tgt_tokens", std::to_string(batch.tgt_tokens)},
      {"lr", num(lr)},
      {"beta1", num(beta1)},
      {"beta2", num(beta2)},
      {"adam_eps", num(adam_eps)},
      {"weight_decay", num(weight_decay)},
      {"steps", std::to_string(kSteps)},
  };
  save_safetensors(out, tensors, meta);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reference_dump_transformer: %s\n", e.what());
    return 1;
  }
}
