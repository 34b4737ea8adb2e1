#include "models/model_config.h"

#include <fmt/format.h>

#include "config/tasks.h"
#include "core/error.h"
#include "nn/position.h"

namespace rotor::models {

rope::Params rope_params(const ModelConfig& m) {
  rope::Params p = m.rope;
  if (p.original_max_positions <= 0) p.original_max_positions = m.max_positions;
  return p;
}

std::string rope_summary(const ModelConfig& m) {
  const rope::Params& r = m.rope;
  std::string scaling = "no scaling";
  if (r.scaling != rope::Scaling::None) {
    scaling = fmt::format("{} x{}", to_string(r.scaling), r.factor);
    if (r.scaling == rope::Scaling::DynamicNtk || r.scaling == rope::Scaling::Yarn ||
        r.scaling == rope::Scaling::Llama3)
      scaling += fmt::format(" of {} positions", rope_params(m).original_max_positions);
    if (r.scaling == rope::Scaling::Llama3)
      scaling +=
          fmt::format(" (frequency factors {} and {})", r.low_freq_factor, r.high_freq_factor);
  }
  return fmt::format("theta {}, fraction {}, layout {}, {}", r.theta, r.fraction,
                     to_string(r.layout), scaling);
}

std::string rope_off_default(const rope::Params& r) {
  const rope::Params d;
  if (r.theta != d.theta) return fmt::format("model.rope.theta is {}", r.theta);
  if (r.fraction != d.fraction) return fmt::format("model.rope.fraction is {}", r.fraction);
  if (r.layout != d.layout) return fmt::format("model.rope.layout is {}", to_string(r.layout));
  if (r.scaling != d.scaling) return fmt::format("model.rope.scaling is {}", to_string(r.scaling));
  return "";
}

namespace {

// The layer options every model reads the same way (train.checkpoint_activations
// included: it is how the layers keep their activations, a training option
// that changes no result).
nn::LayerOptions layer_options(const Config& c) {
  const ModelConfig& m = c.model;
  nn::LayerOptions l;
  l.d_model = m.d_model;
  l.n_heads = m.n_heads;
  l.d_ff = m.d_ff;
  l.activation = m.activation;
  l.dropout = static_cast<float>(m.dropout);
  l.attention_dropout = static_cast<float>(m.attention_dropout);
  l.activation_dropout = static_cast<float>(m.activation_dropout);
  l.post_norm = m.norm == NormPlacement::Post;
  l.layer_norm_eps = static_cast<float>(m.layer_norm_eps);
  l.rms_norm = m.norm_type == NormType::RmsNorm;
  l.gated_ffn = m.gated_ffn;
  l.bias = m.bias;
  l.kv_heads = m.kv_heads;
  l.rope = m.position->rotates_qk;
  l.rope_params = rope_params(m);
  l.alibi = m.position->alibi;
  l.xl = m.position->xl_terms;
  l.t5_buckets = m.t5.buckets;
  l.t5_max_distance = m.t5.max_distance;
  l.impl = c.attention.impl;
  l.rope_in_kernel = c.attention.rope_in_kernel;
  const AttentionConfig& a = c.attention;
  l.attention_kind = a.kind;
  l.linear_attention.feature_map = a.feature_map;
  l.linear_attention.features = a.features;
  l.linear_attention.feature_redraw = a.feature_redraw;
  l.linear_attention.rope = a.linear_rope;
  l.linear_attention.eps = static_cast<float>(a.linear_eps);
  l.linear_attention.seed = static_cast<uint64_t>(c.seed);
  l.checkpoint = c.train.checkpoint_activations;
  return l;
}

}  // namespace

TransformerOptions transformer_options(const Config& c, int64_t vocab_size) {
  TransformerOptions t;
  t.vocab_size = vocab_size;
  t.pad_id = 0;  // SentencePiece models trained by rotor reserve id 0 for <pad>
  t.encoder_layers = c.model.encoder_layers;
  t.decoder_layers = c.model.decoder_layers;
  t.layer = layer_options(c);
  t.position = c.model.position;
  t.max_positions = c.model.max_positions;
  t.scale_embeddings = c.model.scale_embeddings;
  t.share_embeddings = c.model.share_embeddings;
  return t;
}

BertOptions bert_options(const Config& c, int64_t vocab_size) {
  // validate() refuses model.norm: pre for the tasks that build BERT/RoFormer
  // (config/tasks.h), before the run directory is touched.
  ROTOR_CHECK(c.model.norm == NormPlacement::Post, "BERT/RoFormer are post-LN; model.norm is {}",
              to_string(c.model.norm));
  BertOptions b;
  b.vocab_size = vocab_size;
  b.pad_id = 0;
  b.num_layers = c.model.encoder_layers;
  b.layer = layer_options(c);
  b.position = c.model.position;
  b.max_positions = c.model.max_positions;
  b.type_vocab_size = c.model.type_vocab_size;
  b.age_vocab_size = c.model.age_vocab_size;
  b.age_time2vec = c.model.age_embedding == AgeEmbedding::Time2Vec ? c.model.time2vec_dim : 0;
  b.visit_positions = c.model.position_source == PositionSource::Visit;
  b.tupe_relative = c.model.tupe.relative;
  b.deberta.position_buckets = c.model.deberta.position_buckets;
  b.deberta.max_relative_positions = c.model.deberta.max_relative_positions;
  b.init_std = c.model.init_std;
  return b;
}

DecoderLmOptions lm_options(const Config& c, int64_t vocab_size) {
  DecoderLmOptions o;
  o.vocab_size = vocab_size;
  o.pad_id = 0;  // SentencePiece models trained by rotor reserve id 0 for <pad>
  o.num_layers = c.model.decoder_layers;
  o.layer = layer_options(c);
  o.position = c.model.position;
  o.max_positions = c.model.max_positions;
  o.scale_embeddings = c.model.scale_embeddings;
  o.share_embeddings = c.model.share_embeddings;
  return o;
}

BertClassifierOptions bert_classifier_options(const Config& c, int64_t vocab_size) {
  BertClassifierOptions k;
  k.encoder = bert_options(c, vocab_size);
  k.regression = c.data.regression;
  k.multilabel = c.task->labels == LabelMode::Multi;
  k.num_labels = c.data.regression ? 1 : static_cast<int64_t>(c.data.labels.size());
  if (c.data.choices > 0 && c.task->labels == LabelMode::Single) {  // one score per choice
    k.num_labels = 1;
    k.choices = c.data.choices;
  }
  if (k.num_labels < 1 && k.multilabel)
    ROTOR_FAIL("data.labels: task multilabel needs its label vocabulary");
  if (k.num_labels < 1)
    ROTOR_FAIL("data.labels: task classification needs the class labels (or data.regression)");
  k.dropout = static_cast<float>(c.model.dropout);
  k.label_attention = c.model.classifier_head == ClassifierHead::LabelAttention;
  return k;
}

HfEncoderOptions hf_encoder_options(const Config& c) {
  const ModelConfig& m = c.model;
  HfEncoderOptions h;
  h.position = m.position;
  h.prefix = std::string(m.position->hf.family);
  h.model_type =
      m.position->hf.model_type.empty() ? h.prefix : std::string(m.position->hf.model_type);
  h.rope = m.rope;
  h.deberta_buckets = m.deberta.position_buckets;
  h.deberta_max_relative = m.deberta.max_relative_positions;
  h.d_model = m.d_model;
  h.num_layers = m.encoder_layers;
  h.n_heads = m.n_heads;
  h.d_ff = m.d_ff;
  h.max_positions = m.max_positions;
  h.type_vocab_size = m.type_vocab_size;
  h.activation = m.activation;
  h.dropout = m.dropout;
  h.attention_dropout = m.attention_dropout;
  h.activation_dropout = m.activation_dropout;
  h.layer_norm_eps = m.layer_norm_eps;
  h.init_std = m.init_std;
  return h;
}

HfLmOptions hf_lm_options(const Config& c) {
  const ModelConfig& m = c.model;
  HfLmOptions h;
  h.position = m.position;
  h.model_type = std::string(m.position->hf.causal_lm);
  h.rms_norm = m.norm_type == NormType::RmsNorm;
  if (m.position->rotates_qk && h.rms_norm) h.model_type = "llama";
  h.gated_ffn = m.gated_ffn;
  h.bias = m.bias;
  h.kv_heads = m.kv_heads > 0 ? m.kv_heads : m.n_heads;
  h.rope = m.rope;
  h.d_model = m.d_model;
  h.num_layers = m.decoder_layers;
  h.n_heads = m.n_heads;
  h.d_ff = m.d_ff;
  h.max_positions = m.max_positions;
  h.activation = m.activation;
  h.post_norm = m.norm == NormPlacement::Post;
  h.scale_embeddings = m.scale_embeddings;
  h.share_embeddings = m.share_embeddings;
  h.dropout = m.dropout;
  h.attention_dropout = m.attention_dropout;
  h.activation_dropout = m.activation_dropout;
  h.layer_norm_eps = m.layer_norm_eps;
  return h;
}

}  // namespace rotor::models
