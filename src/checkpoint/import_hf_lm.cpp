// model.init_from for task lm: a Hugging Face LlamaForCausalLM,
// GPTNeoXForCausalLM or GPT2LMHeadModel directory (checkpoint/hf_lm.h)
// initializes the causal LM. Llama's keys are checked as GPT-NeoX's, with
// num_key_value_heads, rms_norm_eps, attention_bias / mlp_bias false and
// every dimension rotated (check_llama_config).
//
// config.json is checked before any weight is read: model_type (gpt_neox for
// model.position rope, gpt2 for learned), vocab_size (the tokenizer's), the
// sizes, the activation (gelu_new / gelu_pytorch_tanh for gelu; gelu, the
// erf one, with a note), the LayerNorm epsilon; GPT-NeoX's
// use_parallel_residual false and the rotation as model.rope (check_neox_rope:
// transformers 5's rope_parameters, or 4.x's rotary_pct, rotary_emb_base and
// rope_scaling; default, linear and dynamic); GPT-2's n_positions =
// model.max_positions and its standard attention scaling. A mismatch is one
// line naming both values. Every parameter comes from the directory (there is
// no head to keep fresh); tensors the model has no place for are listed as
// unused.
#include <cmath>
#include <filesystem>
#include <set>
#include <tuple>

#include "checkpoint/hf_lm.h"
#include "checkpoint/hf_weights.h"
#include "core/error.h"
#include "core/json_io.h"
#include "nn/position.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

using json_io::Json;

// The float x whose product with `scale` (in f32, as the model computes it)
// is y, when there is one; otherwise the nearest quotient.
float unscale(float y, float scale) {
  const float x = y / scale;
  if (x * scale == y) return x;
  for (const float c : {std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)})
    if (c * scale == y) return c;
  return x;
}

// One rotary setting of a GPT-NeoX config.json, found under any of the keys
// transformers versions use for it: `keys` are paths (an object, then a key
// in it), newest first. Every key present must give the same value: a file
// whose 4.x and 5.x keys disagree is computed differently by the two
// versions, and rotor does not pick one.
struct Found {
  std::string key;  // where the value came from ("" = transformers' default)
  Json value;
};
Found find_setting(const Json& j, std::initializer_list<std::pair<const char*, const char*>> keys,
                   const std::string& where) {
  Found found;
  for (const auto& [object, key] : keys) {
    const Json* in = &j;
    std::string path = key;
    if (object) {
      if (!j.contains(object) || !j.at(object).is_object()) continue;
      in = &j.at(object);
      path = std::string(object) + "." + key;
    }
    if (!in->contains(key) || in->at(key).is_null()) continue;
    const Json& v = in->at(key);
    if (!found.key.empty() && v != found.value &&
        !(v.is_number() && found.value.is_number() && v.get<double>() == found.value.get<double>()))
      ROTOR_FAIL(
          "{}: {} is {} but {} is {}; transformers 4.x and 5.x would read different models "
          "from this file",
          where, found.key, found.value.dump(), path, v.dump());
    if (found.key.empty()) found = {path, v};
  }
  return found;
}

double number(const Found& f, double fallback, const std::string& where) {
  if (f.key.empty()) return fallback;
  if (!f.value.is_number())
    ROTOR_FAIL("{}: {} must be a number, got {}", where, f.key, f.value.dump());
  return f.value.get<double>();
}

std::string named(const Found& f, const char* fallback) {
  return f.key.empty() ? fmt::format("{} (absent: transformers' default)", fallback) : f.key;
}

// GPT-NeoX's rotation (theta, rotated fraction, scaling) as transformers
// reads it: 5.x's rope_parameters {rope_type, rope_theta,
// partial_rotary_factor, factor}, the top-level rope_theta and
// partial_rotary_factor, then 4.x's rotary_emb_base, rotary_pct and
// rope_scaling {type, factor}; absent everywhere, GPTNeoXConfig's defaults
// (10000, 0.25, unscaled). Each is checked against model.rope: one line
// naming both values.
// Llama reads the same keys (no rotary_pct / rotary_emb_base) with defaults
// 10000 and every dimension rotated: `family` and `default_fraction` say so.
void check_neox_rope(const Json& j, const rope::Params& r, const std::string& where,
                     const char* family = "GPT-NeoX", double default_fraction = 0.25,
                     int64_t max_positions = 0) {
  if (j.contains("rope_parameters") && j.at("rope_parameters").is_object())
    for (const auto& [key, value] : j.at("rope_parameters").items())
      if (value.is_object())
        ROTOR_FAIL(
            "{}: rope_parameters.{} is a rotation per layer type; rotor's {} layers share one",
            where, key, family);
  if (j.contains("rope_parameters") && !j.at("rope_parameters").is_null() &&
      !j.at("rope_parameters").is_object())
    ROTOR_FAIL("{}: rope_parameters must be an object, got {}", where,
               j.at("rope_parameters").dump());
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null() &&
      !j.at("rope_scaling").is_object())
    ROTOR_FAIL("{}: rope_scaling must be null or an object, got {}", where,
               j.at("rope_scaling").dump());

  const Found theta = find_setting(j,
                                   {{"rope_parameters", "rope_theta"},
                                    {nullptr, "rope_theta"},
                                    {"rope_scaling", "rope_theta"},
                                    {nullptr, "rotary_emb_base"}},
                                   where);
  const Found pct = find_setting(j,
                                 {{"rope_parameters", "partial_rotary_factor"},
                                  {nullptr, "partial_rotary_factor"},
                                  {"rope_scaling", "partial_rotary_factor"},
                                  {nullptr, "rotary_pct"}},
                                 where);
  const Found type = find_setting(j,
                                  {{"rope_parameters", "rope_type"},
                                   {"rope_parameters", "type"},
                                   {"rope_scaling", "rope_type"},
                                   {"rope_scaling", "type"}},
                                  where);
  const Found factor =
      find_setting(j, {{"rope_parameters", "factor"}, {"rope_scaling", "factor"}}, where);

  const double base = number(theta, 10000.0, where);
  if (base != r.theta)
    ROTOR_FAIL("{}: {} is {}, but model.rope.theta is {}", where, named(theta, "rope_theta"), base,
               r.theta);
  const double fraction = number(pct, default_fraction, where);
  if (fraction != r.fraction)
    ROTOR_FAIL("{}: {} is {}, but model.rope.fraction is {}", where,
               named(pct, "partial_rotary_factor"), fraction, r.fraction);

  std::string kind = "default";
  if (!type.key.empty()) {
    if (!type.value.is_string())
      ROTOR_FAIL("{}: {} must be a string, got {}", where, type.key, type.value.dump());
    kind = type.value.get<std::string>();
  }
  rope::Scaling scaling = rope::Scaling::None;
  if (kind == "linear") {
    scaling = rope::Scaling::Linear;
  } else if (kind == "dynamic") {
    scaling = rope::Scaling::DynamicNtk;
  } else if (kind == "llama3" && max_positions > 0) {
    scaling = rope::Scaling::Llama3;
  } else if (kind != "default") {
    ROTOR_FAIL(
        "{}: {} is {}; rotor reads the {} rope types default, linear and dynamic{} "
        "(model.rope.scaling none, linear, dynamic_ntk{})",
        where, type.key, kind, family, max_positions > 0 ? " and llama3" : "",
        max_positions > 0 ? ", llama3" : "");
  }
  const double s = scaling == rope::Scaling::None ? 1.0 : number(factor, 0.0, where);
  if (scaling != rope::Scaling::None && !(s >= 1.0))
    ROTOR_FAIL("{}: {} is {}: a {} scaling needs a factor of at least 1", where,
               named(factor, "factor"), factor.key.empty() ? "absent" : factor.value.dump(), kind);
  const bool ours = r.scaling != rope::Scaling::None && r.factor != 1.0;
  const bool theirs = scaling != rope::Scaling::None && s != 1.0;
  const std::string mine =
      ours ? fmt::format("{} x{}", to_string(r.scaling), r.factor) : std::string("none");
  if (ours != theirs || (ours && (scaling != r.scaling || s != r.factor)))
    ROTOR_FAIL("{}: {} is {}{}, but model.rope.scaling is {}", where, named(type, "rope_type"),
               kind, theirs ? fmt::format(" x{}", s) : std::string(), mine);
  if (scaling != rope::Scaling::Llama3 || !theirs) return;
  // Llama 3.1's blend: its frequency factors and original context, each
  // against model.rope's (transformers has no defaults for them).
  const int64_t original = r.original_max_positions > 0 ? r.original_max_positions : max_positions;
  for (const auto& [key, ours_value, what] :
       {std::tuple{"low_freq_factor", r.low_freq_factor, "model.rope.low_freq_factor"},
        std::tuple{"high_freq_factor", r.high_freq_factor, "model.rope.high_freq_factor"},
        std::tuple{"original_max_position_embeddings", static_cast<double>(original),
                   "model.rope.original_max_positions (0: model.max_positions)"}}) {
    const Found f = find_setting(j, {{"rope_parameters", key}, {"rope_scaling", key}}, where);
    if (f.key.empty()) ROTOR_FAIL("{}: the llama3 rope type has no {}", where, key);
    const double theirs_value = number(f, 0.0, where);
    if (theirs_value != ours_value)
      ROTOR_FAIL("{}: {} is {}, but {} is {}", where, f.key, theirs_value, what, ours_value);
  }
}

// config.json's keys, read with Hugging Face's defaults where one is absent
// (or null), and compared in one line naming both values.
struct HfKeys {
  const Json& j;
  const std::string& where;
  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t int_or(const char* key, int64_t fallback) const {
    return has(key) ? json_io::get_int(j, key, where) : fallback;
  }
  bool bool_or(const char* key, bool fallback) const {
    return has(key) ? json_io::get_bool(j, key, where) : fallback;
  }
  void same(const char* key, int64_t hf, int64_t ours, const std::string& what) const {
    if (hf != ours) ROTOR_FAIL("{}: {} is {}, but {} is {}", where, key, hf, what, ours);
  }
};

// LlamaConfig's keys (its defaults where absent) against the rotor model.
void check_llama_config(const Json& j, const models::HfLmOptions& m, int64_t vocab,
                        const std::string& where, std::vector<std::string>* notes) {
  const HfKeys keys{j, where};
  keys.same("vocab_size", json_io::get_int(j, "vocab_size", where), vocab,
            "the tokenizer's vocabulary size");
  keys.same("hidden_size", keys.int_or("hidden_size", 4096), m.d_model, "model.d_model");
  keys.same("num_hidden_layers", keys.int_or("num_hidden_layers", 32), m.num_layers,
            "model.decoder_layers");
  const int64_t heads = keys.int_or("num_attention_heads", 32);
  keys.same("num_attention_heads", heads, m.n_heads, "model.n_heads");
  keys.same("num_key_value_heads", keys.int_or("num_key_value_heads", heads), m.kv_heads,
            "model.kv_heads (0: model.n_heads)");
  keys.same("intermediate_size", keys.int_or("intermediate_size", 11008), m.d_ff, "model.d_ff");
  keys.same("head_dim", keys.int_or("head_dim", m.d_model / m.n_heads), m.d_model / m.n_heads,
            "model.d_model / model.n_heads");
  const std::string act =
      keys.has("hidden_act") ? json_io::get_string(j, "hidden_act", where) : std::string("silu");
  check_hf_activation("hidden_act", act, m.activation, where, notes);
  const double eps =
      keys.has("rms_norm_eps") ? json_io::get_double(j, "rms_norm_eps", where) : 1e-6;
  if (std::abs(eps - m.layer_norm_eps) > 1e-6 * std::abs(m.layer_norm_eps))
    ROTOR_FAIL("{}: rms_norm_eps is {}, but model.layer_norm_eps is {}", where, eps,
               m.layer_norm_eps);
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (keys.has(key) && json_io::get_bool(j, key, where))
      ROTOR_FAIL("{}: {} is true; rotor's Llama layers have no biases (model.bias false)", where,
                 key);
  check_neox_rope(j, m.rope, where, "Llama", 1.0, m.max_positions);
}

}  // namespace

void check_hf_lm_config(const Json& j, const Config& c, int64_t vocab, const std::string& where,
                        std::vector<std::string>* notes) {
  const models::HfLmOptions m = require_hf_lm(c, "model.init_from");
  const std::string type = json_io::get_string(j, "model_type", where);
  if (type == "llama" && m.model_type != type)
    ROTOR_FAIL(
        "{}: model_type llama is rope with RMSNorm and a gated MLP, bias-free: set "
        "model.position rope, model.norm_type rms_norm, model.gated_ffn true and model.bias false",
        where);
  if (type != m.model_type) {
    for (nn::PositionKind k : nn::position_kinds())
      if (k->hf.causal_lm == type)
        ROTOR_FAIL(
            "{}: model_type {} has {} positions, but model.position is {} (set "
            "model.position: {})",
            where, type, k.name(), m.position.name(), k.name());
    ROTOR_FAIL(
        "{}: model_type is {}; task lm initializes from llama or gpt_neox (rope) or gpt2 "
        "(learned)",
        where, type);
  }
  if (type == "llama") return check_llama_config(j, m, vocab, where, notes);
  const bool neox = type == "gpt_neox";
  const HfKeys keys{j, where};
  keys.same("vocab_size", json_io::get_int(j, "vocab_size", where), vocab,
            "the tokenizer's vocabulary size");
  // Hugging Face's defaults where a key is absent (GPTNeoXConfig, GPT2Config).
  const char* hidden_key = neox ? "hidden_size" : "n_embd";
  const int64_t hidden = keys.int_or(hidden_key, neox ? 6144 : 768);
  keys.same(hidden_key, hidden, m.d_model, "model.d_model");
  keys.same(neox ? "num_hidden_layers" : "n_layer",
            keys.int_or(neox ? "num_hidden_layers" : "n_layer", neox ? 44 : 12), m.num_layers,
            "model.decoder_layers");
  keys.same(neox ? "num_attention_heads" : "n_head",
            keys.int_or(neox ? "num_attention_heads" : "n_head", neox ? 64 : 12), m.n_heads,
            "model.n_heads");
  keys.same(neox ? "intermediate_size" : "n_inner",
            keys.int_or(neox ? "intermediate_size" : "n_inner", neox ? 24576 : 4 * hidden), m.d_ff,
            "model.d_ff");
  const char* act_key = neox ? "hidden_act" : "activation_function";
  const std::string act = keys.has(act_key) ? json_io::get_string(j, act_key, where)
                                            : std::string(neox ? "gelu" : "gelu_new");
  check_hf_activation(act_key, act, m.activation, where, notes);
  const char* eps_key = neox ? "layer_norm_eps" : "layer_norm_epsilon";
  const double eps = keys.has(eps_key) ? json_io::get_double(j, eps_key, where) : 1e-5;
  if (std::abs(eps - m.layer_norm_eps) > 1e-6 * std::abs(m.layer_norm_eps))
    ROTOR_FAIL("{}: {} is {}, but model.layer_norm_eps is {}", where, eps_key, eps,
               m.layer_norm_eps);
  if (neox) {
    if (keys.bool_or("use_parallel_residual", true))
      ROTOR_FAIL(
          "{}: use_parallel_residual is true (x + attn(ln1(x)) + mlp(ln2(x))); rotor's layer "
          "adds attention and then the MLP (use_parallel_residual false)",
          where);
    check_neox_rope(j, m.rope, where);
    if (keys.bool_or("attention_bias", true) == false)
      ROTOR_FAIL("{}: attention_bias is false; rotor's attention has biases", where);
  } else {
    keys.same("n_positions", keys.int_or("n_positions", 1024), m.max_positions,
              "model.max_positions");
    if (!keys.bool_or("scale_attn_weights", true) ||
        keys.bool_or("scale_attn_by_inverse_layer_idx", false))
      ROTOR_FAIL(
          "{}: the attention scores are not scaled by 1/sqrt(head_dim) alone "
          "(scale_attn_weights, scale_attn_by_inverse_layer_idx)",
          where);
    if (keys.bool_or("add_cross_attention", false))
      ROTOR_FAIL("{}: add_cross_attention is true; task lm has no encoder", where);
  }
}

HfImportResult import_hf_lm(const std::string& dir, const Config& c, nn::ParameterStore& store) {
  if (!fs::is_directory(dir))
    ROTOR_FAIL(
        "model.init_from {}: not a directory (a Hugging Face model directory with "
        "config.json and model.safetensors)",
        dir);
  const models::HfLmOptions m = require_hf_lm(c, "model.init_from");
  nn::Parameter* word = store.find("model.embed_tokens.weight");
  ROTOR_CHECK(word != nullptr && store.allocated(), "import_hf_lm: the store holds no causal LM");
  HfImportResult r;
  r.model_type = m.model_type;
  const std::string cfg = (fs::path(dir) / "config.json").string();
  if (!fs::exists(cfg)) ROTOR_FAIL("model.init_from {}: no config.json", dir);
  const Json hf_config = json_io::load(cfg);
  check_hf_lm_config(hf_config, c, word->shape[0], cfg, &r.notes);
  const bool tied = hf_config.contains("tie_word_embeddings")
                        ? json_io::get_bool(hf_config, "tie_word_embeddings", cfg)
                        : m.model_type == "gpt2";  // the families' defaults

  const HfWeights weights(dir);
  std::set<std::string> used;
  // The values of Hugging Face tensor NAME, which must have shape `shape`.
  const auto read = [&](const std::string& name, const Shape& shape) {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* e = weights.find(name, &file);
    if (!e)
      ROTOR_FAIL("model.init_from {}: the weights lack {} (is it a {} model of this size?)", dir,
                 name, m.model_type);
    if (e->shape != shape)
      ROTOR_FAIL("{}: {} has shape {}, the model expects {}", file->path(), name,
                 shape_str(e->shape), shape_str(shape));
    std::vector<float> v = hf_floats(*file, *e);
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        ROTOR_FAIL("{}: {} holds a non-finite value ({} at element {})", file->path(), name, v[i],
                   i);
    used.insert(name);
    return Tensor::from_floats(v, shape);
  };
  const auto set = [&](const std::string& name, const Tensor& value) {
    nn::Parameter* p = store.find(name);
    ROTOR_CHECK(p != nullptr, "import_hf_lm: the model has no parameter {}", name);
    p->value.copy_from(value);
    ++r.loaded;
  };
  const auto shape_of = [&](const std::string& name) {
    const nn::Parameter* p = store.find(name);
    ROTOR_CHECK(p != nullptr, "import_hf_lm: the model has no parameter {}", name);
    return p->shape;
  };

  for (const HfLmLink& link : hf_lm_links(m)) {
    std::vector<Shape> shapes;
    for (const auto& n : link.rotor) shapes.push_back(shape_of(n));
    Shape hf_shape = hf_lm_forward(
                         link,
                         [&] {
                           std::vector<Tensor> zeros;
                           for (const auto& s : shapes) zeros.push_back(Tensor::zeros(s));
                           return zeros;
                         }(),
                         m)
                         .shape();
    const std::vector<Tensor> parts = hf_lm_backward(link, read(link.hf, hf_shape), shapes, m);
    for (size_t i = 0; i < parts.size(); ++i) set(link.rotor[i], parts[i]);
  }
  const HfLmEmbeddingNames e = hf_lm_embedding_names(m);
  if (!e.positions.empty())
    set("model.embed_positions.weight",
        read(e.positions, shape_of("model.embed_positions.weight")));
  // The token tables: rotor's one (times the scale on input) or two.
  const Shape table_shape = word->shape;
  const std::vector<float> input = read(e.input, table_shape).to_floats();
  const std::vector<float> output = tied ? input : read(e.output, table_shape).to_floats();
  const float scale = hf_lm_embedding_scale(m);
  if (m.share_embeddings) {
    for (size_t i = 0; i < input.size(); ++i) {
      const float want = output[i] * scale;
      if (!(std::abs(input[i] - want) <= 1e-5f * std::max(1.0f, std::abs(want))))
        ROTOR_FAIL(
            "{}: {} is not {} times {} (element {}: {} instead of {}); model.share_embeddings "
            "ties rotor's input and output tables: set it to false{}",
            dir, e.input, scale, tied ? e.input + " (tie_word_embeddings)" : e.output, i, input[i],
            want, tied && scale != 1.0f ? ", or model.scale_embeddings to false" : "");
    }
    set(word->name, Tensor::from_floats(output, table_shape));
  } else {
    std::vector<float> table = input;
    if (scale != 1.0f)
      for (float& x : table) x = unscale(x, scale);
    set(word->name, Tensor::from_floats(table, table_shape));
    set("lm_head.weight", Tensor::from_floats(output, table_shape));
  }
  ROTOR_CHECK(r.loaded == static_cast<int64_t>(store.parameters().size()),
              "import_hf_lm: {} of the model's {} parameters mapped", r.loaded,
              store.parameters().size());
  for (const auto& name : weights.names())
    if (!used.count(name) && !(tied && name == e.output)) r.unused.push_back(name);
  return r;
}

}  // namespace rotor::checkpoint
