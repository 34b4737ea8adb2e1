// `rotor export --format hf`: every tensor name and shape against the Hugging
// Face BertForMaskedLM / RoFormerForMaskedLM layouts, the tied decoder, the
// config.json fields, the CLI; and the configs/mlm presets load and describe
// the paper's models.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/export_hf.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "core/io.h"
#include "core/json_io.h"
#include "models/bert.h"
#include "models/model_config.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"
#include "support/tiny_spm.h"

namespace fs = std::filesystem;

namespace rotor {
namespace {
using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

constexpr int64_t V = 50, D = 16, H = 2, FF = 32, L = 2, P = 24;

std::string mlm_yaml(const std::string& position, int type_vocab = 2) {
  return test::tiny_hf_encoder("mlm", position)
      .set("model.type_vocab_size", std::to_string(type_vocab))
      .text();
}

// The Hugging Face state dict of BertForMaskedLM / RoFormerForMaskedLM
// (written out independently of rotor's model code).
// The L encoder layers under PREFIX.encoder.layer.i, their self-attention's
// projections named Q, K and V, and the MLM head (cls.predictions), as
// transformers names them.
void add_layers_and_head(std::map<std::string, Shape>& m, const std::string& prefix,
                         const std::string& q, const std::string& k, const std::string& v) {
  for (int i = 0; i < L; ++i) {
    const std::string l = prefix + ".encoder.layer." + std::to_string(i) + ".";
    for (const std::string& n : {"attention.self." + q, "attention.self." + k,
                                 "attention.self." + v, std::string("attention.output.dense")}) {
      m[l + n + ".weight"] = {D, D};
      m[l + n + ".bias"] = {D};
    }
    m[l + "intermediate.dense.weight"] = {FF, D};
    m[l + "intermediate.dense.bias"] = {FF};
    m[l + "output.dense.weight"] = {D, FF};
    m[l + "output.dense.bias"] = {D};
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      m[l + n + ".weight"] = {D};
      m[l + n + ".bias"] = {D};
    }
  }
  m["cls.predictions.transform.dense.weight"] = {D, D};
  m["cls.predictions.transform.dense.bias"] = {D};
  m["cls.predictions.transform.LayerNorm.weight"] = {D};
  m["cls.predictions.transform.LayerNorm.bias"] = {D};
  m["cls.predictions.bias"] = {V};
  m["cls.predictions.decoder.weight"] = {V, D};
  m["cls.predictions.decoder.bias"] = {V};
}

std::map<std::string, Shape> expected_hf(bool roformer, int64_t types = 2) {
  const std::string p = roformer ? "roformer" : "bert";
  std::map<std::string, Shape> m;
  m[p + ".embeddings.word_embeddings.weight"] = {V, D};
  if (!roformer)
    m[p + ".embeddings.position_embeddings.weight"] = {P, D};
  else
    m["roformer.encoder.embed_positions.weight"] = {P, D / H};
  m[p + ".embeddings.token_type_embeddings.weight"] = {types, D};
  m[p + ".embeddings.LayerNorm.weight"] = {D};
  m[p + ".embeddings.LayerNorm.bias"] = {D};
  add_layers_and_head(m, p, "query", "key", "value");
  return m;
}

// A checkpoint directory as the trainer writes it (weights, config, tokenizer).
void write_checkpoint(const std::string& dir, const Config& c) {
  fs::create_directories(dir);
  nn::ParameterStore store;
  models::BertForMaskedLM model(models::bert_options(c, V), store);
  store.allocate(Device::cpu());
  store.initialize(1);
  // Non-trivial biases so the tied decoder bias is checked for real.
  store.find("cls.predictions.bias")->value.copy_from(test::random_tensor({V}, 3));
  const std::string yaml = dump_config(c);
  checkpoint::save_weights(dir + "/model.safetensors", store, yaml);
  atomic_write_file(dir + "/config.yaml", yaml);
  test::write_tiny_spm_model(dir + "/spm.model", static_cast<int32_t>(V), true);
}

void check_export(const std::string& position, bool roformer, int type_vocab = 2) {
  test::TempDir tmp;
  const Config c = load_config_from_string(mlm_yaml(position, type_vocab));
  write_checkpoint(tmp / "ckpt", c);
  const checkpoint::HfExportResult r = checkpoint::export_hf(tmp / "ckpt", tmp / "hf");
  EXPECT_EQ(r.model_type, roformer ? "roformer" : "bert");
  SafetensorsFile f(tmp / "hf/model.safetensors");
  std::map<std::string, Shape> got;
  for (const auto& e : f.entries()) {
    got[e.name] = e.shape;
    EXPECT_EQ(e.dtype, DType::F32) << e.name;
  }
  EXPECT_EQ(got, expected_hf(roformer, std::max(type_vocab, 1)));
  const std::string p = roformer ? "roformer" : "bert";
  EXPECT_EQ(f.load("cls.predictions.decoder.weight").to_floats(),
            f.load(p + ".embeddings.word_embeddings.weight").to_floats());
  EXPECT_EQ(f.load("cls.predictions.decoder.bias").to_floats(),
            f.load("cls.predictions.bias").to_floats());
  // Weights are copied unchanged.
  SafetensorsFile src(tmp / "ckpt/model.safetensors");
  for (const auto& e : src.entries())
    EXPECT_EQ(f.load(e.name).to_floats(), src.load(e.name).to_floats()) << e.name;

  const json_io::Json j = json_io::load(tmp / "hf/config.json");
  // Keys in the order Hugging Face writes them.
  EXPECT_EQ(j.begin().key(), "architectures");
  EXPECT_EQ(read_file(tmp / "hf/config.json").rfind("{\n  \"architectures\": [\n", 0), 0u);
  EXPECT_EQ(j.at("architectures").at(0).get<std::string>(),
            roformer ? "RoFormerForMaskedLM" : "BertForMaskedLM");
  EXPECT_EQ(j.at("model_type").get<std::string>(), p);
  EXPECT_EQ(j.at("vocab_size").get<int64_t>(), V);
  EXPECT_EQ(j.at("hidden_size").get<int64_t>(), D);
  EXPECT_EQ(j.at("num_hidden_layers").get<int64_t>(), L);
  EXPECT_EQ(j.at("num_attention_heads").get<int64_t>(), H);
  EXPECT_EQ(j.at("intermediate_size").get<int64_t>(), FF);
  EXPECT_EQ(j.at("hidden_act").get<std::string>(), "gelu_new");
  EXPECT_EQ(j.at("max_position_embeddings").get<int64_t>(), P);
  EXPECT_EQ(j.at("type_vocab_size").get<int64_t>(), std::max(type_vocab, 1));
  EXPECT_EQ(j.at("pad_token_id").get<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(j.at("layer_norm_eps").get<double>(), 1e-12);
  EXPECT_DOUBLE_EQ(j.at("hidden_dropout_prob").get<double>(), 0.1);
  if (roformer) {
    EXPECT_EQ(j.at("embedding_size").get<int64_t>(), D);
    EXPECT_FALSE(j.at("rotary_value").get<bool>());
    // Hugging Face's table: [sin(p w_j) | cos(p w_j)], w_j = 10000^(-2j/dim).
    const std::vector<float> t = f.load("roformer.encoder.embed_positions.weight").to_floats();
    const int64_t dim = D / H, pos = 5, j1 = 1;
    const double a = pos / std::pow(10000.0, 2.0 * j1 / dim);
    EXPECT_NEAR(t[pos * dim + j1], std::sin(a), 1e-6);
    EXPECT_NEAR(t[pos * dim + dim / 2 + j1], std::cos(a), 1e-6);
  } else {
    EXPECT_EQ(j.at("position_embedding_type").get<std::string>(), "absolute");
  }
  EXPECT_EQ(j.at("dtype").get<std::string>(), "float32");
  EXPECT_EQ(read_file(tmp / "hf/spiece.model"), read_file(tmp / "ckpt/spm.model"));
  const json_io::Json tc = json_io::load(tmp / "hf/tokenizer_config.json");
  EXPECT_EQ(tc.at("tokenizer_class").get<std::string>(), "PreTrainedTokenizerFast");
  EXPECT_EQ(tc.at("mask_token").get<std::string>(), "[MASK]");
  // [CLS] a [SEP] b [SEP], token types 0 then 1, as rotor packs a pair.
  const json_io::Json post = json_io::load(tmp / "hf/tokenizer.json").at("post_processor");
  EXPECT_EQ(post.at("pair").size(), 5u);
  EXPECT_EQ(post.at("pair").at(3).at("Sequence").at("type_id").get<int>(), 1);
  EXPECT_EQ(post.at("special_tokens").at("[CLS]").at("ids").at(0).get<int>(), 5);
  EXPECT_EQ(post.at("special_tokens").at("[SEP]").at("ids").at(0).get<int>(), 6);
}

TEST(MlmExport, BertLearned) {
  check_export("learned", false);
}
TEST(MlmExport, BertSinusoidalNoTypes) {
  check_export("sinusoidal", false, 0);
}
TEST(MlmExport, BertNone) {
  check_export("none", false);
}
TEST(MlmExport, RoFormer) {
  check_export("rope", true);
}

// DebertaV2ForMaskedLM's state dict (transformers' names, written out
// independently of rotor's) with REL_ROWS relative embeddings (2 buckets, or
// 2 max_relative_positions without buckets).
std::map<std::string, Shape> expected_deberta(int64_t rel_rows) {
  std::map<std::string, Shape> m;
  m["deberta.embeddings.word_embeddings.weight"] = {V, D};
  m["deberta.embeddings.token_type_embeddings.weight"] = {2, D};
  m["deberta.embeddings.LayerNorm.weight"] = {D};
  m["deberta.embeddings.LayerNorm.bias"] = {D};
  m["deberta.encoder.rel_embeddings.weight"] = {rel_rows, D};
  m["deberta.encoder.LayerNorm.weight"] = {D};
  m["deberta.encoder.LayerNorm.bias"] = {D};
  add_layers_and_head(m, "deberta", "query_proj", "key_proj", "value_proj");
  return m;
}

TEST(MlmExport, DebertaV2) {
  for (const int64_t buckets : {8, 0}) {
    test::TempDir tmp;
    const Config c =
        load_config_from_string(test::tiny_hf_encoder("mlm", "deberta").text(), "x",
                                {"model.deberta.position_buckets=" + std::to_string(buckets),
                                 "model.deberta.max_relative_positions=12"});
    write_checkpoint(tmp / "ckpt", c);
    const checkpoint::HfExportResult r = checkpoint::export_hf(tmp / "ckpt", tmp / "hf");
    EXPECT_EQ(r.model_type, "deberta-v2");
    SafetensorsFile f(tmp / "hf/model.safetensors");
    std::map<std::string, Shape> got;
    for (const auto& e : f.entries()) got[e.name] = e.shape;
    EXPECT_EQ(got, expected_deberta(buckets > 0 ? 2 * buckets : 24));
    // Weights unchanged under their new names; the decoder tied.
    SafetensorsFile src(tmp / "ckpt/model.safetensors");
    EXPECT_EQ(f.load("deberta.encoder.layer.1.attention.self.key_proj.bias").to_floats(),
              src.load("bert.encoder.layer.1.attention.self.key.bias").to_floats());
    EXPECT_EQ(f.load("deberta.encoder.rel_embeddings.weight").to_floats(),
              src.load("bert.encoder.rel_embeddings.weight").to_floats());
    EXPECT_EQ(f.load("cls.predictions.decoder.weight").to_floats(),
              src.load("bert.embeddings.word_embeddings.weight").to_floats());
    const json_io::Json j = json_io::load(tmp / "hf/config.json");
    EXPECT_EQ(j.at("architectures").at(0).get<std::string>(), "DebertaV2ForMaskedLM");
    EXPECT_EQ(j.at("model_type").get<std::string>(), "deberta-v2");
    EXPECT_TRUE(j.at("relative_attention").get<bool>());
    EXPECT_FALSE(j.at("position_biased_input").get<bool>());
    EXPECT_TRUE(j.at("share_att_key").get<bool>());
    EXPECT_EQ(j.at("pos_att_type"), json_io::Json::array({"p2c", "c2p"}));
    EXPECT_EQ(j.at("norm_rel_ebd").get<std::string>(), "layer_norm");
    EXPECT_EQ(j.at("position_buckets").get<int64_t>(), buckets > 0 ? buckets : -1);
    EXPECT_EQ(j.at("max_relative_positions").get<int64_t>(), 12);
    EXPECT_EQ(j.at("type_vocab_size").get<int64_t>(), 2);
    EXPECT_TRUE(j.at("legacy").get<bool>());
    EXPECT_FALSE(j.contains("position_embedding_type"));
  }
}

TEST(MlmExport, RotorNamesAreHuggingFaceNames) {
  // The model registers exactly the HF names minus those the export adds.
  for (bool rope : {false, true}) {
    const Config c = load_config_from_string(mlm_yaml(rope ? "rope" : "learned"));
    nn::ParameterStore store;
    models::BertForMaskedLM model(models::bert_options(c, V), store);
    std::map<std::string, Shape> expected = expected_hf(rope);
    expected.erase("cls.predictions.decoder.weight");
    expected.erase("cls.predictions.decoder.bias");
    expected.erase("roformer.encoder.embed_positions.weight");
    std::map<std::string, Shape> got;
    for (const auto& p : store.parameters()) got[p->name] = p->shape;
    EXPECT_EQ(got, expected);
  }
}

TEST(MlmExport, Errors) {
  test::TempDir tmp;
  Config c = load_config_from_string(mlm_yaml("learned"));
  write_checkpoint(tmp / "ckpt", c);
  // A config that disagrees with the weights.
  Config other = c;
  other.model.d_ff = 64;
  atomic_write_file(tmp / "ckpt/config.yaml", dump_config(other));
  EXPECT_THROW(checkpoint::export_hf(tmp / "ckpt", tmp / "hf"), Error);
  // A translation checkpoint.
  Config tr;
  atomic_write_file(tmp / "ckpt/config.yaml", dump_config(tr));
  EXPECT_THROW(checkpoint::export_hf(tmp / "ckpt", tmp / "hf"), Error);
  // RoFormer with another rotary base.
  Config rope = load_config_from_string(mlm_yaml("rope"));
  rope.model.rope.theta = 500.0;
  write_checkpoint(tmp / "rope", rope);
  EXPECT_THROW(checkpoint::export_hf(tmp / "rope", tmp / "hf2"), Error);
  EXPECT_THROW(checkpoint::export_hf(tmp / "missing", tmp / "hf3"), Error);
}

TEST(MlmExport, Cli) {
  test::TempDir tmp;
  write_checkpoint(tmp / "ckpt", load_config_from_string(mlm_yaml("rope")));
  const std::string cmd = std::string(ROTOR_BINARY) + " export --checkpoint " + (tmp / "ckpt") +
                          " --format hf --output " + (tmp / "out") + " > " + (tmp / "log") +
                          " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(tmp / "log");
  EXPECT_TRUE(fs::exists(tmp / "out/model.safetensors"));
  EXPECT_TRUE(fs::exists(tmp / "out/config.json"));
  EXPECT_NE(read_file(tmp / "log").find("roformer"), std::string::npos);
  const std::string bad = std::string(ROTOR_BINARY) + " export --checkpoint " + (tmp / "nothing") +
                          " --format hf --output " + (tmp / "out2") + " > " + (tmp / "log2") +
                          " 2>&1";
  const int rc = std::system(bad.c_str());
  EXPECT_NE(rc, 0);
  EXPECT_NE(read_file(tmp / "log2").find("rotor: error:"), std::string::npos)
      << read_file(tmp / "log2");
}

// ---- the configs/mlm presets -------------------------------------------------

Config preset(const std::string& name) {
  return load_config(std::string(ROTOR_SOURCE_DIR) + "/configs/mlm/" + name + ".yaml");
}

int64_t parameter_count(const Config& c, int64_t vocab) {
  nn::ParameterStore store;
  models::BertForMaskedLM model(models::bert_options(c, vocab), store);
  int64_t n = 0;
  for (const auto& p : store.parameters()) n += shape_numel(p->shape);
  return n;
}

TEST(MlmConfigs, BasePresetsArePaperSettings) {
  for (const char* name : {"bert_base", "roformer_base"}) {
    const Config c = preset(name);
    EXPECT_EQ(c.task, *task_kind("mlm")) << name;
    EXPECT_EQ(c.model.encoder_layers, 12);
    EXPECT_EQ(c.model.d_model, 768);
    EXPECT_EQ(c.model.n_heads, 12);
    EXPECT_EQ(c.model.d_ff, 3072);
    EXPECT_EQ(c.model.activation, ops::Activation::GELU);
    EXPECT_EQ(c.model.norm, NormPlacement::Post);
    EXPECT_EQ(c.train.batch_size, 64);
    EXPECT_EQ(c.data.seq_len, 512);
    EXPECT_EQ(c.train.max_updates, 100000);
    EXPECT_EQ(c.optim.name, OptimizerName::AdamW);
    EXPECT_DOUBLE_EQ(c.optim.lr, 1e-5);
    EXPECT_DOUBLE_EQ(c.data.mask_prob, 0.15);
  }
  EXPECT_EQ(preset("bert_base").model.position, nn::PositionKind::Learned);
  EXPECT_EQ(preset("roformer_base").model.position, nn::PositionKind::Rope);
  // bert-base-uncased's BertForMaskedLM (vocab 30522) has 109,514,298 parameters.
  EXPECT_EQ(parameter_count(preset("bert_base"), 30522), 109514298);
  // RoFormer drops the 512 x 768 position table.
  EXPECT_EQ(parameter_count(preset("roformer_base"), 30522), 109514298 - 512 * 768);
  // The paper's from-scratch advice works as an override.
  EXPECT_DOUBLE_EQ(
      load_config(std::string(ROTOR_SOURCE_DIR) + "/configs/mlm/bert_base.yaml", {"optim.lr=1e-4"})
          .optim.lr,
      1e-4);
}

TEST(MlmConfigs, TinyPresetsDifferOnlyInPosition) {
  Config b = preset("bert_tiny"), r = preset("roformer_tiny");
  EXPECT_EQ(b.task, *task_kind("mlm"));
  EXPECT_EQ(b.model.position, nn::PositionKind::Learned);
  EXPECT_EQ(r.model.position, nn::PositionKind::Rope);
  EXPECT_NE(b.output_dir, r.output_dir);
  r.model.position = b.model.position;
  r.output_dir = b.output_dir;
  EXPECT_TRUE(b == r) << dump_config(b) << "\nvs\n" << dump_config(r);
  EXPECT_LE(b.data.seq_len, b.model.max_positions);
  EXPECT_NO_THROW(validate_for_training(b));
  EXPECT_LT(parameter_count(b, b.data.vocab_size), 3000000);
}

}  // namespace
}  // namespace rotor
