// The causal LM of task lm (models/decoder_lm.h) as a Hugging Face model,
// both ways: `rotor export --format hf` writes it (export_hf_lm) and
// model.init_from reads it (import_hf_lm); checkpoint/export_hf.h and
// checkpoint/import_hf.h hand task lm over to these.
//
//   model.position rope     -> GPTNeoXForCausalLM, use_parallel_residual false
//                              (x + attn(ln1(x)), then + mlp(ln2(.)): rotor's
//                              pre-LN layer), rotary_pct = model.rope.fraction,
//                              rotary_emb_base = model.rope.theta, rope_scaling
//                              {type linear|dynamic, factor} for
//                              model.rope.scaling linear | dynamic_ntk (dynamic
//                              with original_max_positions 0 or max_positions,
//                              as Hugging Face reads it), and the same as
//                              transformers 5's rope_parameters {rope_type,
//                              rope_theta, partial_rotary_factor, factor}; the
//                              import reads whichever a file has (the values of
//                              both must agree); ntk and yarn have no GPT-NeoX
//                              (4.36) counterpart: one line. GPT-NeoX
//                              rotates the halves (i, i + R/2) of the first R
//                              dims of a head: model.rope.layout half is that,
//                              its rows copied; under layout interleaved (pairs
//                              (2i, 2i + 1), the same angles) the query and key
//                              rows of each head are permuted (rotor's row 2i ->
//                              i, 2i + 1 -> R/2 + i, rows >= R kept). q, k, v
//                              are fused into query_key_value, [heads, 3, D] rows.
//   model.position rope with model.norm_type rms_norm
//                           -> LlamaForCausalLM: model.gated_ffn true (gate_proj
//                              = fc1_gate, up_proj = fc1, down_proj = fc2),
//                              model.bias false (attention_bias and mlp_bias
//                              false), model.rope.fraction 1,
//                              num_key_value_heads = model.kv_heads, rms_norm_eps
//                              = model.layer_norm_eps, rope_theta and
//                              rope_scaling / rope_parameters as for GPT-NeoX;
//                              q_proj and k_proj rows in the halves layout as
//                              GPT-NeoX's (every dimension rotated).
//   model.position learned  -> GPT2LMHeadModel: Conv1D weights stored [in, out]
//                              (rotor's [out, in] transposed), c_attn = [q | k | v]
//                              columns.
//   sinusoidal, none, model.norm post and attention.kind linear have no such
//   Hugging Face model: one line naming the setting.
//
// Both families compute rotor's model but for the embedding scale: rotor
// multiplies the token embedding by sqrt(d_model) (model.scale_embeddings)
// and they do not. The export always writes tie_word_embeddings false with
// the input table times the scale (in f32, exactly rotor's product) and the
// output table as rotor's output projection (the token table when tied). The
// import takes a tied model's table from the output and requires the input
// one to be its scaled copy (1e-5); so rotor -> Hugging Face -> rotor is
// bitwise for a tied model and for any model without the scale, or with a
// scale that is a power of two (d_model 16, 64, 256, ...). An untied model
// with another scale gets the float whose product with the scale is the
// stored value: its logits are bitwise rotor's, and the table is where one
// float has that product (else it differs in the last bit of some entries).
//
// hidden_act / activation_function: rotor's gelu is the tanh approximation,
// "gelu_new"; silu is "silu". Llama's model.dropout has no counterpart (a note). Dropouts:
// model.dropout is hidden_dropout (GPT-NeoX) or resid_pdrop and embd_pdrop (GPT-2),
// model.attention_dropout attention_dropout / attn_pdrop; model.activation_dropout has no
// counterpart (a note). config.json's eos_token_id is the end-of-text token
// between documents (data/lm.h), bos_token_id and pad_token_id rotor's.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "checkpoint/export_hf.h"
#include "checkpoint/import_hf.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "models/model_config.h"

namespace rotor::checkpoint {

// The model of task-lm `config` as Hugging Face holds it, or rotor::Error
// ("WHAT: model.norm is post; ...") for a setting it cannot hold.
models::HfLmOptions require_hf_lm(const Config& config, const std::string& what);

// config.json of the causal LM (GPT-NeoX or GPT-2 keys).
nlohmann::ordered_json hf_lm_config(const Config& config, int64_t vocab_size);

// rotor's task-lm weights -> the Hugging Face tensors; every parameter of the
// model `config` describes must be there with its shape.
NamedTensors hf_lm_state_dict(const Config& config, const NamedTensors& weights);

// Writes OUTPUT_DIR from the checkpoint directory DIR (config `config`).
HfExportResult export_hf_lm(const Config& config, const std::string& dir,
                            const std::string& output_dir);

// Checks config.json against `config` and the tokenizer's vocabulary size.
void check_hf_lm_config(const nlohmann::ordered_json& hf, const Config& config, int64_t vocab_size,
                        const std::string& where, std::vector<std::string>* notes = nullptr);

// Loads the Hugging Face directory DIR into `store` (the allocated
// parameters of the DecoderLM of `config`); every parameter comes from DIR.
HfImportResult import_hf_lm(const std::string& dir, const Config& config,
                            nn::ParameterStore& store);

// ---- the mapping, shared by the export and the import ----------------------------

// How a Hugging Face tensor is made of rotor parameters.
enum class HfLmOp {
  Copy,       // the same values
  Transpose,  // a GPT-2 Conv1D weight: rotor's [out, in] transposed
  FuseNeox,   // query_key_value from q, k, v: rows [heads, 3, head_dim], q/k rows halved
  FuseGpt2,   // c_attn from q, k, v: [q | k | v] (weights transposed to [in, 3 d])
  RopeRows,   // a Llama q_proj / k_proj: each head's rows in the halves layout
};
struct HfLmLink {
  std::string hf;
  std::vector<std::string> rotor;  // one parameter, or q, k, v
  HfLmOp op;
};
// Every layer tensor and the final LayerNorm (the embeddings and the output
// projection are the callers').
std::vector<HfLmLink> hf_lm_links(const models::HfLmOptions& m);
// The names of the token tables and, for GPT-2, the positions.
struct HfLmEmbeddingNames {
  std::string input, output, positions;  // positions "" for GPT-NeoX
};
HfLmEmbeddingNames hf_lm_embedding_names(const models::HfLmOptions& m);

// The Hugging Face tensor of `link` from rotor's tensors (in link.rotor's
// order), and back: rotor's tensors of the given shapes from it (m: the heads
// and the rotation's layout).
Tensor hf_lm_forward(const HfLmLink& link, const std::vector<Tensor>& rotor,
                     const models::HfLmOptions& m);
std::vector<Tensor> hf_lm_backward(const HfLmLink& link, const Tensor& hf,
                                   const std::vector<Shape>& shapes, const models::HfLmOptions& m);

// rotor's embedding scale: sqrt(d_model) as the model multiplies by it, or 1.
float hf_lm_embedding_scale(const models::HfLmOptions& m);

}  // namespace rotor::checkpoint
