// The causal LM's Hugging Face mapping and config.json (checkpoint/hf_lm.h);
// export_hf_lm.cpp and import_hf_lm.cpp move the tensors.
#include "checkpoint/hf_lm.h"

#include <cmath>

#include "config/tasks.h"
#include "core/error.h"
#include "core/json_io.h"
#include "data/sentencepiece.h"  // kPadId, kBosId, kEosId
#include "nn/position.h"

namespace rotor::checkpoint {

namespace {

using json_io::Json;

// rotor's row of a head's query or key for GPT-NeoX's row j (of head_dim D):
// under the interleaved layout the first half of the R rotated rows holds the
// pairs' first elements, the second their seconds; the half layout is
// GPT-NeoX's own, and rows >= R are not rotated.
int64_t neox_source_row(int64_t j, int64_t D, const rope::Params& r) {
  rope::Params p;
  p.fraction = r.fraction;
  const int64_t R = rope::rotated_dims(p, D);
  if (r.layout == rope::Layout::Half || j >= R) return j;
  return j < R / 2 ? 2 * j : 2 * (j - R / 2) + 1;
}

// Whether model.rope scales the angles (a factor of 1 changes nothing).
bool scaled(const rope::Params& r) {
  return r.scaling != rope::Scaling::None && r.factor != 1.0;
}

int64_t columns(const Shape& s) {
  return s.size() == 2 ? s[1] : 1;
}

// A q or k projection's rows [heads * D, C] in the other layout: Hugging
// Face's row (h, j) is rotor's row (h, neox_source_row(j)); back: the inverse.
std::vector<float> rope_rows(const std::vector<float>& v, const Shape& s,
                             const models::HfLmOptions& m, bool to_rotor) {
  const int64_t D = m.d_model / m.n_heads, C = columns(s), heads = s[0] / D;
  std::vector<float> out(v.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < D; ++j) {
      const int64_t hf = h * D + j, ours = h * D + neox_source_row(j, D, m.rope);
      const int64_t from = to_rotor ? hf : ours, to = to_rotor ? ours : hf;
      std::copy_n(v.begin() + from * C, C, out.begin() + to * C);
    }
  return out;
}

std::vector<float> transposed(const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::vector<float> t(v.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      t[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
  return t;
}

}  // namespace

models::HfLmOptions require_hf_lm(const Config& c, const std::string& what) {
  ROTOR_CHECK(c.task->hf_export == HfExport::CausalLm, "{}: task {} is not lm", what,
              to_string(c.task));
  if (c.attention.kind != nn::AttentionKind::Softmax)
    ROTOR_FAIL(
        "{}: attention.kind is {}, and Hugging Face GPT-NeoX/GPT-2 compute softmax attention", what,
        to_string(c.attention.kind));
  const models::HfLmOptions m = models::hf_lm_options(c);
  if (!m.position->hf.no_export.empty())
    ROTOR_FAIL("{}: model.position is {}: {}", what, m.position.name(), m.position->hf.no_export);
  if (m.model_type.empty())
    ROTOR_FAIL(
        "{}: model.position is {}; Hugging Face has no causal LM with these positions (rope: "
        "GPT-NeoX, learned: GPT-2)",
        what, m.position.name());
  if (m.post_norm)
    ROTOR_FAIL(
        "{}: model.norm is post; Hugging Face GPT-NeoX and GPT-2 are pre-LN with a final "
        "LayerNorm (model.norm: pre)",
        what);
  const std::string family = m.model_type == "llama"      ? "Llama"
                             : m.model_type == "gpt_neox" ? "GPT-NeoX"
                                                          : "GPT-2";
  if (m.model_type == "llama") {
    // LlamaForCausalLM: RMSNorm, a gated MLP, no biases (transformers 4.36
    // has no mlp_bias), every head dimension rotated.
    if (!m.gated_ffn)
      ROTOR_FAIL(
          "{}: model.gated_ffn is false; Hugging Face Llama (rope with model.norm_type rms_norm) "
          "has a gated MLP (model.gated_ffn: true)",
          what);
    if (m.bias)
      ROTOR_FAIL(
          "{}: model.bias is true; Hugging Face Llama's projections and MLP have no biases "
          "(model.bias: false)",
          what);
    if (m.rope.fraction != 1.0)
      ROTOR_FAIL("{}: model.rope.fraction is {}; Hugging Face Llama rotates every head dimension",
                 what, m.rope.fraction);
  } else {
    if (c.model.norm_type != NormType::LayerNorm)
      ROTOR_FAIL(
          "{}: model.norm_type is {}; Hugging Face GPT-2 normalizes with LayerNorm (rope with "
          "rms_norm exports as Llama)",
          what, to_string(c.model.norm_type));
    if (m.gated_ffn)
      ROTOR_FAIL(
          "{}: model.gated_ffn is true; Hugging Face {}'s MLP is not gated (rope with "
          "model.norm_type rms_norm exports as Llama)",
          what, family);
    if (!m.bias)
      ROTOR_FAIL("{}: model.bias is false; Hugging Face {}'s layers have biases", what, family);
    if (m.kv_heads != m.n_heads)
      ROTOR_FAIL(
          "{}: model.kv_heads is {}; Hugging Face {} has a key and value head per query head", what,
          m.kv_heads, family);
    if (m.activation == ops::Activation::SiLU && m.model_type == "gpt2")
      ROTOR_FAIL("{}: model.activation is silu; Hugging Face GPT-2 runs gelu or relu here", what);
  }
  if (m.position->rotates_qk && scaled(m.rope)) {
    const rope::Scaling s = m.rope.scaling;
    const bool llama3 = s == rope::Scaling::Llama3 && m.model_type == "llama";
    if (s != rope::Scaling::Linear && s != rope::Scaling::DynamicNtk && !llama3)
      ROTOR_FAIL(
          "{}: model.rope.scaling is {}; Hugging Face {} scales rotary angles linear or dynamic "
          "(and Llama llama3) only",
          what, to_string(s), family);
    const int original =
        m.rope.original_max_positions > 0 ? m.rope.original_max_positions : m.max_positions;
    if (s == rope::Scaling::DynamicNtk && original != m.max_positions)
      ROTOR_FAIL(
          "{}: model.rope.original_max_positions is {}, but Hugging Face {}'s dynamic "
          "scaling starts at max_position_embeddings = model.max_positions = {}",
          what, m.rope.original_max_positions, family, m.max_positions);
  }
  return m;
}

nlohmann::ordered_json hf_lm_config(const Config& c, int64_t vocab_size) {
  const models::HfLmOptions m = require_hf_lm(c, "export --format hf");
  const std::string act = hf_activation(m.activation);
  // fairseq's embedding init, N(0, d^-1/2), as the range a fresh model would draw from.
  const double init = std::pow(static_cast<double>(m.d_model), -0.5);
  Json j = Json::object();
  // transformers 4.x reads rope_theta / rotary settings and rope_scaling;
  // 5.x writes and reads rope_parameters (and takes a rope_scaling it finds
  // as the same settings): both, with the same values.
  const bool llama3 = scaled(m.rope) && m.rope.scaling == rope::Scaling::Llama3;
  const char* rope_type = !scaled(m.rope)                           ? "default"
                          : llama3                                  ? "llama3"
                          : m.rope.scaling == rope::Scaling::Linear ? "linear"
                                                                    : "dynamic";
  const auto rope_keys = [&](bool partial) {
    Json scaling = Json::object();  // what a scaled rotation adds to both keys
    if (scaled(m.rope)) scaling["factor"] = m.rope.factor;
    if (llama3) {  // Llama 3.1's keys (transformers >= 4.43 and 5.x; 4.36 has no llama3)
      scaling["low_freq_factor"] = m.rope.low_freq_factor;
      scaling["high_freq_factor"] = m.rope.high_freq_factor;
      scaling["original_max_position_embeddings"] =
          m.rope.original_max_positions > 0 ? m.rope.original_max_positions : m.max_positions;
    }
    // 4.x's rope_scaling names its type "type"; Llama 3.1's files "rope_type".
    j["rope_scaling"] = nullptr;
    if (scaled(m.rope)) {
      j["rope_scaling"] = {{llama3 ? "rope_type" : "type", rope_type}};
      j["rope_scaling"].update(scaling);
    }
    j["rope_parameters"] = {{"rope_type", rope_type}, {"rope_theta", m.rope.theta}};
    if (partial) j["rope_parameters"]["partial_rotary_factor"] = m.rope.fraction;
    j["rope_parameters"].update(scaling);
  };
  if (m.model_type == "llama") {
    j["architectures"] = Json::array({"LlamaForCausalLM"});
    j["model_type"] = "llama";
    j["vocab_size"] = vocab_size;
    j["hidden_size"] = m.d_model;
    j["intermediate_size"] = m.d_ff;
    j["num_hidden_layers"] = m.num_layers;
    j["num_attention_heads"] = m.n_heads;
    j["num_key_value_heads"] = m.kv_heads;
    j["head_dim"] = m.d_model / m.n_heads;
    j["hidden_act"] = act;
    j["max_position_embeddings"] = m.max_positions;
    j["rms_norm_eps"] = m.layer_norm_eps;
    j["rope_theta"] = m.rope.theta;
    rope_keys(false);
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["attention_dropout"] = m.attention_dropout;
    j["pretraining_tp"] = 1;
  } else if (m.model_type == "gpt_neox") {
    j["architectures"] = Json::array({"GPTNeoXForCausalLM"});
    j["model_type"] = "gpt_neox";
    j["vocab_size"] = vocab_size;
    j["hidden_size"] = m.d_model;
    j["num_hidden_layers"] = m.num_layers;
    j["num_attention_heads"] = m.n_heads;
    j["intermediate_size"] = m.d_ff;
    j["hidden_act"] = act;
    j["rotary_pct"] = m.rope.fraction;
    j["rotary_emb_base"] = m.rope.theta;
    rope_keys(true);
    j["use_parallel_residual"] = false;
    j["max_position_embeddings"] = m.max_positions;
    j["hidden_dropout"] = m.dropout;
    j["attention_dropout"] = m.attention_dropout;
    j["layer_norm_eps"] = m.layer_norm_eps;
  } else {
    j["architectures"] = Json::array({"GPT2LMHeadModel"});
    j["model_type"] = "gpt2";
    j["vocab_size"] = vocab_size;
    j["n_embd"] = m.d_model;
    j["n_layer"] = m.num_layers;
    j["n_head"] = m.n_heads;
    j["n_inner"] = m.d_ff;
    j["activation_function"] = act;
    j["n_positions"] = m.max_positions;
    j["resid_pdrop"] = m.dropout;
    j["embd_pdrop"] = m.dropout;
    j["attn_pdrop"] = m.attention_dropout;
    j["layer_norm_epsilon"] = m.layer_norm_eps;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
    j["reorder_and_upcast_attn"] = false;
  }
  j["initializer_range"] = init;
  j["bos_token_id"] = data::kBosId;
  j["eos_token_id"] = data::kEosId;
  j["pad_token_id"] = data::kPadId;
  j["tie_word_embeddings"] = false;
  j["use_cache"] = true;
  j["torch_dtype"] = "float32";  // transformers 4.x
  j["dtype"] = "float32";        // 5.x
  return j;
}

std::vector<HfLmLink> hf_lm_links(const models::HfLmOptions& m) {
  const bool neox = m.model_type == "gpt_neox";
  std::vector<HfLmLink> out;
  if (m.model_type == "llama") {  // no biases; RMSNorm weights only
    for (int64_t i = 0; i < m.num_layers; ++i) {
      const std::string r = "model.layers." + std::to_string(i) + ".";
      const std::string h = r;  // Llama's own layer prefix is rotor's
      const auto link = [&](const std::string& hf, const std::string& rotor, HfLmOp op) {
        out.push_back({h + hf + ".weight", {r + rotor + ".weight"}, op});
      };
      link("input_layernorm", "self_attn_layer_norm", HfLmOp::Copy);
      link("self_attn.q_proj", "self_attn.q_proj", HfLmOp::RopeRows);
      link("self_attn.k_proj", "self_attn.k_proj", HfLmOp::RopeRows);
      link("self_attn.v_proj", "self_attn.v_proj", HfLmOp::Copy);
      link("self_attn.o_proj", "self_attn.out_proj", HfLmOp::Copy);
      link("post_attention_layernorm", "final_layer_norm", HfLmOp::Copy);
      link("mlp.gate_proj", "fc1_gate", HfLmOp::Copy);
      link("mlp.up_proj", "fc1", HfLmOp::Copy);
      link("mlp.down_proj", "fc2", HfLmOp::Copy);
    }
    out.push_back({"model.norm.weight", {"model.layer_norm.weight"}, HfLmOp::Copy});
    return out;
  }
  const auto both = [&](const std::string& hf, const std::string& rotor, HfLmOp weight_op) {
    out.push_back({hf + ".weight", {rotor + ".weight"}, weight_op});
    out.push_back({hf + ".bias", {rotor + ".bias"}, HfLmOp::Copy});
  };
  for (int64_t i = 0; i < m.num_layers; ++i) {
    const std::string r = "model.layers." + std::to_string(i) + ".";
    const auto qkv = [&](const char* s) {
      return std::vector<std::string>{r + "self_attn.q_proj." + s, r + "self_attn.k_proj." + s,
                                      r + "self_attn.v_proj." + s};
    };
    if (neox) {
      const std::string h = "gpt_neox.layers." + std::to_string(i) + ".";
      both(h + "input_layernorm", r + "self_attn_layer_norm", HfLmOp::Copy);
      out.push_back({h + "attention.query_key_value.weight", qkv("weight"), HfLmOp::FuseNeox});
      out.push_back({h + "attention.query_key_value.bias", qkv("bias"), HfLmOp::FuseNeox});
      both(h + "attention.dense", r + "self_attn.out_proj", HfLmOp::Copy);
      both(h + "post_attention_layernorm", r + "final_layer_norm", HfLmOp::Copy);
      both(h + "mlp.dense_h_to_4h", r + "fc1", HfLmOp::Copy);
      both(h + "mlp.dense_4h_to_h", r + "fc2", HfLmOp::Copy);
    } else {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      both(h + "ln_1", r + "self_attn_layer_norm", HfLmOp::Copy);
      out.push_back({h + "attn.c_attn.weight", qkv("weight"), HfLmOp::FuseGpt2});
      out.push_back({h + "attn.c_attn.bias", qkv("bias"), HfLmOp::FuseGpt2});
      both(h + "attn.c_proj", r + "self_attn.out_proj", HfLmOp::Transpose);
      both(h + "ln_2", r + "final_layer_norm", HfLmOp::Copy);
      both(h + "mlp.c_fc", r + "fc1", HfLmOp::Transpose);
      both(h + "mlp.c_proj", r + "fc2", HfLmOp::Transpose);
    }
  }
  both(neox ? "gpt_neox.final_layer_norm" : "transformer.ln_f", "model.layer_norm", HfLmOp::Copy);
  return out;
}

HfLmEmbeddingNames hf_lm_embedding_names(const models::HfLmOptions& m) {
  if (m.model_type == "llama") return {"model.embed_tokens.weight", "lm_head.weight", ""};
  if (m.model_type == "gpt_neox") return {"gpt_neox.embed_in.weight", "embed_out.weight", ""};
  return {"transformer.wte.weight", "lm_head.weight", "transformer.wpe.weight"};
}

float hf_lm_embedding_scale(const models::HfLmOptions& m) {
  // As models/decoder_lm.cpp computes it.
  return m.scale_embeddings ? std::sqrt(static_cast<float>(m.d_model)) : 1.0f;
}

Tensor hf_lm_forward(const HfLmLink& link, const std::vector<Tensor>& rotor,
                     const models::HfLmOptions& m) {
  const int64_t n_heads = m.n_heads;
  const Shape& s = rotor.at(0).shape();
  switch (link.op) {
    case HfLmOp::Copy:
      return Tensor::from_floats(rotor[0].to_floats(), s);
    case HfLmOp::Transpose:
      return Tensor::from_floats(transposed(rotor[0].to_floats(), s[0], s[1]), {s[1], s[0]});
    case HfLmOp::RopeRows:
      return Tensor::from_floats(rope_rows(rotor[0].to_floats(), s, m, false), s);
    case HfLmOp::FuseNeox:
    case HfLmOp::FuseGpt2: {
      const int64_t d = s[0], C = columns(s), D = d / n_heads;
      std::vector<std::vector<float>> part;
      for (const Tensor& t : rotor) part.push_back(t.to_floats());
      std::vector<float> fused(static_cast<size_t>(3 * d * C));
      for (int64_t p = 0; p < 3; ++p)
        for (int64_t row = 0; row < d; ++row) {
          int64_t to = p * d + row, from = row;  // GPT-2: [q | k | v]
          if (link.op == HfLmOp::FuseNeox) {
            const int64_t h = row / D, j = row % D;
            to = (h * 3 + p) * D + j;
            from = h * D + (p < 2 ? neox_source_row(j, D, m.rope) : j);
          }
          std::copy_n(part[static_cast<size_t>(p)].begin() + from * C, C, fused.begin() + to * C);
        }
      if (link.op == HfLmOp::FuseGpt2 && s.size() == 2)
        return Tensor::from_floats(transposed(fused, 3 * d, C), {C, 3 * d});
      return Tensor::from_floats(fused, s.size() == 2 ? Shape{3 * d, C} : Shape{3 * d});
    }
  }
  ROTOR_FAIL("unknown Hugging Face tensor op");
}

std::vector<Tensor> hf_lm_backward(const HfLmLink& link, const Tensor& hf,
                                   const std::vector<Shape>& shapes, const models::HfLmOptions& m) {
  const int64_t n_heads = m.n_heads;
  const Shape& s = shapes.at(0);
  std::vector<float> v = hf.to_floats();
  switch (link.op) {
    case HfLmOp::Copy:
      return {Tensor::from_floats(v, s)};
    case HfLmOp::Transpose:
      return {Tensor::from_floats(transposed(v, s[1], s[0]), s)};
    case HfLmOp::RopeRows:
      return {Tensor::from_floats(rope_rows(v, s, m, true), s)};
    case HfLmOp::FuseNeox:
    case HfLmOp::FuseGpt2: {
      const int64_t d = s[0], C = columns(s), D = d / n_heads;
      if (link.op == HfLmOp::FuseGpt2 && s.size() == 2) v = transposed(v, C, 3 * d);
      std::vector<std::vector<float>> part(3, std::vector<float>(static_cast<size_t>(d * C)));
      for (int64_t p = 0; p < 3; ++p)
        for (int64_t row = 0; row < d; ++row) {
          int64_t from = p * d + row, to = row;
          if (link.op == HfLmOp::FuseNeox) {
            const int64_t h = row / D, j = row % D;
            from = (h * 3 + p) * D + j;
            to = h * D + (p < 2 ? neox_source_row(j, D, m.rope) : j);
          }
          std::copy_n(v.begin() + from * C, C, part[static_cast<size_t>(p)].begin() + to * C);
        }
      std::vector<Tensor> out;
      for (size_t p = 0; p < 3; ++p) out.push_back(Tensor::from_floats(part[p], shapes.at(p)));
      return out;
    }
  }
  ROTOR_FAIL("unknown Hugging Face tensor op");
}

}  // namespace rotor::checkpoint
