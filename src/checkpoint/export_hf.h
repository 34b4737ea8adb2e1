// `rotor export --format hf`: a task-mlm checkpoint -> a Hugging Face model
// directory that transformers loads with AutoModelForMaskedLM.from_pretrained;
// a task-classification checkpoint -> one that AutoModelForSequenceClassification
// loads (models/bert_classifier.h: the pooler or RoFormer's head, the
// classifier, id2label from data.labels, problem_type regression or
// single_label_classification; no MLM head):
//
//   config.json              BertConfig (position learned | sinusoidal | none),
//                            RoFormerConfig (position rope) or DebertaV2Config
//                            (position deberta: relative_attention, share_att_key,
//                            pos_att_type p2c|c2p, norm_rel_ebd layer_norm, no
//                            position_biased_input, legacy head), architectures
//                            [BertForMaskedLM | RoFormerForMaskedLM |
//                            DebertaV2ForMaskedLM] (or ...ForSequenceClassification)
//   model.safetensors        the weights under their Hugging Face names (rotor
//                            already uses them, but DeBERTa-v2's: hf_name) plus
//                            what Hugging Face stores
//                            and rotor does not:
//                              cls.predictions.decoder.weight = word embeddings (tied, mlm)
//                              cls.predictions.decoder.bias   = cls.predictions.bias (mlm)
//                              bert.embeddings.position_embeddings.weight for
//                                sinusoidal (rotor's fixed table) and none (zeros)
//                              bert.embeddings.token_type_embeddings.weight
//                                (zeros [1, d]) when type_vocab_size is 0
//                              roformer.encoder.embed_positions.weight: the fixed
//                                sinusoidal table Hugging Face RoFormer keeps as a
//                                (frozen) parameter, [max_positions, head_dim]
//   tokenizer.json, ...      the run's tokenizer (checkpoint/hf_tokenizer.h), which
//   spiece.model             AutoTokenizer loads in transformers 4.x and 5.x: rotor's
//                            ids, [CLS] a [SEP] (b [SEP]) with token types; the
//                            SentencePiece model itself as spiece.model (absent for
//                            a byte tokenizer), which model.init_from reads back.
//
// A task-lm checkpoint exports as GPT-NeoX or GPT-2 (checkpoint/hf_lm.h).
//
// Hugging Face's GELU "gelu_new" is rotor's tanh approximation. RoFormer's
// rotary layout (interleaved pairs of every dimension, theta_i =
// 10000^(-2i/d), unscaled) is model.rope's default, which the export and
// model.init_from require.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "core/io.h"
#include "models/model_config.h"

namespace rotor::checkpoint {

// config.json for a task-mlm or task-classification config and vocabulary
// size (keys in Hugging Face's order).
nlohmann::ordered_json hf_config(const Config& config, int64_t vocab_size);

// Hugging Face's hidden_act for rotor's activation ("gelu_new": rotor's GELU
// is the tanh approximation; "relu"; "silu").
const char* hf_activation(ops::Activation a);
// Checks config.json's activation `act` (under `key`) against `a`: one line
// ("WHERE: KEY is ACT, but model.activation is A") where it computes
// something else; gelu, the erf one, runs as rotor's tanh GELU with a note.
void check_hf_activation(const std::string& key, const std::string& act, ops::Activation a,
                         const std::string& where, std::vector<std::string>* notes);

// Refuses (rotor::Error, "WHAT: ...") the layer settings Hugging Face BERT,
// RoFormer and DeBERTa-v2 cannot hold: RMSNorm, a gated feed-forward,
// bias-free layers and grouped key/value heads.
void require_bert_layers(const Config& config, const std::string& what);

// rotor weights (as model.safetensors stores them) -> Hugging Face tensors.
// Checks that every parameter of the model `config` describes is present with
// its shape; throws rotor::Error naming the first that is not.
NamedTensors hf_state_dict(const Config& config, const NamedTensors& weights);

// The Hugging Face name of rotor parameter NAME in an encoder export: the
// same name, but for DeBERTa-v2 (model.position deberta): bert. -> deberta.,
// attention.self.{query,key,value} -> {query,key,value}_proj, and the
// classifier's bert.pooler.dense -> pooler.dense (its ContextPooler).
std::string hf_name(const models::HfEncoderOptions& m, const std::string& name);

// Hugging Face RoFormer's fixed table [n_pos, dim]: [sin(p w_j) | cos(p w_j)],
// w_j = 10000^(-2j/dim), j < dim/2 (the angles rotor's RoPE uses).
Tensor roformer_sinusoid(int64_t n_pos, int64_t dim);

struct HfExportResult {
  std::string model_type;          // "bert" | "roformer" | "deberta-v2" (task lm: hf_lm.h)
  std::vector<std::string> files;  // written, relative to the output dir
  std::vector<std::string> notes;  // things a user should know
};

// Reads CHECKPOINT (a checkpoint directory or a run directory: its
// checkpoint_last) and writes the Hugging Face directory OUTPUT_DIR whole or
// not at all (core/io.h write_directory: an earlier export there is replaced
// whole, a directory holding other files is refused, a concurrent writer
// fails naming the holder). Weights that are not finite are an error naming
// the tensor, before anything is written.
HfExportResult export_hf(const std::string& checkpoint, const std::string& output_dir);

// How an export writes its directory: the names it may replace there.
DirectoryWriter hf_export_writer();

// What the exported tokenizer puts around a text (and a second one):
// checkpoint/hf_tokenizer.h.
enum class HfTokenizerTemplate {
  Encoder,   // [CLS] a [SEP] (b [SEP]): task mlm and classification
  CausalLm,  // boundary a (boundary b): task lm
};

// The steps every export shares: checkpoint DIR's weights loaded (refused,
// before anything is written, when not finite), turned into Hugging Face
// tensors by `to_hf` (the input table first), and written whole into
// OUTPUT_DIR with config.json (`config_of` the vocabulary size: the first
// tensor's rows) and the tokenizer files of DIR/spm.model.
HfExportResult write_hf_export(
    const std::string& dir, const std::string& output_dir, const std::string& model_type,
    const std::function<NamedTensors(const NamedTensors&)>& to_hf,
    const std::function<nlohmann::ordered_json(int64_t vocab_size)>& config_of,
    HfTokenizerTemplate tokenizer, int64_t max_positions);

}  // namespace rotor::checkpoint
