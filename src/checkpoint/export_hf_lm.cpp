// `rotor export --format hf` of a task-lm checkpoint (checkpoint/hf_lm.h):
//
//   config.json              GPTNeoXConfig or GPT2Config (hf_lm_config)
//   model.safetensors        the GPT-NeoX / GPT-2 tensors
//   tokenizer.json, ...      the run's tokenizer (checkpoint/hf_tokenizer.h): what
//                            AutoTokenizer loads in transformers 4.x and 5.x, giving
//                            rotor's ids: </s> (the document boundary), then the
//                            text's pieces; spiece.model, the name model.init_from
//                            reads, as for the masked LM.
//
// A checkpoint without spm.model (a run whose tokens are not SentencePiece
// pieces) gets no tokenizer files; the export says so.
#include <filesystem>
#include <unordered_map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/hf_lm.h"
#include "checkpoint/hf_tokenizer.h"
#include "core/io.h"
#include "core/json_io.h"
#include "models/decoder_lm.h"
#include "nn/position.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

NamedTensors hf_lm_state_dict(const Config& c, const NamedTensors& weights) {
  const models::HfLmOptions m = require_hf_lm(c, "export --format hf");
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : weights) by_name[name] = &t;
  const std::string word = "model.embed_tokens.weight";
  if (!by_name.count(word))
    ROTOR_FAIL("export: the weights have no {} (is this a task-lm checkpoint?)", word);
  const int64_t vocab = by_name.at(word)->size(0);
  // Every parameter the config's model registers, with its shape.
  nn::ParameterStore store;
  { models::DecoderLM model(models::lm_options(c, vocab), store); }
  for (const auto& p : store.parameters()) {
    auto f = by_name.find(p->name);
    if (f == by_name.end()) ROTOR_FAIL("export: the weights lack parameter {}", p->name);
    if (f->second->shape() != p->shape)
      ROTOR_FAIL("export: parameter {} has shape {} but the config needs {}", p->name,
                 shape_str(f->second->shape()), shape_str(p->shape));
  }
  const HfLmEmbeddingNames e = hf_lm_embedding_names(m);
  NamedTensors out;
  // The input table times rotor's scale, in f32: the product the model computes.
  std::vector<float> table = by_name.at(word)->to_floats();
  const float scale = hf_lm_embedding_scale(m);
  std::vector<float> input = table;
  for (float& x : input) x *= scale;
  out.emplace_back(e.input, Tensor::from_floats(input, {vocab, m.d_model}));
  if (!e.positions.empty())
    out.emplace_back(e.positions, *by_name.at("model.embed_positions.weight"));
  for (const HfLmLink& link : hf_lm_links(m)) {
    std::vector<Tensor> parts;
    for (const auto& n : link.rotor) parts.push_back(*by_name.at(n));
    out.emplace_back(link.hf, hf_lm_forward(link, parts, m));
  }
  out.emplace_back(e.output, m.share_embeddings ? Tensor::from_floats(table, {vocab, m.d_model})
                                                : *by_name.at("lm_head.weight"));
  return out;
}

HfExportResult export_hf_lm(const Config& c, const std::string& dir,
                            const std::string& output_dir) {
  const models::HfLmOptions m = require_hf_lm(c, "export --format hf");
  HfExportResult r = write_hf_export(
      dir, output_dir, m.model_type, [&](const NamedTensors& w) { return hf_lm_state_dict(c, w); },
      [&](int64_t vocab) { return hf_lm_config(c, vocab); }, HfTokenizerTemplate::CausalLm,
      m.max_positions);
  if (m.scale_embeddings)
    r.notes.push_back(
        "model.scale_embeddings: the input table is stored times sqrt(d_model), untied from the "
        "output projection (tie_word_embeddings false)");
  if (m.activation_dropout > 0)
    r.notes.push_back(
        "model.activation_dropout has no Hugging Face Llama/GPT-NeoX/GPT-2 equivalent; dropped");
  if (m.model_type == "llama" && m.dropout > 0)
    r.notes.push_back("model.dropout has no Hugging Face Llama equivalent; dropped");
  return r;
}

}  // namespace rotor::checkpoint
