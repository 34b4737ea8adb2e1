#include "checkpoint/import_hf.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "checkpoint/export_hf.h"
#include "checkpoint/hf_lm.h"
#include "checkpoint/hf_weights.h"
#include "checkpoint/init_checkpoint.h"
#include "checkpoint/label_rows.h"
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
std::vector<std::string> hf_names(const models::HfEncoderOptions& m, const std::string& rotor) {
  const std::string name = hf_name(m, rotor);
  std::vector<std::string> out{name};
  auto swap_suffix = [&](const std::string& from, const std::string& to) {
    if (name.size() > from.size() &&
        name.compare(name.size() - from.size(), from.size(), from) == 0)
      out.push_back(name.substr(0, name.size() - from.size()) + to);
  };
  swap_suffix("LayerNorm.weight", "LayerNorm.gamma");
  swap_suffix("LayerNorm.bias", "LayerNorm.beta");
  if (name == "cls.predictions.bias") out.push_back("cls.predictions.decoder.bias");
  // DeBERTa-v2 with legacy false: the same head under lm_predictions.lm_head.
  if (m.model_type == "deberta-v2") {
    if (name == "cls.predictions.bias") out.push_back("lm_predictions.lm_head.bias");
    const std::string t = "cls.predictions.transform.";
    if (name.rfind(t, 0) == 0) out.push_back("lm_predictions.lm_head." + name.substr(t.size()));
  }
  return out;
}

// What a DebertaV2Config must say for rotor's deberta encoding to compute
// the same model (defaults as transformers' DebertaV2Config and modules).
void check_deberta_config(const Json& j, const models::HfEncoderOptions& m,
                          const std::string& where) {
  const auto flag = [&](const char* key, bool fallback) {
    return j.contains(key) && !j.at(key).is_null() ? json_io::get_bool(j, key, where) : fallback;
  };
  const auto int_or = [&](const char* key, int64_t fallback) {
    return j.contains(key) && !j.at(key).is_null() ? json_io::get_int(j, key, where) : fallback;
  };
  if (!flag("relative_attention", false))
    ROTOR_FAIL("{}: relative_attention is false; model.position deberta is relative attention",
               where);
  if (flag("position_biased_input", true))
    ROTOR_FAIL(
        "{}: position_biased_input is true (absolute positions added to the embeddings), which "
        "rotor's deberta does not add",
        where);
  if (!flag("share_att_key", false))
    ROTOR_FAIL(
        "{}: share_att_key is false (separate pos_key_proj / pos_query_proj); rotor's deberta "
        "projects relative embeddings with the layer's own query and key projections",
        where);
  std::vector<std::string> att;
  if (j.contains("pos_att_type") && j.at("pos_att_type").is_array()) {
    for (const auto& v : j.at("pos_att_type")) att.push_back(v.get<std::string>());
  } else if (j.contains("pos_att_type") && j.at("pos_att_type").is_string()) {
    std::string v = j.at("pos_att_type").get<std::string>();
    for (size_t at = 0; at <= v.size();) {
      const size_t bar = std::min(v.find('|', at), v.size());
      att.push_back(v.substr(at, bar - at));
      at = bar + 1;
    }
  }
  for (auto& a : att) {
    a.erase(0, a.find_first_not_of(' '));
    a.erase(a.find_last_not_of(' ') + 1);
    for (char& ch : a) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  std::sort(att.begin(), att.end());
  att.erase(std::unique(att.begin(), att.end()), att.end());
  if (att != std::vector<std::string>{"c2p", "p2c"})
    ROTOR_FAIL("{}: pos_att_type is not c2p and p2c; rotor's deberta adds exactly those terms",
               where);
  const std::string norm =
      j.contains("norm_rel_ebd") ? json_io::get_string(j, "norm_rel_ebd", where) : "none";
  if (norm.find("layer_norm") == std::string::npos)
    ROTOR_FAIL(
        "{}: norm_rel_ebd is {}; rotor's deberta normalizes the relative embeddings "
        "(layer_norm)",
        where, norm);
  if (const int64_t k = int_or("conv_kernel_size", 0); k > 0)
    ROTOR_FAIL("{}: conv_kernel_size is {}; rotor's deberta has no convolution layer", where, k);
  if (int_or("embedding_size", m.d_model) != m.d_model)
    ROTOR_FAIL("{}: embedding_size is {}, but hidden_size is {} (rotor has no embed_proj)", where,
               int_or("embedding_size", m.d_model), m.d_model);
  if (const int64_t h = int_or("attention_head_size", m.d_model / m.n_heads);
      h != m.d_model / m.n_heads)
    ROTOR_FAIL("{}: attention_head_size is {}, but model.d_model / model.n_heads is {}", where, h,
               m.d_model / m.n_heads);
  const int64_t buckets = std::max<int64_t>(int_or("position_buckets", -1), 0);
  if (buckets != m.deberta_buckets)
    ROTOR_FAIL("{}: position_buckets is {}, but model.deberta.position_buckets is {}", where,
               buckets > 0 ? buckets : int_or("position_buckets", -1), m.deberta_buckets);
  int64_t max_rel = int_or("max_relative_positions", -1);
  if (max_rel < 1) max_rel = int_or("max_position_embeddings", 512);
  if (max_rel != m.deberta_max_relative)
    ROTOR_FAIL("{}: max_relative_positions is {}, but model.deberta.max_relative_positions is {}",
               where, max_rel, m.deberta_max_relative);
  if (int_or("type_vocab_size", 0) != m.type_vocab_size)
    ROTOR_FAIL("{}: type_vocab_size is {}, but model.type_vocab_size is {}", where,
               int_or("type_vocab_size", 0), m.type_vocab_size);
}

}  // namespace

void check_hf_config(const Json& j, const Config& c, int64_t vocab, const std::string& where,
                     std::vector<std::string>* notes) {
  const models::HfEncoderOptions m = models::hf_encoder_options(c);
  const std::string type = json_io::get_string(j, "model_type", where);
  if (type != "bert" && type != "roformer" && type != "deberta-v2")
    ROTOR_FAIL("{}: model_type is {}; rotor initializes from bert, roformer or deberta-v2", where,
               type);
  // The registered encoding that reads this model_type's positions.
  std::optional<nn::PositionKind> reader;
  for (nn::PositionKind k : nn::position_kinds())
    if ((k->hf.model_type.empty() ? k->hf.family : k->hf.model_type) == type &&
        !k->hf.imports.empty())
      reader = k;
  ROTOR_CHECK(reader, "no position encoding imports Hugging Face {}", type);
  require_bert_layers(c, where + " (Hugging Face " + type + ")");
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
  if (type == "deberta-v2") {
    check_deberta_config(j, m, where);
  } else {
    same("max_position_embeddings", int_or("max_position_embeddings", 512), m.max_positions,
         "model.max_positions");
    same("type_vocab_size", int_or("type_vocab_size", 2), std::max<int64_t>(m.type_vocab_size, 1),
         m.type_vocab_size == 0 ? "1 (the one zero row rotor exports for model.type_vocab_size 0)"
                                : "model.type_vocab_size");
  }
  const std::string act =
      j.contains("hidden_act") ? json_io::get_string(j, "hidden_act", where) : "gelu";
  check_hf_activation("hidden_act", act, m.activation, where, notes);
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

HfImportResult import_hf(const std::string& dir, const Config& c, nn::ParameterStore& store,
                         const std::vector<std::string>& labels) {
  if (is_rotor_checkpoint(dir)) return import_rotor_checkpoint(dir, c, store, labels);
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
  r.model_type = m.model_type;
  const std::string cfg = (fs::path(dir) / "config.json").string();
  if (!fs::exists(cfg)) ROTOR_FAIL("model.init_from {}: no config.json", dir);
  const Json hf_cfg = json_io::load(cfg);
  check_hf_config(hf_cfg, c, word->shape[0], cfg, &r.notes);
  const std::vector<std::string> hf_labels = hf_label_names(hf_cfg, cfg);

  const HfWeights weights(dir);
  std::set<std::string> used;
  for (const auto& p : store.parameters()) {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* e = nullptr;
    for (const auto& n : hf_names(m, p->name))
      if ((e = weights.find(n, &file))) break;
    const bool encoder = starts_with(p->name, P + ".") && !starts_with(p->name, P + ".pooler.");
    if (!e) {
      if (encoder)
        ROTOR_FAIL("model.init_from {}: the weights lack {} (is it a {} model of this size?)", dir,
                   p->name, P);
      r.fresh.push_back(p->name);
      continue;
    }
    // A classifier's label rows are read by label name (checkpoint/label_rows.h).
    const LabelRows rows = label_rows_of(*p, e->shape, hf_labels, labels, dir, r.notes);
    if (rows.none) {
      r.fresh.push_back(p->name);
      continue;
    }
    if (rows.identity && e->shape != p->shape)
      ROTOR_FAIL("{}: {} has shape {}, the model expects {}", file->path(), e->name,
                 shape_str(e->shape), shape_str(p->shape));
    const std::vector<float> v = hf_floats(*file, *e);
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        ROTOR_FAIL("{}: {} holds a non-finite value ({} at element {})", file->path(), e->name,
                   v[i], i);
    if (rows.identity)
      p->value.copy_from(Tensor::from_floats(v, p->shape));
    else
      read_label_rows(p->value, v, rows);
    used.insert(e->name);
    ++r.loaded;
  }
  // DebertaV2's ContextPooler applies pooler_hidden_act (gelu by default);
  // rotor's pooler applies tanh, as BERT's.
  if (m.model_type == "deberta-v2" && used.count("pooler.dense.weight")) {
    const std::string act = hf_cfg.contains("pooler_hidden_act")
                                ? json_io::get_string(hf_cfg, "pooler_hidden_act", cfg)
                                : "gelu";
    if (act != "tanh")
      r.notes.push_back(fmt::format(
          "pooler_hidden_act is {}; rotor's pooler applies tanh to the loaded pooler.dense", act));
  }
  // rotor's model.type_vocab_size 0 stands for Hugging Face's one row of zeros.
  const std::string types = hf_name(m, P + ".embeddings.token_type_embeddings.weight");
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
