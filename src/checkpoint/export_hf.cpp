#include "checkpoint/export_hf.h"

#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/hf_lm.h"
#include "checkpoint/hf_tokenizer.h"
#include "config/tasks.h"
#include "core/io.h"
#include "core/json_io.h"
#include "data/sentencepiece.h"
#include "models/bert.h"
#include "models/model_config.h"
#include "nn/layers.h"
#include "nn/position.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

// The encoder of `c` as Hugging Face describes it (models/model_config.h),
// or an error saying why it cannot be exported.
models::HfEncoderOptions require_encoder(const Config& c) {
  if (c.task->hf_export != HfExport::MaskedLm &&
      c.task->hf_export != HfExport::SequenceClassification)
    ROTOR_FAIL(
        "export --format hf: the checkpoint's task is {}; tasks mlm, classification and "
        "multilabel export to a Hugging Face BERT/RoFormer/DeBERTa-v2, task lm to "
        "GPT-NeoX/GPT-2",
        to_string(c.task));
  // BERT's and DeBERTa-v2's multiple-choice heads are rotor's: the pooled
  // [CLS] of each pair scored by one output. RoFormer's pools through a
  // SequenceSummary that rotor's head does not have.
  if (c.data.choices > 0 && c.model.position->hf.family == "roformer")
    ROTOR_FAIL(
        "export --format hf: the checkpoint is a RoFormer multiple-choice classifier "
        "(data.choices: {}), which has no Hugging Face export (RoFormerForMultipleChoice pools "
        "differently); its encoder can start another run through model.init_from",
        c.data.choices);
  if (c.model.classifier_head != ClassifierHead::Cls)
    ROTOR_FAIL(
        "export --format hf: model.classifier_head is {}, and Hugging Face's "
        "*ForSequenceClassification read the [CLS] state; its encoder can start another run "
        "through model.init_from",
        to_string(c.model.classifier_head));
  if (c.attention.kind != nn::AttentionKind::Softmax)
    ROTOR_FAIL(
        "export --format hf: attention.kind is {}, and Hugging Face BERT/RoFormer compute "
        "softmax attention",
        to_string(c.attention.kind));
  require_bert_layers(c, "export --format hf");
  // What an EHR encoder adds to BERT has no Hugging Face form: exported, it
  // would be dropped (or left as a stray tensor) and the model would read its
  // inputs otherwise. Refused rather than exported with a note.
  if (c.model.age_vocab_size > 0)
    ROTOR_FAIL(
        "export --format hf: the model adds an age embedding (model.age_vocab_size {}, "
        "model.age_embedding {}), which Hugging Face BERT/RoFormer cannot hold; its encoder "
        "can start another rotor run through model.init_from",
        c.model.age_vocab_size, to_string(c.model.age_embedding));
  if (c.model.position_source == PositionSource::Visit)
    ROTOR_FAIL(
        "export --format hf: model.position_source is visit, and Hugging Face BERT/RoFormer "
        "count positions by token; its encoder can start another rotor run through "
        "model.init_from");
  models::HfEncoderOptions m = models::hf_encoder_options(c);
  if (!m.position->hf.no_export.empty())
    ROTOR_FAIL("export --format hf: model.position is {}: {}", m.position.name(),
               m.position->hf.no_export);
  const std::string off = models::rope_off_default(m.rope);
  if (m.position->rotates_qk && !off.empty())
    ROTOR_FAIL(
        "export --format hf: {}, but Hugging Face RoFormer rotates interleaved pairs of every "
        "dimension with base 10000, unscaled",
        off);
  return m;
}

// The [max_positions, d] table a position encoding without a parameter table
// adds to the embeddings (exactly what the model adds: zeros where it adds
// nothing), which Hugging Face BERT holds as position_embeddings.
Tensor added_positions(nn::PositionKind kind, int64_t n_pos, int64_t dim) {
  nn::ParameterStore store;
  nn::PositionEncoding pe(store, "unused", kind, n_pos, dim, 0.0);
  Tensor x = Tensor::zeros({1, n_pos, dim});
  pe.add(x, 0, nn::Context{});
  return x.view({n_pos, dim});
}

// Registers the parameters of the model `c` describes in `store`, in order.
void register_model(const Config& c, int64_t vocab, nn::ParameterStore& store) {
  // The models only register: the store owns the parameters after they go.
  if (c.task->hf_export == HfExport::SequenceClassification) {
    models::BertForSequenceClassification model(models::bert_classifier_options(c, vocab), store);
  } else {
    models::BertForMaskedLM model(models::bert_options(c, vocab), store);
  }
}

}  // namespace

std::string hf_name(const models::HfEncoderOptions& m, const std::string& name) {
  if (m.model_type != "deberta-v2") return name;
  const auto replace = [](std::string s, std::string_view from, std::string_view to) {
    if (const size_t at = s.find(from); at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  };
  const std::string p = m.prefix + ".";
  if (name.rfind(p + "pooler.", 0) == 0) return name.substr(p.size());  // ContextPooler
  if (name.rfind(p, 0) != 0) return name;                               // cls.*, classifier.*
  std::string out = "deberta." + name.substr(p.size());
  for (std::string_view proj : {"query", "key", "value"})
    out = replace(out, fmt::format(".attention.self.{}.", proj),
                  fmt::format(".attention.self.{}_proj.", proj));
  return out;
}

DirectoryWriter hf_export_writer() {
  return {"export", [](const std::string& name) {
            // What a Hugging Face model directory holds (an earlier export, or
            // save_pretrained's files), which a new export replaces.
            static const char* const kNames[] = {"config.json",
                                                 "generation_config.json",
                                                 "model.safetensors",
                                                 "tokenizer.json",
                                                 "tokenizer_config.json",
                                                 "special_tokens_map.json",
                                                 "added_tokens.json",
                                                 "spiece.model",
                                                 "tokenizer.model",
                                                 "sentencepiece.bpe.model",
                                                 "vocab.txt",
                                                 "vocab.json",
                                                 "merges.txt",
                                                 "pytorch_model.bin",
                                                 "model.safetensors.index.json",
                                                 "pytorch_model.bin.index.json"};
            for (const char* n : kNames)
              if (name == n) return true;
            // Shards: model-00001-of-00002.safetensors, pytorch_model-00001-of-00002.bin.
            const auto ends = [&](std::string_view end) {
              return name.size() >= end.size() &&
                     name.compare(name.size() - end.size(), end.size(), end) == 0;
            };
            return (name.rfind("model-", 0) == 0 && ends(".safetensors")) ||
                   (name.rfind("pytorch_model-", 0) == 0 && ends(".bin"));
          }};
}

// Hugging Face RoFormerSinusoidalPositionalEmbedding: [sin(p w_j) | cos(p w_j)],
// w_j = 10000^(-2j/dim), j < dim/2.
Tensor roformer_sinusoid(int64_t n_pos, int64_t dim) {
  std::vector<float> t(static_cast<size_t>(n_pos * dim), 0.0f);
  const int64_t half = dim / 2;
  for (int64_t p = 0; p < n_pos; ++p)
    for (int64_t j = 0; j < half; ++j) {
      const double a = static_cast<double>(p) /
                       std::pow(10000.0, 2.0 * static_cast<double>(j) / static_cast<double>(dim));
      t[static_cast<size_t>(p * dim + j)] = static_cast<float>(std::sin(a));
      t[static_cast<size_t>(p * dim + half + j)] = static_cast<float>(std::cos(a));
    }
  return Tensor::from_floats(t, {n_pos, dim});
}

const char* hf_activation(ops::Activation a) {
  switch (a) {
    case ops::Activation::GELU:
      return "gelu_new";
    case ops::Activation::SiLU:
      return "silu";
    case ops::Activation::ReLU:
      return "relu";
    case ops::Activation::None:
      break;
  }
  return "linear";
}

void check_hf_activation(const std::string& key, const std::string& act, ops::Activation a,
                         const std::string& where, std::vector<std::string>* notes) {
  const bool gelu = act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh";
  const bool same = gelu                              ? a == ops::Activation::GELU
                    : act == "silu" || act == "swish" ? a == ops::Activation::SiLU
                                                      : act == "relu" && a == ops::Activation::ReLU;
  if (!same) ROTOR_FAIL("{}: {} is {}, but model.activation is {}", where, key, act, to_string(a));
  if (act == "gelu" && notes)
    notes->push_back(fmt::format(
        "{} gelu (erf) runs as rotor's tanh GELU (gelu_new): outputs differ by up to ~1e-3 per "
        "activation",
        key));
}

void require_bert_layers(const Config& c, const std::string& what) {
  const ModelConfig& m = c.model;
  if (m.norm_type != NormType::LayerNorm)
    ROTOR_FAIL(
        "{}: model.norm_type is {}, and Hugging Face BERT/RoFormer/DeBERTa-v2 normalize with "
        "LayerNorm",
        what, to_string(m.norm_type));
  if (m.gated_ffn)
    ROTOR_FAIL(
        "{}: model.gated_ffn is true, and Hugging Face BERT/RoFormer/DeBERTa-v2's feed-forward "
        "is not gated",
        what);
  if (!m.bias)
    ROTOR_FAIL(
        "{}: model.bias is false, and Hugging Face BERT/RoFormer/DeBERTa-v2's layers have "
        "biases",
        what);
  if (m.kv_heads > 0 && m.kv_heads != m.n_heads)
    ROTOR_FAIL(
        "{}: model.kv_heads is {}, and Hugging Face BERT/RoFormer/DeBERTa-v2 have a key and value "
        "head per query head",
        what, m.kv_heads);
}

nlohmann::ordered_json hf_config(const Config& c, int64_t vocab_size) {
  const models::HfEncoderOptions m = require_encoder(c);
  const bool rope = m.prefix == "roformer";
  const bool deberta = m.model_type == "deberta-v2";
  const bool classify = c.task->hf_export == HfExport::SequenceClassification;
  const bool choices = classify && c.data.choices > 0;
  json_io::Json j = json_io::Json::object();
  const std::string arch = std::string(rope      ? "RoFormer"
                                       : deberta ? "DebertaV2"
                                                 : "Bert") +
                           (choices    ? "ForMultipleChoice"
                            : classify ? "ForSequenceClassification"
                                       : "ForMaskedLM");
  j["architectures"] = json_io::Json::array({arch});
  j["model_type"] = m.model_type;
  j["vocab_size"] = vocab_size;
  if (rope) j["embedding_size"] = m.d_model;
  j["hidden_size"] = m.d_model;
  j["num_hidden_layers"] = m.num_layers;
  j["num_attention_heads"] = m.n_heads;
  j["intermediate_size"] = m.d_ff;
  j["hidden_act"] = hf_activation(m.activation);
  j["hidden_dropout_prob"] = m.dropout;
  j["attention_probs_dropout_prob"] = m.attention_dropout;
  j["max_position_embeddings"] = m.max_positions;
  // DeBERTa-v2 takes 0 token types (no table); BERT and RoFormer need a row.
  j["type_vocab_size"] = deberta ? m.type_vocab_size : std::max<int64_t>(m.type_vocab_size, 1);
  j["initializer_range"] = m.init_std;
  j["layer_norm_eps"] = m.layer_norm_eps;
  j["pad_token_id"] = 0;
  if (rope) {
    j["rotary_value"] = false;
  } else if (deberta) {
    // rotor's deberta (nn/deberta.h): relative terms c2p and p2c through the
    // layers' own projections, the shared table under its LayerNorm, nothing
    // added to the embeddings, the MLM head under cls.predictions.
    j["relative_attention"] = true;
    j["position_biased_input"] = false;
    j["pos_att_type"] = json_io::Json::array({"p2c", "c2p"});
    j["share_att_key"] = true;
    j["norm_rel_ebd"] = "layer_norm";
    j["position_buckets"] = m.deberta_buckets > 0 ? m.deberta_buckets : -1;
    j["max_relative_positions"] = m.deberta_max_relative;
    j["legacy"] = true;
    if (classify) {
      j["pooler_hidden_size"] = m.d_model;
      j["pooler_hidden_act"] = "tanh";  // rotor's pooler, as BERT's
      j["pooler_dropout"] = m.dropout;
    }
  } else {
    j["position_embedding_type"] = "absolute";
  }
  j["tie_word_embeddings"] = true;
  j["torch_dtype"] = "float32";  // transformers 4.x
  j["dtype"] = "float32";        // 5.x
  if (classify && !choices) {
    // Hugging Face reads num_labels from id2label; problem_type picks the loss.
    const std::vector<std::string> labels =
        c.data.regression ? std::vector<std::string>{"LABEL_0"} : c.data.labels;
    json_io::Json id2label = json_io::Json::object(), label2id = json_io::Json::object();
    for (size_t i = 0; i < labels.size(); ++i) {
      id2label[std::to_string(i)] = labels[i];
      label2id[labels[i]] = i;
    }
    j["id2label"] = id2label;
    j["label2id"] = label2id;
    j["problem_type"] = c.data.regression                    ? "regression"
                        : c.task->labels == LabelMode::Multi ? "multi_label_classification"
                                                             : "single_label_classification";
  }
  return j;
}

NamedTensors hf_state_dict(const Config& c, const NamedTensors& weights) {
  const models::HfEncoderOptions m = require_encoder(c);
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : weights) by_name[name] = &t;
  const std::string& P = m.prefix;
  const bool rope = P == "roformer";
  const bool deberta = m.model_type == "deberta-v2";
  const std::string word = P + ".embeddings.word_embeddings.weight";
  auto it = by_name.find(word);
  if (it == by_name.end())
    ROTOR_FAIL("export: the weights have no {} (is this a task-{} checkpoint with position {}?)",
               word, to_string(c.task), m.position.name());
  const int64_t vocab = it->second->size(0), d = m.d_model;
  // The parameters the config's model registers, in order, with their shapes.
  nn::ParameterStore store;
  register_model(c, vocab, store);
  NamedTensors out;
  for (const auto& p : store.parameters()) {
    auto f = by_name.find(p->name);
    if (f == by_name.end()) ROTOR_FAIL("export: the weights lack parameter {}", p->name);
    if (f->second->shape() != p->shape)
      ROTOR_FAIL("export: parameter {} has shape {} but the config needs {}", p->name,
                 shape_str(f->second->shape()), shape_str(p->shape));
    out.emplace_back(hf_name(m, p->name), *f->second);
    // Hugging Face keeps tensors that rotor does not: insert them in its order
    // (DeBERTa-v2 needs neither: position_biased_input false, 0 types).
    if (p->name == word && !rope && !deberta && !m.position->learned_table)
      out.emplace_back(P + ".embeddings.position_embeddings.weight",
                       added_positions(m.position, m.max_positions, d));
    if (p->name == word && m.type_vocab_size == 0 && !deberta)
      out.emplace_back(P + ".embeddings.token_type_embeddings.weight", Tensor::zeros({1, d}));
  }
  if (rope)
    out.emplace_back("roformer.encoder.embed_positions.weight",
                     roformer_sinusoid(m.max_positions, d / m.n_heads));
  if (c.task->hf_export == HfExport::MaskedLm) {
    out.emplace_back("cls.predictions.decoder.weight", *by_name.at(word));
    out.emplace_back("cls.predictions.decoder.bias", *by_name.at("cls.predictions.bias"));
  }
  return out;
}

HfExportResult write_hf_export(
    const std::string& dir, const std::string& output_dir, const std::string& model_type,
    const std::function<NamedTensors(const NamedTensors&)>& to_hf,
    const std::function<nlohmann::ordered_json(int64_t vocab_size)>& config_of,
    HfTokenizerTemplate tokenizer, int64_t max_positions) {
  const NamedTensors weights = load_safetensors(dir + "/model.safetensors");
  // Before anything is written: non-finite weights are never saved.
  require_finite(weights, dir + "/model.safetensors",
                 "the run that saved it diverged; not exporting it");
  const NamedTensors hf = to_hf(weights);
  const int64_t vocab = hf.front().second.size(0);  // the input table comes first
  HfExportResult r;
  r.model_type = model_type;
  write_directory(output_dir, hf_export_writer(), [&](const std::string& out) {
    atomic_write_file(out + "/config.json", config_of(vocab).dump(2) + "\n");
    r.files.push_back("config.json");
    save_safetensors(out + "/model.safetensors", hf, {{"format", "pt"}});
    r.files.push_back("model.safetensors");
    write_hf_tokenizer(dir + "/spm.model", out, tokenizer, max_positions, r);
  });
  return r;
}

HfExportResult export_hf(const std::string& checkpoint, const std::string& output_dir) {
  const std::string dir = resolve_checkpoint(checkpoint);
  const std::string cfg_path = dir + "/config.yaml";
  if (!fs::exists(cfg_path)) ROTOR_FAIL("export: {} is missing", cfg_path);
  Config c = load_config(cfg_path);
  if (task_spec(c.task).model == ModelFamily::Decoder) return export_hf_lm(c, dir, output_dir);
  // A multilabel checkpoint's label vocabulary (its config may leave
  // data.labels to data.train) names the outputs: id2label.
  if (c.task->labels == LabelMode::Multi) c.data.labels = read_labels_file(dir + "/" + kLabelsFile);
  const models::HfEncoderOptions m = require_encoder(c);
  HfExportResult r = write_hf_export(
      dir, output_dir, m.model_type, [&](const NamedTensors& w) { return hf_state_dict(c, w); },
      [&](int64_t vocab) { return hf_config(c, vocab); }, HfTokenizerTemplate::Encoder,
      m.max_positions);
  if (m.activation_dropout > 0)
    r.notes.push_back("model.activation_dropout has no Hugging Face BERT equivalent; dropped");
  if (!m.position->hf.export_note.empty())
    r.notes.push_back(std::string(m.position->hf.export_note));
  return r;
}

}  // namespace rotor::checkpoint
