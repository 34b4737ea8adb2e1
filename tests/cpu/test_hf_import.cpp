// model.init_from (checkpoint/import_hf.h): rotor -> Hugging Face -> rotor is
// bitwise for BERT and RoFormer, masked-LM and classifiers; a masked-LM
// export initializes a classifier's encoder and leaves its head fresh; a
// classifier's label rows follow the label names; every
// architecture mismatch, a pickle-only directory, a missing or misshapen
// tensor and a foreign RoFormer table are one clear error; F16 weights,
// legacy LayerNorm names and sharded files are read.
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/export_hf.h"
#include "checkpoint/import_hf.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "core/io.h"
#include "core/json_io.h"
#include "models/model_config.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace fs = std::filesystem;

namespace rotor {
namespace {

constexpr int64_t V = 50;

Config make_config(const std::string& task, const std::string& position) {
  test::TinyConfig yaml = test::tiny_hf_encoder(task, position);
  if (task == "classification") yaml.set("data.labels", "[a, b, c]");
  return load_config_from_string(yaml.text());
}

// Registers the model of `c` in `store`, allocated, initialized from `seed`
// and moved off its init so that every value is distinct.
void build(const Config& c, nn::ParameterStore& store, uint64_t seed) {
  if (c.task == *task_kind("classification")) {
    models::BertForSequenceClassification m(models::bert_classifier_options(c, V), store);
  } else {
    models::BertForMaskedLM m(models::bert_options(c, V), store);
  }
  store.allocate(Device::cpu());
  store.initialize(seed);
  std::vector<float> v = store.values().to_floats();
  const std::vector<float> n = test::random_floats(v.size(), seed + 1, -0.1f, 0.1f);
  for (size_t i = 0; i < v.size(); ++i) v[i] += n[i];
  store.values().copy_from(Tensor::from_floats(v, {static_cast<int64_t>(v.size())}));
}

// A checkpoint of `c` (as the trainer writes it) exported to DIR/hf.
std::vector<float> export_model(const Config& c, const test::TempDir& dir, uint64_t seed = 1) {
  nn::ParameterStore store;
  build(c, store, seed);
  const std::string ckpt = dir / "ckpt";
  fs::create_directories(ckpt);
  const std::string yaml = dump_config(c);
  checkpoint::save_weights(ckpt + "/model.safetensors", store, yaml);
  atomic_write_file(ckpt + "/config.yaml", yaml);
  checkpoint::export_hf(ckpt, dir / "hf");
  return store.values().to_floats();
}

checkpoint::HfImportResult import_into(const Config& c, const std::string& dir,
                                       nn::ParameterStore& store,
                                       const std::vector<std::string>& labels = {}) {
  build(c, store, 99);  // other values than the exported ones
  return checkpoint::import_hf(dir, c, store, labels);
}

std::string import_error(const Config& c, const std::string& dir) {
  nn::ParameterStore store;
  try {
    import_into(c, dir, store);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

struct RoundTripCase {
  const char* task;
  const char* position;
};

class HfRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(HfRoundTrip, IsBitwise) {
  const Config c = make_config(GetParam().task, GetParam().position);
  test::TempDir tmp;
  const std::vector<float> original = export_model(c, tmp);
  nn::ParameterStore store;
  const checkpoint::HfImportResult r = import_into(c, tmp / "hf", store);
  const char* type = c.model.position == nn::PositionKind::Rope ? "roformer"
                     : c.model.position->disentangled           ? "deberta-v2"
                                                                : "bert";
  EXPECT_EQ(r.model_type, type);
  EXPECT_TRUE(r.fresh.empty());
  EXPECT_TRUE(r.unused.empty()) << r.unused.front();
  EXPECT_EQ(r.loaded, static_cast<int64_t>(store.parameters().size()));
  EXPECT_EQ(store.values().to_floats(), original);  // bitwise
}

INSTANTIATE_TEST_SUITE_P(
    Models, HfRoundTrip,
    ::testing::Values(RoundTripCase{"mlm", "learned"}, RoundTripCase{"mlm", "rope"},
                      RoundTripCase{"mlm", "deberta"}, RoundTripCase{"classification", "learned"},
                      RoundTripCase{"classification", "rope"},
                      RoundTripCase{"classification", "deberta"}),
    [](const auto& info) { return std::string(info.param.task) + "_" + info.param.position; });

TEST(HfImport, MaskedLmExportInitializesTheClassifierEncoder) {
  for (const char* position : {"learned", "rope"}) {
    test::TempDir tmp;
    const Config mlm = make_config("mlm", position);
    nn::ParameterStore pre;
    build(mlm, pre, 1);
    export_model(mlm, tmp, 1);
    const Config cls = make_config("classification", position);
    nn::ParameterStore store;
    const checkpoint::HfImportResult r = import_into(cls, tmp / "hf", store);
    EXPECT_EQ(r.fresh.size(), 4u);   // the pooler or dense, and the classifier
    EXPECT_EQ(r.unused.size(), 5u);  // the MLM head
    for (const auto& p : store.parameters()) {
      const nn::Parameter* q = pre.find(p->name);
      if (q) {
        EXPECT_EQ(p->value.to_floats(), q->value.to_floats()) << p->name;
      } else {
        EXPECT_NE(std::find(r.fresh.begin(), r.fresh.end(), p->name), r.fresh.end()) << p->name;
      }
    }
    EXPECT_NE(r.summary("D").find("4 newly initialized"), std::string::npos);
  }
}

// Rewrites one key of DIR/config.json.
void set_key(const std::string& dir, const std::string& key, const json_io::Json& value) {
  json_io::Json j = json_io::load(dir + "/config.json");
  j[key] = value;
  atomic_write_file(dir + "/config.json", j.dump(2));
}

// One config.json key set to a value the import must refuse.
struct Mismatch {
  const char* key;
  json_io::Json value;
  const char* expect;  // in the one-line error
};

// Each mismatch on a fresh copy of HF/config.json (cfg): the import of c
// fails in one line that names config.json and says `expect`. Leaves
// config.json as cfg.
void expect_one_line_refusals(const Config& c, const std::string& hf, const std::string& cfg,
                              const std::vector<Mismatch>& cases) {
  for (const Mismatch& k : cases) {
    atomic_write_file(hf + "/config.json", cfg);
    set_key(hf, k.key, k.value);
    const std::string e = import_error(c, hf);
    EXPECT_NE(e.find(k.expect), std::string::npos) << k.key << ": " << e;
    EXPECT_NE(e.find("config.json: "), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  atomic_write_file(hf + "/config.json", cfg);
}

TEST(HfImport, ArchitectureMismatchesAreOneLine) {
  test::TempDir tmp;
  const Config c = make_config("mlm", "rope");
  export_model(c, tmp);
  const std::string hf = tmp / "hf";
  const std::string cfg = read_file(hf + "/config.json");
  expect_one_line_refusals(
      c, hf, cfg,
      {
          {"hidden_size", 32, "hidden_size is 32, but model.d_model is 16"},
          {"num_hidden_layers", 3, "num_hidden_layers is 3, but model.encoder_layers is 2"},
          {"num_attention_heads", 4, "num_attention_heads is 4, but model.n_heads is 2"},
          {"intermediate_size", 64, "intermediate_size is 64, but model.d_ff is 32"},
          {"vocab_size", 51, "vocab_size is 51, but the tokenizer's vocabulary size is 50"},
          {"max_position_embeddings", 512,
           "max_position_embeddings is 512, but model.max_positions is 24"},
          {"type_vocab_size", 1, "type_vocab_size is 1, but model.type_vocab_size is 2"},
          {"hidden_act", "relu", "hidden_act is relu, but model.activation is gelu"},
          {"layer_norm_eps", 1e-5, "layer_norm_eps is 1e-05, but model.layer_norm_eps is 1e-12"},
          {"model_type", "bert",
           "model_type bert has learned absolute positions, but model.position is rope"},
          {"model_type", "gpt2",
           "model_type is gpt2; rotor initializes from bert, roformer or deberta-v2"},
          {"model_type", "deberta-v2",
           "model_type deberta-v2 has DeBERTa-v2's disentangled attention, but model.position is "
           "rope (set model.position: deberta)"},
          {"rotary_value", true, "rotary_value is true"},
          {"embedding_size", 8, "embedding_size is 8, but hidden_size"},
          {"tie_word_embeddings", false, "tie_word_embeddings is false"},
      });
  // A model with RMSNorm has no Hugging Face BERT/RoFormer form: refused both ways.
  Config rms = c;
  rms.model.norm_type = NormType::RmsNorm;
  EXPECT_NE(import_error(rms, hf).find("(Hugging Face roformer): model.norm_type is rms_norm, and "
                                       "Hugging Face BERT/RoFormer/DeBERTa-v2 normalize with "
                                       "LayerNorm"),
            std::string::npos)
      << import_error(rms, hf);
  // Nor do Llama's other settings, each named.
  for (const auto& [key, message] : std::vector<std::pair<std::string, std::string>>{
           {"gated_ffn", "model.gated_ffn is true, and Hugging Face"},
           {"bias", "model.bias is false, and Hugging Face"},
           {"kv_heads", "model.kv_heads is 1, and Hugging Face"}}) {
    Config llama = c;
    if (key == "gated_ffn") llama.model.gated_ffn = true;
    if (key == "bias") llama.model.bias = false;
    if (key == "kv_heads") llama.model.kv_heads = 1;
    EXPECT_NE(import_error(llama, hf).find(message), std::string::npos)
        << key << ": " << import_error(llama, hf);
    test::TempDir tmp3;
    std::string error = "no error";
    try {
      export_model(llama, tmp3);
    } catch (const Error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(message), std::string::npos) << key << ": " << error;
  }
  test::TempDir tmp2;
  try {
    export_model(rms, tmp2);
    ADD_FAILURE() << "an RMSNorm encoder exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm_type is rms_norm, and Hugging Face "
                                         "BERT/RoFormer/DeBERTa-v2 normalize with LayerNorm"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp2 / "hf"));
  // gelu (erf) and gelu_new both run as rotor's GELU; the former with a note.
  set_key(hf, "hidden_act", "gelu");
  nn::ParameterStore store;
  EXPECT_FALSE(import_into(c, hf, store).notes.empty());
}

// DebertaV2Config's settings that rotor's deberta computes otherwise.
TEST(HfImport, DebertaSettingsMismatchesAreOneLine) {
  test::TempDir tmp;
  const Config c = make_config("mlm", "deberta");
  export_model(c, tmp);
  const std::string hf = tmp / "hf";
  const std::string cfg = read_file(hf + "/config.json");
  expect_one_line_refusals(
      c, hf, cfg,
      {
          {"relative_attention", false, "relative_attention is false"},
          {"position_biased_input", true, "position_biased_input is true"},
          {"position_biased_input", nullptr, "position_biased_input is true"},  // the default
          {"share_att_key", false, "share_att_key is false"},
          {"share_att_key", nullptr, "share_att_key is false"},
          {"pos_att_type", "c2p", "pos_att_type is not c2p and p2c"},
          {"pos_att_type", json_io::Json::array({"c2p", "p2p"}), "pos_att_type is not c2p and p2c"},
          {"norm_rel_ebd", "none", "norm_rel_ebd is none"},
          {"conv_kernel_size", 3, "conv_kernel_size is 3"},
          {"position_buckets", 128,
           "position_buckets is 128, but model.deberta.position_buckets is 256"},
          {"max_relative_positions", 64,
           "max_relative_positions is 64, but model.deberta.max_relative_positions is 512"},
          {"max_relative_positions", -1,  // then max_position_embeddings
           "max_relative_positions is 24, but model.deberta.max_relative_positions is 512"},
          {"type_vocab_size", 0, "type_vocab_size is 0, but model.type_vocab_size is 2"},
          {"embedding_size", 8, "embedding_size is 8, but hidden_size is 16"},
          {"model_type", "bert",
           "model_type bert has learned absolute positions, but model.position is deberta"},
      });
  // transformers' own spellings of the same settings load.
  set_key(hf, "pos_att_type", "P2C| c2p");
  set_key(hf, "norm_rel_ebd", "layer_norm|conv");
  EXPECT_EQ(import_error(c, hf), "no error");
}

// DebertaV2ForMaskedLM with legacy false keeps the MLM head under
// lm_predictions.lm_head: the same computation, read bitwise.
TEST(HfImport, DebertaLmPredictionsHead) {
  test::TempDir tmp;
  const Config c = make_config("mlm", "deberta");
  const std::vector<float> original = export_model(c, tmp);
  const std::string hf = tmp / "hf";
  checkpoint::NamedTensors renamed;
  for (auto& [name, t] : checkpoint::load_safetensors(hf + "/model.safetensors")) {
    if (name.rfind("cls.predictions.decoder.", 0) == 0) continue;  // tied
    std::string n = name;
    if (n == "cls.predictions.bias") n = "lm_predictions.lm_head.bias";
    if (n.rfind("cls.predictions.transform.", 0) == 0)
      n = "lm_predictions.lm_head." + n.substr(std::string("cls.predictions.transform.").size());
    renamed.emplace_back(n, t);
  }
  checkpoint::save_safetensors(hf + "/model.safetensors", renamed);
  set_key(hf, "legacy", false);
  nn::ParameterStore store;
  const checkpoint::HfImportResult r = import_into(c, hf, store);
  EXPECT_TRUE(r.fresh.empty());
  EXPECT_TRUE(r.unused.empty()) << r.unused.front();
  EXPECT_EQ(store.values().to_floats(), original);
}

// A DeBERTa classifier's pooler runs tanh in rotor: another act is a note.
TEST(HfImport, DebertaPoolerActIsNoted) {
  test::TempDir tmp;
  const Config c = make_config("classification", "deberta");
  export_model(c, tmp);
  nn::ParameterStore store;
  EXPECT_TRUE(import_into(c, tmp / "hf", store).notes.empty());
  set_key(tmp / "hf", "pooler_hidden_act", "gelu");
  nn::ParameterStore again;
  const checkpoint::HfImportResult r = import_into(c, tmp / "hf", again);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("pooler_hidden_act is gelu"), std::string::npos) << r.notes[0];
}

TEST(HfImport, FilesAndTensorsAreChecked) {
  test::TempDir tmp;
  const Config c = make_config("classification", "learned");
  export_model(c, tmp);
  const std::string hf = tmp / "hf";
  // A misshapen tensor (the classifier's rows of another width).
  checkpoint::NamedTensors w = checkpoint::load_safetensors(hf + "/model.safetensors");
  checkpoint::NamedTensors narrow(w.begin(), w.end());
  for (auto& [name, t] : narrow)
    if (name == "classifier.weight") t = Tensor::zeros({3, 8});
  checkpoint::save_safetensors(hf + "/model.safetensors", narrow);
  EXPECT_NE(
      import_error(c, hf).find("classifier.weight has shape [3, 8], the model expects [3, 16]"),
      std::string::npos);
  // A missing encoder tensor.
  checkpoint::NamedTensors less(w.begin(), w.end());
  less.erase(std::find_if(less.begin(), less.end(), [](const auto& t) {
    return t.first == "bert.encoder.layer.1.output.dense.weight";
  }));
  checkpoint::save_safetensors(hf + "/model.safetensors", less);
  EXPECT_NE(import_error(c, hf).find("lack bert.encoder.layer.1.output.dense.weight"),
            std::string::npos);
  // Only a pickle: refused.
  fs::remove(hf + "/model.safetensors");
  atomic_write_file(hf + "/pytorch_model.bin", "not even a pickle");
  EXPECT_NE(import_error(c, hf).find("pytorch_model.bin (a pickle, which runs code"),
            std::string::npos);
  fs::remove(hf + "/pytorch_model.bin");
  EXPECT_NE(import_error(c, hf).find("no model.safetensors"), std::string::npos);
  EXPECT_NE(import_error(c, tmp / "nowhere").find("not a directory"), std::string::npos);
  fs::remove(hf + "/config.json");
  EXPECT_NE(import_error(c, hf).find("no config.json"), std::string::npos);
}

// The rows of `name` in `store`, each as a vector.
std::vector<std::vector<float>> rows_of(const nn::ParameterStore& store, const std::string& name) {
  const nn::Parameter* p = store.find(name);
  EXPECT_NE(p, nullptr) << name;
  if (!p) return {};
  const std::vector<float> v = p->value.to_floats();
  const size_t n = static_cast<size_t>(p->shape[0]), w = v.size() / n;
  std::vector<std::vector<float>> rows;
  for (size_t r = 0; r < n; ++r) rows.emplace_back(v.begin() + r * w, v.begin() + (r + 1) * w);
  return rows;
}

// A classifier's label rows are read by label name (checkpoint/label_rows.h):
// reordered, partly read, or left fresh, each with a note; transformers'
// default names (LABEL_i) name nothing.
TEST(HfImport, LabelRowsFollowTheLabelNames) {
  for (const char* position : {"learned", "rope"}) {
    SCOPED_TRACE(position);
    const std::string out = std::string(position) == "rope" ? "classifier.out_proj" : "classifier";
    test::TempDir tmp;
    const Config c = make_config("classification", position);  // labels a, b, c
    nn::ParameterStore exported;
    build(c, exported, 1);
    export_model(c, tmp, 1);
    const std::string hf = tmp / "hf";
    const auto ew = rows_of(exported, out + ".weight"), eb = rows_of(exported, out + ".bias");
    auto with = [&](const std::string& labels) {
      return load_config_from_string(dump_config(c), "x", {"data.labels=" + labels});
    };
    const auto note = [](const checkpoint::HfImportResult& r) {
      return r.notes.empty() ? std::string("no note") : r.notes.front();
    };
    {  // the same labels in another order: the rows follow the names
      nn::ParameterStore s;
      const auto r = import_into(with("[c, a, b]"), hf, s, {"c", "a", "b"});
      EXPECT_NE(note(r).find("lists the task's 3 labels in another order"), std::string::npos)
          << note(r);
      EXPECT_TRUE(r.fresh.empty());
      EXPECT_EQ(rows_of(s, out + ".weight"),
                (std::vector<std::vector<float>>{ew[2], ew[0], ew[1]}));
      EXPECT_EQ(rows_of(s, out + ".bias"), (std::vector<std::vector<float>>{eb[2], eb[0], eb[1]}));
    }
    {  // one label more: its row stays as initialized
      nn::ParameterStore fresh, s;
      build(with("[a, b, c, d]"), fresh, 99);
      const auto r = import_into(with("[a, b, c, d]"), hf, s, {"a", "b", "c", "d"});
      EXPECT_NE(note(r).find("3 of the task's 4 labels are " + hf +
                             "'s: their classifier rows are read by name; those of d keep"),
                std::string::npos)
          << note(r);
      const auto w = rows_of(s, out + ".weight");
      EXPECT_EQ(w, (std::vector<std::vector<float>>{ew[0], ew[1], ew[2],
                                                    rows_of(fresh, out + ".weight")[3]}));
    }
    {  // no label shared: the label rows stay fresh, the rest loads
      nn::ParameterStore fresh, s;
      build(with("[x, y, z]"), fresh, 99);
      const auto r = import_into(with("[x, y, z]"), hf, s, {"x", "y", "z"});
      EXPECT_NE(
          note(r).find("none of the task's labels (x, y, z) is one of " + hf + "'s (a, b, c)"),
          std::string::npos)
          << note(r);
      EXPECT_EQ(r.fresh, (std::vector<std::string>{out + ".weight", out + ".bias"}));
      EXPECT_EQ(r.unused.size(), 2u);
      EXPECT_EQ(rows_of(s, out + ".weight"), rows_of(fresh, out + ".weight"));
      EXPECT_NE(r.summary("D").find("2 newly initialized"), std::string::npos) << r.summary("D");
    }
    // transformers' default names name nothing: rows as they are, and
    // another count leaves them fresh.
    json_io::Json id2label = json_io::Json::object();
    for (int i = 0; i < 3; ++i) id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    set_key(hf, "id2label", id2label);
    {
      nn::ParameterStore s;
      const auto r = import_into(with("[c, a, b]"), hf, s, {"c", "a", "b"});
      EXPECT_TRUE(r.notes.empty()) << note(r);
      EXPECT_EQ(rows_of(s, out + ".weight"), ew);
    }
    {
      nn::ParameterStore s;
      const auto r = import_into(with("[a, b, c, d]"), hf, s, {"a", "b", "c", "d"});
      EXPECT_NE(note(r).find("'s classifier has 3 outputs, the task 4: its label rows keep"),
                std::string::npos)
          << note(r);
      EXPECT_EQ(r.fresh.size(), 2u);
    }
  }
}

TEST(HfImport, HalfPrecisionLegacyNamesAndShards) {
  test::TempDir tmp;
  const Config c = make_config("mlm", "learned");
  const std::vector<float> original = export_model(c, tmp);
  const std::string hf = tmp / "hf";
  checkpoint::NamedTensors w = checkpoint::load_safetensors(hf + "/model.safetensors");
  // Half the tensors in a second shard; LayerNorm as gamma/beta; every weight F16.
  checkpoint::NamedTensors a, b;
  json_io::Json map = json_io::Json::object();
  for (size_t i = 0; i < w.size(); ++i) {
    std::string name = w[i].first;
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"LayerNorm.weight", "LayerNorm.gamma"},
          {"LayerNorm.bias", "LayerNorm.beta"}})
      if (name.size() > from.size() &&
          name.compare(name.size() - from.size(), from.size(), from) == 0)
        name = name.substr(0, name.size() - from.size()) + to;
    const Tensor& t = w[i].second;
    Tensor h = Tensor::from_floats(t.to_floats(), t.shape(), DType::F16);
    (i % 2 ? a : b).emplace_back(name, h);
    map[name] = i % 2 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  fs::remove(hf + "/model.safetensors");
  checkpoint::save_safetensors(hf + "/model-00001-of-00002.safetensors", a);
  checkpoint::save_safetensors(hf + "/model-00002-of-00002.safetensors", b);
  json_io::Json index = json_io::Json::object();
  index["weight_map"] = map;
  atomic_write_file(hf + "/model.safetensors.index.json", index.dump());
  nn::ParameterStore store;
  const checkpoint::HfImportResult r = import_into(c, hf, store);
  EXPECT_TRUE(r.unused.empty());
  const std::vector<float> got = store.values().to_floats();
  ASSERT_EQ(got.size(), original.size());
  for (size_t i = 0; i < got.size(); ++i)  // F16 rounding only
    ASSERT_NEAR(got[i], original[i], 1e-3 * std::max(1.0f, std::abs(original[i]))) << i;
}

TEST(HfImport, RoformerTableMustBeTheSinusoid) {
  test::TempDir tmp;
  const Config c = make_config("mlm", "rope");
  export_model(c, tmp);
  const std::string hf = tmp / "hf";
  checkpoint::NamedTensors w = checkpoint::load_safetensors(hf + "/model.safetensors");
  for (auto& [name, t] : w)
    if (name == "roformer.encoder.embed_positions.weight") {
      std::vector<float> v = t.to_floats();
      v[20] += 0.5f;
      t = Tensor::from_floats(v, t.shape());
    }
  checkpoint::save_safetensors(hf + "/model.safetensors", w);
  EXPECT_NE(import_error(c, hf).find("is not RoFormer's sinusoid table (element 20"),
            std::string::npos);
}

}  // namespace
}  // namespace rotor
