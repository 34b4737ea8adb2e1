// The one place where an experiment config becomes model options: the
// encoder-decoder of task translation, the BERT/RoFormer encoder of task mlm
// and its classifier of task classification, the causal LM of task lm, and
// these models as Hugging Face's config.json states them. Everything that builds or describes a
// model from a config (training, the bench, decoding, prediction, export, import) goes through
// these functions; nothing else reads the model.* keys for it.
#pragma once

#include <cstdint>
#include <string>

#include "config/config.h"
#include "models/bert.h"
#include "models/bert_classifier.h"
#include "models/decoder_lm.h"
#include "models/transformer.h"

namespace rotor::models {

// model.rope as the rotation's settings (core/rope.h), whatever the position
// encoding (only model.position rope reads them); original_max_positions 0
// becomes model.max_positions.
rope::Params rope_params(const ModelConfig& model);
// "theta 10000, fraction 1, layout interleaved, no scaling" (scaling:
// "linear x4", "yarn x4 of 128 positions"), for logs.
std::string rope_summary(const ModelConfig& model);
// "model.rope.theta is 500": the first key of model.rope off its default, or
// "" (RoFormer's rotation: theta 10000, every dimension, interleaved, unscaled).
std::string rope_off_default(const rope::Params& rope);

// The translation model of `config` for a vocabulary of `vocab_size` pieces.
TransformerOptions transformer_options(const Config& config, int64_t vocab_size);

// The masked-LM model of `config`. Throws rotor::Error for a config that
// BERT/RoFormer cannot express (pre-LN).
BertOptions bert_options(const Config& config, int64_t vocab_size);

// The decoder-only causal LM of task lm: model.decoder_layers causal layers,
// the output projection tied to the token embedding with
// model.share_embeddings.
DecoderLmOptions lm_options(const Config& config, int64_t vocab_size);

// The sequence classifier of tasks classification and multilabel: the
// encoder of bert_options, data.labels.size() classes (or one output with
// data.regression; task multilabel: data.labels is its label vocabulary,
// which the task fills in when the config names none), the head's dropout
// model.dropout.
BertClassifierOptions bert_classifier_options(const Config& config, int64_t vocab_size);

// The BERT/RoFormer encoder of tasks mlm and classification with the
// config's values as written (doubles stay doubles, unlike nn::LayerOptions'
// floats), for what Hugging Face's config.json holds: the export writes them
// and model.init_from compares a checkpoint's with them.
struct HfEncoderOptions {
  nn::PositionKind position = nn::PositionKind::Learned;
  std::string prefix;      // position's Hugging Face family: "bert" or "roformer"
  std::string model_type;  // the Hugging Face model_type: prefix, or "deberta-v2"
  rope::Params rope;
  int64_t deberta_buckets = 0, deberta_max_relative = 0;  // model.deberta
  int64_t d_model = 0, num_layers = 0, n_heads = 0, d_ff = 0;
  int64_t max_positions = 0, type_vocab_size = 0;
  ops::Activation activation = ops::Activation::GELU;
  double dropout = 0, attention_dropout = 0, activation_dropout = 0;
  double layer_norm_eps = 0, init_std = 0;
};
HfEncoderOptions hf_encoder_options(const Config& config);

// The causal LM of task lm with the config's values as written, for what a
// Hugging Face GPT-NeoX / GPT-2 config.json holds (checkpoint/hf_lm.h).
struct HfLmOptions {
  nn::PositionKind position = nn::PositionKind::Rope;
  // The Hugging Face causal LM: "llama" for rope with RMSNorm, else the
  // position's ("gpt_neox", "gpt2" or "").
  std::string model_type;
  rope::Params rope;
  int64_t d_model = 0, num_layers = 0, n_heads = 0, d_ff = 0, max_positions = 0;
  ops::Activation activation = ops::Activation::GELU;
  bool post_norm = false, scale_embeddings = true, share_embeddings = true;
  // model.norm_type rms_norm, model.gated_ffn, model.bias, model.kv_heads
  // (resolved: n_heads when 0).
  bool rms_norm = false, gated_ffn = false, bias = true;
  int64_t kv_heads = 0;
  double dropout = 0, attention_dropout = 0, activation_dropout = 0;
  double layer_norm_eps = 0;
};
HfLmOptions hf_lm_options(const Config& config);

}  // namespace rotor::models
