// `model.init_from: DIR`: a local Hugging Face BERT/RoFormer/DeBERTa-v2 directory
// initializes rotor's model (task mlm, classification or multilabel), the reverse of
// checkpoint/export_hf.h:
//
//   DIR/config.json        checked against the rotor config before any weight
//                          is read: model_type (bert for position learned,
//                          roformer for rope, deberta-v2 for deberta: its
//                          relative settings as export_hf.h writes them,
//                          position_buckets and max_relative_positions equal
//                          to model.deberta's), vocab_size (the tokenizer's),
//                          hidden_size, num_hidden_layers, num_attention_heads,
//                          intermediate_size, hidden_act (gelu / gelu_new /
//                          gelu_pytorch_tanh for gelu, relu), layer_norm_eps,
//                          max_position_embeddings, type_vocab_size; BERT's
//                          absolute positions, RoFormer's embedding_size =
//                          hidden_size and rotary_value false; tied word
//                          embeddings. A mismatch is one line naming both values.
//   DIR/model.safetensors  or the shards of model.safetensors.index.json,
//                          each tensor exactly in the shard its weight_map
//                          names (checkpoint/hf_index.h). A pickled
//                          pytorch_model.bin is refused (unpickling runs code
//                          from the file).
//
// Every encoder parameter (`bert.` / `roformer.` / `deberta.` but the pooler;
// DeBERTa-v2's names through export_hf.h's hf_name) must be in
// the directory with its shape. Head parameters (the MLM head, the pooler, the
// classifier) are loaded when the directory has them and keep their fresh
// initialization otherwise, as Hugging Face's from_pretrained does; the
// classifier's label rows by label name, config.json's id2label against the
// task's labels (checkpoint/label_rows.h). F16 and
// BF16 weights are widened to F32; Hugging Face's legacy LayerNorm names
// (gamma, beta) are read too. Tensors the model has no place for (an NSP
// head, the tied decoder copy, RoFormer's sinusoid table) are skipped.
//
// Task lm reads a GPT-NeoX or GPT-2 directory instead (checkpoint/hf_lm.h);
// a rotor checkpoint (run directory, RUN:best, checkpoint directory) is read
// by checkpoint/init_checkpoint.h.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "nn/parameters.h"

namespace rotor::checkpoint {

struct HfImportResult {
  std::string model_type;           // "bert" | "roformer"
  int64_t loaded = 0;               // parameters read from the directory
  std::vector<std::string> fresh;   // head parameters the directory lacks (kept as initialized)
  std::vector<std::string> unused;  // tensors of the directory the model does not read
  std::vector<std::string> notes;   // things a user should know
  std::string summary(const std::string& dir) const;  // one log line
};

// Checks config.json (parsed; `where` names it in messages) against `config`
// and the tokenizer's vocabulary size; throws rotor::Error on a mismatch.
void check_hf_config(const nlohmann::ordered_json& hf, const Config& config, int64_t vocab_size,
                     const std::string& where, std::vector<std::string>* notes = nullptr);

// Loads DIR into `store` (allocated: the model of `config` registered its
// parameters). `labels` names the classifier's outputs in row order (the
// task's labels; empty: unnamed), by which its label rows are read
// (checkpoint/label_rows.h). Throws rotor::Error naming the file and tensor
// for anything missing, misshapen or not finite.
HfImportResult import_hf(const std::string& dir, const Config& config, nn::ParameterStore& store,
                         const std::vector<std::string>& labels = {});

}  // namespace rotor::checkpoint
