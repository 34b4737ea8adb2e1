// Position encodings as a registry (docs/design.md, "Adding a position
// encoding"). Each encoding is one file in nn/positions/ that defines its
// PositionScheme -- the traits below and the behaviour they point to -- and
// one entry in the list of nn/positions/registry.cpp. The position layer
// (nn::PositionEncoding), the models, the config checks and the Hugging Face
// export and import ask a scheme's traits; none compares with an encoding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "nn/kinds.h"

namespace rotor::nn {

// What an encoding's config rule sees (config/checks.cpp fills it in).
struct PositionShape {
  int64_t d_model = 0, n_heads = 0, max_positions = 0;
  int64_t max_length = 0;       // the longest sequence the task's data holds
  std::string_view length_key;  // the key bounding it, e.g. data.max_len
  int64_t added_tokens = 0;     // what the task adds to it (translation: eos/bos)
};

// A rule a config breaks: the key it names, what is wrong, and the other keys
// involved (config/checks.cpp locates the first one written).
struct PositionProblem {
  std::string key, message;
  std::vector<std::string> related;
};

// How the models under an encoding map onto Hugging Face: the BERT/RoFormer
// encoder (tasks mlm and classification) and the causal LM (task lm).
struct HfPositions {
  // "bert" or "roformer": the prefix of the parameter names, the classifier's
  // head, and the model_type `rotor export --format hf` writes.
  std::string_view family = "bert";
  // The Hugging Face model_type where it is not `family`: "deberta-v2", whose
  // names differ from rotor's BERT names (checkpoint/export_hf.h hf_name).
  std::string_view model_type;
  // What the positions of a `family` checkpoint are, where model.init_from
  // reads them into this encoding ("learned absolute positions"); "" where it
  // does not (another encoding of the family does).
  std::string_view imports;
  // Export's note where the family's position table is a stand-in: the
  // encoding adds no parameter table, so the export writes the table it adds
  // (its fixed_table) or zeros.
  std::string_view export_note;
  // The Hugging Face model_type the decoder-only LM (task lm) under this
  // encoding exports as and model.init_from reads into it: "gpt_neox"
  // (rotary) or "gpt2" (a learned table); "" where Hugging Face has no causal
  // LM with these positions (checkpoint/hf_lm.h).
  std::string_view causal_lm;
  // Why `rotor export --format hf` refuses models under this encoding (""
  // where it exports them).
  std::string_view no_export;
};

struct PositionScheme {
  std::string_view name;  // its model.position spelling
  // A [max_positions, d] table added to the token embeddings (so sequences
  // are bounded by model.max_positions): a parameter drawn from N(0, std) and
  // trained (learned_table), or computed once (fixed_table).
  bool learned_table = false;
  Tensor (*fixed_table)(int64_t max_positions, int64_t dim) = nullptr;
  // Self-attention rotates q and k by their positions (RoFormer eq. 34,
  // model.rope's settings); cross-attention never does.
  bool rotates_qk = false;
  // Self-attention adds ALiBi's per-head linear bias to its scores, inside
  // the core (core/alibi.h, ops::AttentionOptions::alibi); cross-attention
  // never does.
  bool alibi = false;
  // Self-attention adds T5's learned relative bias to its scores, inside the
  // core (core/t5_bias.h, nn/relative_bias.h): the model keeps one [buckets,
  // H] table per stack of layers (model.t5's settings); cross-attention
  // never does.
  bool relative_bias = false;
  // Self-attention adds Transformer-XL's relative terms to its scores: each
  // layer projects the distances' sinusoids and has its own u and v per
  // head (nn::MultiHeadAttentionOptions::xl); cross-attention never does.
  bool xl_terms = false;
  // TUPE's untied positional correlation (nn/tupe.h): a table of its own
  // (model.max_positions rows, not added to the embeddings), projected and
  // correlated once per forward and added by every self-attention of the
  // BERT encoder, the content term rescaled to 1/sqrt(2 D).
  bool untied_correlation = false;
  // DeBERTa's disentangled attention (nn/deberta.h): relative embeddings
  // shared by the BERT encoder's layers, projected by each layer's own query
  // and key projections (model.deberta's settings).
  bool disentangled = false;
  // Built for the BERT encoder alone (tupe, deberta): the config refuses it
  // for the other tasks' models, and they refuse it at construction.
  bool bert_encoder_only = false;
  HfPositions hf;
  // Its own config rule, or nullptr.
  std::optional<PositionProblem> (*check)(const PositionShape&) = nullptr;

  bool adds_to_embeddings() const { return learned_table || fixed_table != nullptr; }
};

// Whether the encoding reads rows of a [max_positions, d] table (added to the
// embeddings, or TUPE's), which bounds a sequence's length (RoPE, ALiBi,
// T5, Transformer-XL and none have no such bound).
inline bool has_position_table(PositionKind k) {
  return k->adds_to_embeddings() || k->untied_correlation;
}

// The rule of every encoding with a table (learned, sinusoidal): the longest
// sequence, with what the task adds, has a row.
std::optional<PositionProblem> table_length_problem(const PositionShape& s, std::string_view name);

}  // namespace rotor::nn
