// Dumps what tests/reference/transformer_reference.py checks against an
// independent PyTorch model (docs/design.md, Tests): a tiny EncoderDecoder's
// (--model seq2seq, the default), decoder-only causal LM's (--model lm) or
// BERT masked LM's (--model mlm, models/bert.h BertForMaskedLM) initial
// weights, its logits, loss and every gradient on a fixed padded batch, and
// its weights after three AdamW steps.
//
//   reference_dump_transformer --position rope --norm post --out OUT.safetensors
//   reference_dump_transformer --model lm --position rope --norm pre --out OUT.safetensors
//   reference_dump_transformer --position t5 --norm pre --out OUT.safetensors
//   reference_dump_transformer --position transformer_xl --norm post --out OUT.safetensors
//   reference_dump_transformer --model mlm --position tupe --norm post --tupe-relative true
//       --activation gelu --out OUT.safetensors
//   reference_dump_transformer --model mlm --position deberta --norm post --activation gelu
//       --out OUT.safetensors
//
// --position t5 uses 8 buckets and max distance 5 unless --t5-buckets and
// --t5-max-distance say otherwise (model.t5's defaults, 32 and 128, would
// give every relative position of the 7-token batches a bucket of its own):
// the encoder's table then has exact, log-spaced and shared buckets, and
// |r| = 6 lies beyond the max distance, so the cores' clamped rows are
// checked too.
//
// --position transformer_xl needs no settings of its own: every
// self-attention gains r_proj.weight, r_w_bias and r_r_bias, which are
// dumped, with their gradients and values after the steps, like any other
// parameter (the 7-token batches reach distances -6..6).
//
// --model mlm builds BERT (post-LN only, as model.norm must be for it) with
// two token types and weights drawn from N(0, 0.3^2): model.init_std's 0.02
// would leave the attention all but uniform and TUPE's correlation of the
// order of 1e-6, so that neither would be tested. Its batch has 8-token rows
// starting with [CLS]; --position tupe (TUPE-A; TUPE-R with --tupe-relative
// true, T5's bias with the --t5-* settings) sets the [CLS] scalars
// PREFIX.encoder.tupe.cls to fixed nonzero values (they start at zero) before
// the weights are dumped, so that the logits depend on them.
//
// --position deberta (mlm only) uses 4 position buckets and a max relative
// position of 6 unless --deberta-buckets and --deberta-max-relative say
// otherwise (model.deberta's defaults, 256 and 512, would give every distance
// of the 8-token batch an exact bucket of its own): the relative table then
// has 8 rows, |i - j| = 3 .. 7 fall into the log-spaced buckets 3 and 4
// (|i - j| = 3, 4 and 5 share bucket 3, 6 and 7 bucket 4), and the rows of
// i - j >= 3 (bucket 3 and the clamped bucket 4, both row 7) are shared at
// the table's upper end, so that the rows' sums in the gradients and the
// clamping are checked. The shared table PREFIX.encoder.rel_embeddings.weight
// and its PREFIX.encoder.LayerNorm are dumped like any other parameter.
//
// Tensors written (all F32 unless noted):
//   NAME                 every parameter's initial value (Hugging Face names)
//   NAME.grad            d(loss_sum)/d(NAME) at the initial weights
//   NAME.after3          the value after three optimizer steps
//   logits               [B*T, V] (mlm: every position's, pads included)
//   loss_sum, nll_sum    [1]: label-smoothed loss and NLL summed over target tokens
//                        (lm: both the cross-entropy summed over the targets;
//                        mlm: both that of the masked tokens)
//   step_loss_sum        [3]: loss_sum before each of the three steps
//   batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_out   (I32; seq2seq)
//   batch.input_ids, batch.targets                              (I32; lm)
//   batch.input_ids, batch.token_type_ids, batch.lengths,
//   batch.masked_positions, batch.masked_targets                (I32; mlm)
// The metadata records the configuration, so the reference builds the same model.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "models/bert.h"
#include "models/decoder_lm.h"
#include "models/transformer.h"
#include "optim/optimizer.h"

using namespace rotor;
using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "reference_dump_transformer: %s\n"
      "usage: reference_dump_transformer [--model seq2seq|lm|mlm] "
      "--position sinusoidal|learned|rope|none|t5|transformer_xl|tupe|deberta --norm post|pre "
      "[--activation relu|gelu|silu] [--gated-ffn true|false] [--bias true|false] [--kv-heads N] "
      "[--optimizer adam|adamw] [--norm-type layer_norm|rms_norm] "
      "[--share-embeddings true|false] [--t5-buckets N] [--t5-max-distance N] "
      "[--tupe-relative true|false] [--deberta-buckets N] [--deberta-max-relative N] "
      "[--seed N] --out FILE\n",
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

// The LM's fixed batch: B = 3 blocks of the token stream, right-padded with
// pad 0: inputs are a block's tokens but the last, targets all but the first
// (pad where an input has no next token). Token 9 occurs as an input and a
// target, and twice in one block.
models::LmBatch make_lm_batch() {
  constexpr int B = 3, T = 7;
  const std::vector<std::vector<int32_t>> blocks = {
      {5, 9, 14, 22, 9, 31, 8, 3}, {12, 7, 19, 3, 9}, {33, 4, 27}};
  std::vector<int32_t> input(B * T, 0), target(B * T, 0);
  models::LmBatch batch;
  for (int b = 0; b < B; ++b) {
    const auto& x = blocks[static_cast<size_t>(b)];
    for (size_t i = 0; i + 1 < x.size(); ++i) {
      input[b * T + static_cast<int>(i)] = x[i];
      target[b * T + static_cast<int>(i)] = x[i + 1];
    }
    batch.tokens += static_cast<int64_t>(x.size()) - 1;
  }
  batch.input_ids = Tensor::from_ints(input, {B, T});
  batch.targets = Tensor::from_ints(target, {B, T});
  return batch;
}

// The masked LM's fixed batch: B = 3 rows of [CLS](2) tokens [SEP](3) ...,
// right-padded with pad 0 to T = 8, token types 0 then 1 after the first
// [SEP] (row 0). Five positions are predicted: three hold [MASK](4), one a
// random token (row 0, t = 6) and one its own token (row 1, t = 4), as BERT's
// 80/10/10 rule leaves them. Token 9 is an input and a target (the tied
// decoder and the word embedding meet in its row).
models::MlmBatch make_mlm_batch() {
  constexpr int B = 3, T = 8;
  models::MlmBatch batch;
  batch.input_ids = Tensor::from_ints({2, 11, 4,  25, 3,  17, 35, 3,  //
                                       2, 9,  30, 4,  14, 3,  0,  0,  //
                                       2, 4,  21, 9,  3,  0,  0,  0},
                                      {B, T});
  batch.token_type_ids = Tensor::from_ints({0, 0, 0, 0, 0, 1, 1, 1,  //
                                            0, 0, 0, 0, 0, 0, 0, 0,  //
                                            0, 0, 0, 0, 0, 0, 0, 0},
                                           {B, T});
  batch.lengths = Tensor::from_ints({8, 6, 5}, {B});
  batch.masked_positions = Tensor::from_ints({2, 6, 11, 12, 17}, {5});
  batch.masked_targets = Tensor::from_ints({9, 22, 31, 14, 12}, {5});
  batch.tokens = 19;
  batch.masked_tokens = 5;
  return batch;
}

struct Args {
  std::string model = "seq2seq", position, norm, activation = "relu", optimizer = "adamw",
              share = "true", tupe_relative = "false", norm_type = "layer_norm", out;
  std::string gated_ffn = "false", bias = "true";         // model.gated_ffn, model.bias
  int64_t kv_heads = 0;                                   // model.kv_heads (0: n_heads)
  int64_t t5_buckets = 8, t5_max_distance = 5;            // --position t5 only
  int64_t deberta_buckets = 4, deberta_max_relative = 6;  // --position deberta only
  uint64_t seed = 1234;
};

constexpr float kLabelSmoothing = 0.1f, kLayerNormEps = 1e-5f;
constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.98, kAdamEps = 1e-9, kWeightDecay = 0.01;
constexpr int kSteps = 3;

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

nn::LayerOptions layer_options(const Args& a) {
  nn::LayerOptions layer;
  layer.d_model = 16;
  layer.n_heads = 2;
  layer.d_ff = 24;
  layer.activation = *enum_from_string<ops::Activation>(a.activation);
  layer.gated_ffn = a.gated_ffn == "true";
  layer.bias = a.bias == "true";
  layer.kv_heads = a.kv_heads;
  layer.dropout = layer.attention_dropout = layer.activation_dropout = 0.0f;
  layer.post_norm = a.norm == "post";
  layer.layer_norm_eps = kLayerNormEps;
  layer.rms_norm = a.norm_type == "rms_norm";
  layer.t5_buckets = a.t5_buckets;
  layer.t5_max_distance = a.t5_max_distance;
  return layer;
}

// What one model under test does: its logits, a forward with the loss sums
// (loss, nll; what backward needs kept) and the backward of the loss sum.
struct ModelCalls {
  std::function<Tensor(const nn::Context&)> logits;
  std::function<std::pair<double, double>(const nn::Context&)> loss;
  std::function<void()> backward;
};

// Initial weights, logits, loss sums and gradients; three optimizer steps,
// each on a fresh forward/backward of the same batch with gradients
// normalized by the target-token count as the trainer does; the weights
// after them. Written with `batch` and `meta` (plus the common keys) to a.out.
int dump(const Args& a, nn::ParameterStore& store, const ModelCalls& m, int64_t tokens,
         NamedTensors batch, Metadata meta) {
  nn::Context ctx;
  ctx.training = true;
  ctx.seed = a.seed;
  NamedTensors tensors;
  for (const auto& p : store.parameters()) tensors.emplace_back(p->name, snapshot(p->value));
  Tensor logits = snapshot(m.logits(ctx));
  store.zero_grad();
  const auto [loss, nll] = m.loss(ctx);
  m.backward();
  tensors.emplace_back("logits", logits);
  tensors.emplace_back("loss_sum", Tensor::from_floats({static_cast<float>(loss)}, {1}));
  tensors.emplace_back("nll_sum", Tensor::from_floats({static_cast<float>(nll)}, {1}));
  for (const auto& p : store.parameters())
    tensors.emplace_back(p->name + ".grad", snapshot(p->grad));
  for (auto& t : batch) tensors.push_back(std::move(t));

  optim::OptimizerOptions oo;
  oo.beta1 = kBeta1;
  oo.beta2 = kBeta2;
  oo.eps = kAdamEps;
  oo.weight_decay = kWeightDecay;
  oo.decoupled = a.optimizer == "adamw";
  oo.clip_norm = 0.0;
  optim::Optimizer optimizer(store, oo);
  std::vector<float> step_losses;
  for (int s = 0; s < kSteps; ++s) {
    store.zero_grad();
    ctx.micro_step = static_cast<uint64_t>(s);
    step_losses.push_back(static_cast<float>(m.loss(ctx).first));
    m.backward();
    optim::StepInfo info = optimizer.step(kLr, 1.0 / static_cast<double>(tokens));
    if (info.skipped) {
      std::fprintf(stderr, "reference_dump_transformer: step %d skipped (non-finite gradients)\n",
                   s + 1);
      return 1;
    }
  }
  tensors.emplace_back("step_loss_sum", Tensor::from_floats(step_losses, {kSteps}));
  for (const auto& p : store.parameters())
    tensors.emplace_back(p->name + ".after3", snapshot(p->value));

  const nn::LayerOptions layer = layer_options(a);
  const Metadata common = {
      {"model", a.model},
      {"position", a.position},
      {"norm", a.norm},
      {"norm_type", a.norm_type},
      {"activation", a.activation},
      {"gated_ffn", a.gated_ffn},
      {"bias", a.bias},
      {"kv_heads", std::to_string(a.kv_heads > 0 ? a.kv_heads : layer.n_heads)},
      {"optimizer", a.optimizer},
      {"share_embeddings", a.share},
      {"d_model", std::to_string(layer.d_model)},
      {"n_heads", std::to_string(layer.n_heads)},
      {"d_ff", std::to_string(layer.d_ff)},
      {"rope_base", num(layer.rope_params.theta)},
      {"t5_buckets", std::to_string(layer.t5_buckets)},
      {"t5_max_distance", std::to_string(layer.t5_max_distance)},
      {"tupe_relative", a.tupe_relative},
      {"deberta_buckets", std::to_string(a.deberta_buckets)},
      {"deberta_max_relative", std::to_string(a.deberta_max_relative)},
      {"layer_norm_eps", num(kLayerNormEps)},
      {"tgt_tokens", std::to_string(tokens)},
      {"lr", num(kLr)},
      {"beta1", num(kBeta1)},
      {"beta2", num(kBeta2)},
      {"adam_eps", num(kAdamEps)},
      {"weight_decay", num(kWeightDecay)},
      {"steps", std::to_string(kSteps)},
  };
  meta.insert(meta.end(), common.begin(), common.end());
  save_safetensors(a.out, tensors, meta);
  return 0;
}

int run_seq2seq(const Args& a) {
  models::TransformerOptions config;
  config.vocab_size = 37;
  config.pad_id = 0;
  config.encoder_layers = 2;
  config.decoder_layers = 2;
  config.max_positions = 32;
  config.position = enum_from_string<nn::PositionKind>(a.position).value();
  config.scale_embeddings = true;
  config.share_embeddings = a.share == "true";
  config.layer = layer_options(a);

  nn::ParameterStore store;
  models::EncoderDecoder model(config, store);
  store.allocate(Device::cpu());
  store.initialize(a.seed);
  const models::TranslationBatch batch = make_batch();
  ModelCalls m;
  m.logits = [&](const nn::Context& ctx) { return model.forward_logits(batch, ctx); };
  m.loss = [&](const nn::Context& ctx) {
    const models::LossSums s = model.forward_loss(batch, kLabelSmoothing, ctx);
    return std::make_pair(s.loss, s.nll);
  };
  m.backward = [&] { model.backward(1.0f); };
  return dump(a, store, m, batch.tgt_tokens,
              {{"batch.src", batch.src},
               {"batch.src_lengths", batch.src_lengths},
               {"batch.tgt_in", batch.tgt_in},
               {"batch.tgt_out", batch.tgt_out}},
              {{"vocab_size", std::to_string(config.vocab_size)},
               {"pad_id", std::to_string(config.pad_id)},
               {"encoder_layers", std::to_string(config.encoder_layers)},
               {"decoder_layers", std::to_string(config.decoder_layers)},
               {"max_positions", std::to_string(config.max_positions)},
               {"label_smoothing", num(kLabelSmoothing)}});
}

int run_lm(const Args& a) {
  models::DecoderLmOptions config;
  config.vocab_size = 37;
  config.pad_id = 0;
  config.num_layers = 2;
  config.max_positions = 32;
  config.position = enum_from_string<nn::PositionKind>(a.position).value();
  config.scale_embeddings = true;
  config.share_embeddings = a.share == "true";
  config.layer = layer_options(a);

  nn::ParameterStore store;
  models::DecoderLM model(config, store);
  store.allocate(Device::cpu());
  store.initialize(a.seed);
  const models::LmBatch batch = make_lm_batch();
  ModelCalls m;
  m.logits = [&](const nn::Context& ctx) { return model.forward_logits(batch.input_ids, ctx); };
  m.loss = [&](const nn::Context& ctx) {
    const models::LmSums s = model.forward_loss(batch, ctx);
    return std::make_pair(s.loss, s.loss);
  };
  m.backward = [&] { model.backward(1.0f); };
  return dump(a, store, m, batch.tokens,
              {{"batch.input_ids", batch.input_ids}, {"batch.targets", batch.targets}},
              {{"vocab_size", std::to_string(config.vocab_size)},
               {"pad_id", std::to_string(config.pad_id)},
               {"layers", std::to_string(config.num_layers)},
               {"max_positions", std::to_string(config.max_positions)}});
}

int run_mlm(const Args& a) {
  models::BertOptions config;
  config.vocab_size = 37;
  config.pad_id = 0;
  config.num_layers = 2;
  config.layer = layer_options(a);
  config.position = enum_from_string<nn::PositionKind>(a.position).value();
  config.max_positions = 32;
  config.type_vocab_size = 2;
  config.tupe_relative = a.tupe_relative == "true";
  config.deberta.position_buckets = a.deberta_buckets;
  config.deberta.max_relative_positions = a.deberta_max_relative;
  config.init_std = 0.3;

  nn::ParameterStore store;
  models::BertForMaskedLM model(config, store);
  store.allocate(Device::cpu());
  store.initialize(a.seed);
  if (nn::Parameter* cls = store.find(config.prefix() + ".encoder.tupe.cls")) {
    // [2, H]: theta_1 (what [CLS] attends to), theta_2 (what attends to [CLS])
    const std::vector<float> theta = {0.4f, -0.3f, -0.5f, 0.6f};
    std::copy(theta.begin(), theta.end(), cls->value.data<float>());
  }
  const models::MlmBatch batch = make_mlm_batch();
  ModelCalls m;
  m.logits = [&](const nn::Context& ctx) {
    const Tensor lg = model.forward_logits(batch.input_ids, batch.token_type_ids, batch.lengths,
                                           ctx);  // [B, T, V]
    return lg.view({lg.size(0) * lg.size(1), lg.size(2)});
  };
  m.loss = [&](const nn::Context& ctx) {
    const models::MlmSums s = model.forward_loss(batch, ctx);
    return std::make_pair(s.loss, s.loss);
  };
  m.backward = [&] { model.backward(1.0f); };
  return dump(a, store, m, batch.masked_tokens,
              {{"batch.input_ids", batch.input_ids},
               {"batch.token_type_ids", batch.token_type_ids},
               {"batch.lengths", batch.lengths},
               {"batch.masked_positions", batch.masked_positions},
               {"batch.masked_targets", batch.masked_targets}},
              {{"vocab_size", std::to_string(config.vocab_size)},
               {"pad_id", std::to_string(config.pad_id)},
               {"layers", std::to_string(config.num_layers)},
               {"max_positions", std::to_string(config.max_positions)},
               {"type_vocab_size", std::to_string(config.type_vocab_size)},
               {"prefix", config.prefix()}});
}

int run(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string opt = argv[i];
    if (i + 1 >= argc) usage("missing value for " + opt);
    std::string v = argv[++i];
    if (opt == "--model")
      a.model = v;
    else if (opt == "--position")
      a.position = v;
    else if (opt == "--norm")
      a.norm = v;
    else if (opt == "--activation")
      a.activation = v;
    else if (opt == "--norm-type")
      a.norm_type = v;
    else if (opt == "--gated-ffn")
      a.gated_ffn = v;
    else if (opt == "--bias")
      a.bias = v;
    else if (opt == "--kv-heads")
      a.kv_heads = std::stoll(v);
    else if (opt == "--optimizer")
      a.optimizer = v;
    else if (opt == "--share-embeddings")
      a.share = v;
    else if (opt == "--t5-buckets")
      a.t5_buckets = std::stoll(v);
    else if (opt == "--t5-max-distance")
      a.t5_max_distance = std::stoll(v);
    else if (opt == "--tupe-relative")
      a.tupe_relative = v;
    else if (opt == "--deberta-buckets")
      a.deberta_buckets = std::stoll(v);
    else if (opt == "--deberta-max-relative")
      a.deberta_max_relative = std::stoll(v);
    else if (opt == "--seed")
      a.seed = std::stoull(v);
    else if (opt == "--out")
      a.out = v;
    else
      usage("unknown option " + opt);
  }
  if (a.position.empty() || a.out.empty()) usage("--position and --out are required");
  if (a.model != "seq2seq" && a.model != "lm" && a.model != "mlm")
    usage("--model must be seq2seq, lm or mlm");
  if (!enum_from_string<nn::PositionKind>(a.position)) usage("unknown --position " + a.position);
  // model.t5's rules (config/checks.cpp): an even count, and a max distance
  // beyond the causal table's exact buckets.
  if (a.t5_buckets < 4 || a.t5_buckets % 2 != 0 || a.t5_max_distance <= a.t5_buckets / 2)
    usage("--t5-buckets must be even and at least 4, --t5-max-distance above half of it");
  if (a.norm != "post" && a.norm != "pre") usage("--norm must be post or pre");
  if (a.norm_type != "layer_norm" && a.norm_type != "rms_norm")
    usage("--norm-type must be layer_norm or rms_norm");
  if (!enum_from_string<ops::Activation>(a.activation))
    usage("--activation must be relu, gelu or silu");
  if (a.gated_ffn != "true" && a.gated_ffn != "false") usage("--gated-ffn must be true or false");
  if (a.bias != "true" && a.bias != "false") usage("--bias must be true or false");
  if (a.kv_heads < 0 || (a.kv_heads > 0 && 2 % a.kv_heads != 0))
    usage("--kv-heads must divide the 2 heads");
  if (a.optimizer != "adam" && a.optimizer != "adamw") usage("--optimizer must be adam or adamw");
  if (a.share != "true" && a.share != "false") usage("--share-embeddings must be true or false");
  if (a.tupe_relative != "true" && a.tupe_relative != "false")
    usage("--tupe-relative must be true or false");
  if (a.tupe_relative == "true" && (a.model != "mlm" || a.position != "tupe"))
    usage("--tupe-relative true needs --model mlm --position tupe");
  // model.deberta's rules (config/checks.cpp): no buckets (0) or an even
  // count of at least 4, and a reach beyond the exact distances.
  const bool deberta_buckets_ok =
      a.deberta_buckets == 0 || (a.deberta_buckets >= 4 && a.deberta_buckets % 2 == 0 &&
                                 a.deberta_max_relative > a.deberta_buckets / 2 + 1);
  if (!deberta_buckets_ok || a.deberta_max_relative < 1)
    usage(
        "--deberta-buckets must be 0 or even and at least 4, --deberta-max-relative positive "
        "and above half the buckets plus 1");
  if (a.position == "deberta" && a.model != "mlm")
    usage("--position deberta needs --model mlm (DeBERTa is built for the BERT encoder)");
  // BERT is post-LN (model.norm pre is refused for the tasks that build it).
  if (a.model == "mlm" && a.norm != "post") usage("--model mlm needs --norm post");
  if (a.model == "mlm") return run_mlm(a);
  return a.model == "lm" ? run_lm(a) : run_seq2seq(a);
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
