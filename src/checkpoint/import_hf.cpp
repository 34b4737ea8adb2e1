#include "checkpoint/import_hf.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "checkpoint/export_hf.h"
#include "checkpoint/hf_lm.h"
#include "checkpoint/hf_weights.h"
#include "checkpoint/init_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "config/tasks.h"
#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"
#include "models/model_config.h"
#include "nn/position.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

using json_io::Json;

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

// The names a rotor parameter may have in a Hugging Face file, preferred first.
std::vector<std::string> hf_names(const std::string& name) {
  std::vector<std::string> out{name};
  auto swap_suffix = [&](const std::string& from, const std::string& to) {
    if (name.size() > from.size() &&
        name.compare(name.size() - from.size(), from.size(), from) == 0)
      out.push_back(name.substr(0, name.size() - from.size()) + to);
  };
  swap_suffix("LayerNorm.weight", "LayerNorm.gamma");
  swap_suffix("LayerNorm.bias", "LayerNorm.beta");
  if (name == "cls.predictions.bias") out.push_back("cls.predictions.decoder.bias");
  return out;
}

}  // namespace

void check_hf_config(const Json& j, const Config& c, int64_t vocab, const std::string& where,
                     std::vector<std::string>* notes) {
  const models::HfEncoderOptions m = models::hf_encoder_options(c);
  const std::string type = json_io::get_string(j, "model_type", where);
  if (type != "bert" && type != "roformer")
    ROTOR_FAIL("{}: model_type is {}; rotor initializes from bert or roformer", where, type);
  // The registered encoding that reads this family's positions.
  std::optional<nn::PositionKind> reader;
  for (nn::PositionKind k : nn::position_kinds())
    if (k->hf.family == type && !k->hf.imports.empty()) reader = k;
  ROTOR_CHECK(reader, "no position encoding imports Hugging Face {}", type);
  if (m.position != *reader)
    ROTOR_FAIL("{}: model_type {} has {}, but model.position is {} (set model.position: {})", where,
               type, (*reader)->hf.imports, m.position.name(), reader->name());
  if (const std::string off = models::rope_off_default(m.rope);
      m.position->rotates_qk && !off.empty())
    ROTOR_FAIL(
        "{}: {}, but Hugging Face RoFormer rotates interleaved pairs of every dimension with "
        "base 10000, unscaled",
        where, off);
  auto int_or = [&](const char* key, int64_t fallback) {
    return j.contains(key) && !j.at(key).is_null() ? json_io::get_int(j, key, where) : fallback;
  };
  auto same = [&](const char* key, int64_t hf, int64_t ours, const std::string& what) {
    if (hf != ours) ROTOR_FAIL("{}: {} is {}, but {} is {}", where, key, hf, what, ours);
  };
  same("vocab_size", json_io::get_int(j, "vocab_size", where), vocab,
       "the tokenizer's vocabulary size");
  const int64_t hidden = json_io::get_int(j, "hidden_size", where);
  same("hidden_size", hidden, m.d_model, "model.d_model");
  same("num_hidden_layers", json_io::get_int(j, "num_hidden_layers", where), m.num_layers,
       "model.encoder_layers");
  same("num_attention_heads", json_io::get_int(j, "num_attention_heads", where), m.n_heads,
       "model.n_heads");
  same("intermediate_size", json_io::get_int(j, "intermediate_size", where), m.d_ff, "model.d_ff");
  same("max_position_embeddings", int_or("max_position_embeddings", 512), m.max_positions,
       "model.max_positions");
  same("type_vocab_size", int_or("type_vocab_size", 2), std::max<int64_t>(m.type_vocab_size, 1),
       m.type_vocab_size == 0 ? "1 (the one zero row rotor exports for model.type_vocab_size 0)"
                              : "model.type_vocab_size");
  const std::string act =
      j.contains("hidden_act") ? json_io::get_string(j, "hidden_act", where) : "gelu";
  const bool gelu = act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh";
  if (!(gelu && m.activation == ops::Activation::GELU) &&
      !(act == "relu" && m.activation == ops::Activation::ReLU))
    ROTOR_FAIL("{}: hidden_act is {}, but model.activation is {}", where, act,
               to_string(m.activation));
  if (act == "gelu" && notes)
    notes->push_back(
        "hidden_act gelu (erf) runs as rotor's tanh GELU (gelu_new): outputs "
        "differ by up to ~1e-3 per activation");
  const double eps =
      j.contains("layer_norm_eps") ? json_io::get_double(j, "layer_norm_eps", where) : 1e-12;
  if (std::abs(eps - m.layer_norm_eps) > 1e-6 * std::abs(m.layer_norm_eps))
    ROTOR_FAIL("{}: layer_norm_eps is {}, but model.layer_norm_eps is {}", where, eps,
               m.layer_norm_eps);
  if (j.contains("tie_word_embeddings") && !json_io::get_bool(j, "tie_word_embeddings", where))
    ROTOR_FAIL("{}: tie_word_embeddings is false; rotor's MLM decoder is the word embedding",
               where);
  if (type == "bert" && j.contains("position_embedding_type") &&
      json_io::get_string(j, "position_embedding_type", where) != "absolute")
    ROTOR_FAIL("{}: position_embedding_type is {}; rotor's BERT has absolute positions", where,
               json_io::get_string(j, "position_embedding_type", where));
  if (type == "roformer") {
    same("embedding_size", int_or("embedding_size", hidden), hidden,
         "hidden_size (rotor has no embeddings_project)");
    if (j.contains("rotary_value") && json_io::get_bool(j, "rotary_value", where))
      ROTOR_FAIL("{}: rotary_value is true; rotor rotates queries and keys only", where);
  }
}

std::string HfImportResult::summary(const std::string& dir) const {
  std::string s =
      model_type == "rotor"
          ? fmt::format("model.init_from {}: {} parameters from a rotor checkpoint", dir, loaded)
          : fmt::format("model.init_from {}: {} parameters from a Hugging Face {}", dir, loaded,
                        model_type);
  if (!fresh.empty()) {
    s += fmt::format("; {} newly initialized:", fresh.size());
    for (const auto& f : fresh) s += " " + f;
  }
  if (!unused.empty()) s += fmt::format("; {} tensors unused (e.g. {})", unused.size(), unused[0]);
  for (const auto& n : notes) s += "; note: " + n;
  return s;
}

HfImportResult import_hf(const std::string& dir, const Config& c, nn::ParameterStore& store) {
  if (is_rotor_checkpoint(dir)) return import_rotor_checkpoint(dir, c, store);
  if (task_spec(c.task).model == ModelFamily::Decoder) return import_hf_lm(dir, c, store);
  if (c.task->model != ModelFamily::BertEncoder)
    ROTOR_FAIL("model.init_from: task {} has no BERT/RoFormer encoder", to_string(c.task));
  if (!fs::is_directory(dir))
    ROTOR_FAIL(
        "model.init_from {}: not a directory (a Hugging Face model directory with "
        "config.json and model.safetensors)",
        dir);
  const models::HfEncoderOptions m = models::hf_encoder_options(c);
  const std::string& P = m.prefix;
  const nn::Parameter* word = store.find(P + ".embeddings.word_embeddings.weight");
  ROTOR_CHECK(word != nullptr && store.allocated(), "import_hf: the store holds no {} model", P);
  HfImportResult r;
  r.model_type = P;
  const std::string cfg = (fs::path(dir) / "config.json").string();
  if (!fs::exists(cfg)) ROTOR_FAIL("model.init_from {}: no config.json", dir);
  check_hf_config(json_io::load(cfg), c, word->shape[0], cfg, &r.notes);

  const HfWeights weights(dir);
  std::set<std::string> used;
  for (const auto& p : store.parameters()) {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* e = nullptr;
    for (const auto& n : hf_names(p->name))
      if ((e = weights.find(n, &file))) break;
    const bool encoder = starts_with(p->name, P + ".") && !starts_with(p->name, P + ".pooler.");
    if (!e) {
      if (encoder)
        ROTOR_FAIL("model.init_from {}: the weights lack {} (is it a {} model of this size?)", dir,
                   p->name, P);
      r.fresh.push_back(p->name);
      continue;
    }
    if (e->shape != p->shape)
      ROTOR_FAIL("{}: {} has shape {}, the model expects {}", file->path(), e->name,
                 shape_str(e->shape), shape_str(p->shape));
    const std::vector<float> v = hf_floats(*file, *e);
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        ROTOR_FAIL("{}: {} holds a non-finite value ({} at element {})", file->path(), e->name,
                   v[i], i);
    p->value.copy_from(Tensor::from_floats(v, p->shape));
    used.insert(e->name);
    ++r.loaded;
  }
  // rotor's model.type_vocab_size 0 stands for Hugging Face's one row of zeros.
  const std::string types = P + ".embeddings.token_type_embeddings.weight";
  if (m.type_vocab_size == 0) {
    const SafetensorsFile* file = nullptr;
    if (const SafetensorsEntry* e = weights.find(types, &file)) {
      for (float v : hf_floats(*file, *e))
        if (v != 0.0f)
          ROTOR_FAIL("{}: {} is not zero, but model.type_vocab_size is 0 (set it to {})",
                     file->path(), types, e->shape.empty() ? 1 : e->shape[0]);
      used.insert(types);
    }
  }
  // rotor computes RoPE's angles; Hugging Face reads them from this table,
  // so a model whose table holds anything else would compute other outputs.
  const std::string table = "roformer.encoder.embed_positions.weight";
  const SafetensorsFile* tfile = nullptr;
  if (const SafetensorsEntry* e = P == "roformer" ? weights.find(table, &tfile) : nullptr) {
    const int64_t dim = m.d_model / m.n_heads;
    const Shape want{m.max_positions, dim};
    if (e->shape != want)
      ROTOR_FAIL("{}: {} has shape {}, expected {}", tfile->path(), table, shape_str(e->shape),
                 shape_str(want));
    const std::vector<float> got = hf_floats(*tfile, *e);
    const std::vector<float> ref = roformer_sinusoid(want[0], want[1]).to_floats();
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::abs(got[i] - ref[i]) <= 1e-5f))
        ROTOR_FAIL("{}: {} is not RoFormer's sinusoid table (element {}: {} instead of {})",
                   tfile->path(), table, i, got[i], ref[i]);
    used.insert(table);
  }
  for (const auto& name : weights.names())
    if (!used.count(name) && name != "cls.predictions.decoder.weight" &&
        name != "cls.predictions.decoder.bias" && name.find("position_ids") == std::string::npos)
      r.unused.push_back(name);
  return r;
}

}  // namespace rotor::checkpoint
