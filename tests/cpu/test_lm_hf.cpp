// Task lm <-> Hugging Face (checkpoint/hf_lm.h): the GPT-NeoX and GPT-2
// tensor names and shapes (written out independently of rotor's mapping),
// GPT-NeoX's per-head [q, k, v] rows with the halves layout, GPT-2's Conv1D
// transposes, config.json; rotor -> Hugging Face -> rotor bitwise for tied
// and untied, scaled and unscaled embeddings, with the same logits; the
// refusals (post-LN, sinusoidal positions, config.json mismatches, a tied
// model whose input table is not the scaled output) and a Hugging Face tied
// GPT-2 without lm_head.
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "checkpoint/checkpoint.h"
#include "checkpoint/export_hf.h"
#include "checkpoint/import_hf.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "core/io.h"
#include "core/json_io.h"
#include "models/decoder_lm.h"
#include "models/model_config.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"
#include "support/tiny_spm.h"

namespace fs = std::filesystem;

namespace rotor {
namespace {

using namespace rotor::checkpoint;  // NOLINT: tests name the checkpoint API unqualified

constexpr int64_t V = 40, H = 2, FF = 24, L = 2, P = 20;

struct LmCase {
  const char* position;
  bool share, scale;
  int64_t d;
};

Config lm_config(const LmCase& k, const std::string& norm = "pre") {
  return load_config_from_string(
      test::tiny_lm()
          .set("model.decoder_layers", std::to_string(L))
          .set("model.d_model", std::to_string(k.d))
          .set("model.n_heads", std::to_string(H))
          .set("model.d_ff", std::to_string(FF))
          .set("model.activation", "gelu")
          .set("model.norm", norm)
          .set("model.position", k.position)
          .set("model.max_positions", std::to_string(P))
          .set("model.share_embeddings", k.share ? "true" : "false")
          .set("model.scale_embeddings", k.scale ? "true" : "false")
          .set("model.rope", std::string(k.position) == "rope" ? "{theta: 5000}" : "{}")
          .set("data.seq_len", "8")
          .text());
}

// The model of `c`, allocated, every value distinct (the init moved by noise).
std::unique_ptr<models::DecoderLM> build(const Config& c, nn::ParameterStore& store,
                                         uint64_t seed) {
  auto m = std::make_unique<models::DecoderLM>(models::lm_options(c, V), store);
  store.allocate(Device::cpu());
  store.initialize(seed);
  std::vector<float> v = store.values().to_floats();
  const std::vector<float> n = test::random_floats(v.size(), seed + 1, -0.1f, 0.1f);
  for (size_t i = 0; i < v.size(); ++i) v[i] += n[i];
  store.values().copy_from(Tensor::from_floats(v, {static_cast<int64_t>(v.size())}));
  return m;
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
  test::write_tiny_spm_model(ckpt + "/spm.model", static_cast<int32_t>(V), false);
  checkpoint::export_hf(ckpt, dir / "hf");
  return store.values().to_floats();
}

std::string import_error(const Config& c, const std::string& dir) {
  nn::ParameterStore store;
  build(c, store, 99);
  try {
    checkpoint::import_hf(dir, c, store);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string export_error(const Config& c) {
  test::TempDir tmp;
  try {
    export_model(c, tmp);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::map<std::string, Shape> expected_neox(int64_t D) {
  std::map<std::string, Shape> m{{"gpt_neox.embed_in.weight", {V, D}},
                                 {"embed_out.weight", {V, D}},
                                 {"gpt_neox.final_layer_norm.weight", {D}},
                                 {"gpt_neox.final_layer_norm.bias", {D}}};
  for (int i = 0; i < L; ++i) {
    const std::string l = "gpt_neox.layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm", "post_attention_layernorm"}) {
      m[l + n + ".weight"] = {D};
      m[l + n + ".bias"] = {D};
    }
    m[l + "attention.query_key_value.weight"] = {3 * D, D};
    m[l + "attention.query_key_value.bias"] = {3 * D};
    m[l + "attention.dense.weight"] = {D, D};
    m[l + "attention.dense.bias"] = {D};
    m[l + "mlp.dense_h_to_4h.weight"] = {FF, D};
    m[l + "mlp.dense_h_to_4h.bias"] = {FF};
    m[l + "mlp.dense_4h_to_h.weight"] = {D, FF};
    m[l + "mlp.dense_4h_to_h.bias"] = {D};
  }
  return m;
}

std::map<std::string, Shape> expected_gpt2(int64_t D) {
  std::map<std::string, Shape> m{{"transformer.wte.weight", {V, D}},
                                 {"transformer.wpe.weight", {P, D}},
                                 {"lm_head.weight", {V, D}},
                                 {"transformer.ln_f.weight", {D}},
                                 {"transformer.ln_f.bias", {D}}};
  for (int i = 0; i < L; ++i) {
    const std::string l = "transformer.h." + std::to_string(i) + ".";
    for (const char* n : {"ln_1", "ln_2"}) {
      m[l + n + ".weight"] = {D};
      m[l + n + ".bias"] = {D};
    }
    m[l + "attn.c_attn.weight"] = {D, 3 * D};  // Conv1D: [in, out]
    m[l + "attn.c_attn.bias"] = {3 * D};
    m[l + "attn.c_proj.weight"] = {D, D};
    m[l + "attn.c_proj.bias"] = {D};
    m[l + "mlp.c_fc.weight"] = {D, FF};
    m[l + "mlp.c_fc.bias"] = {FF};
    m[l + "mlp.c_proj.weight"] = {FF, D};
    m[l + "mlp.c_proj.bias"] = {D};
  }
  return m;
}

TEST(LmHfExport, GptNeoXLayout) {
  const int64_t D = 16, hd = D / H;
  const Config c = lm_config({"rope", true, true, D});
  test::TempDir tmp;
  export_model(c, tmp);
  SafetensorsFile f(tmp / "hf/model.safetensors");
  std::map<std::string, Shape> got;
  for (const auto& e : f.entries()) got[e.name] = e.shape;
  EXPECT_EQ(got, expected_neox(D));
  SafetensorsFile src(tmp / "ckpt/model.safetensors");
  // query_key_value rows: head h holds [q_h, k_h, v_h]; q and k rows of a
  // head in GPT-NeoX's halves order (rotor's rows 0, 2, 4, .., 1, 3, 5, ..).
  const std::vector<float> qkv =
      f.load("gpt_neox.layers.1.attention.query_key_value.bias").to_floats();
  const char* parts[] = {"q_proj", "k_proj", "v_proj"};
  for (int p = 0; p < 3; ++p) {
    const std::vector<float> b =
        src.load(std::string("model.layers.1.self_attn.") + parts[p] + ".bias").to_floats();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < hd; ++j) {
        const int64_t rotor_row = p == 2 ? j : (j < hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
        EXPECT_EQ(qkv[(h * 3 + p) * hd + j], b[h * hd + rotor_row]) << p << " " << h << " " << j;
      }
  }
  const std::vector<float> w =
      f.load("gpt_neox.layers.0.attention.query_key_value.weight").to_floats();
  const std::vector<float> k = src.load("model.layers.0.self_attn.k_proj.weight").to_floats();
  // Head 1, k, GPT-NeoX row hd/2 (the second half's first) = rotor's row 1 of head 1.
  for (int64_t col = 0; col < D; ++col)
    EXPECT_EQ(w[((1 * 3 + 1) * hd + hd / 2) * D + col], k[(1 * hd + 1) * D + col]);
  // The tied table: the input times sqrt(d) (4: exact), the output as it is.
  const std::vector<float> table = src.load("model.embed_tokens.weight").to_floats();
  const std::vector<float> in = f.load("gpt_neox.embed_in.weight").to_floats();
  EXPECT_EQ(f.load("embed_out.weight").to_floats(), table);
  for (size_t i = 0; i < table.size(); ++i) EXPECT_EQ(in[i], table[i] * 4.0f);

  const json_io::Json j = json_io::load(tmp / "hf/config.json");
  EXPECT_EQ(j.begin().key(), "architectures");
  EXPECT_EQ(j.at("architectures").at(0).get<std::string>(), "GPTNeoXForCausalLM");
  EXPECT_EQ(j.at("model_type").get<std::string>(), "gpt_neox");
  EXPECT_EQ(j.at("vocab_size").get<int64_t>(), V);
  EXPECT_EQ(j.at("hidden_size").get<int64_t>(), D);
  EXPECT_EQ(j.at("num_hidden_layers").get<int64_t>(), L);
  EXPECT_EQ(j.at("num_attention_heads").get<int64_t>(), H);
  EXPECT_EQ(j.at("intermediate_size").get<int64_t>(), FF);
  EXPECT_EQ(j.at("hidden_act").get<std::string>(), "gelu_new");
  EXPECT_EQ(j.at("rotary_pct").get<double>(), 1.0);
  EXPECT_EQ(j.at("rotary_emb_base").get<double>(), 5000.0);
  EXPECT_FALSE(j.at("use_parallel_residual").get<bool>());
  EXPECT_FALSE(j.at("tie_word_embeddings").get<bool>());
  EXPECT_DOUBLE_EQ(j.at("hidden_dropout").get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(j.at("layer_norm_eps").get<double>(), 1e-5);
  EXPECT_EQ(j.at("eos_token_id").get<int>(), 3);
  EXPECT_EQ(j.at("bos_token_id").get<int>(), 2);
  EXPECT_EQ(j.at("pad_token_id").get<int>(), 0);
  // transformers 5's keys, with the same values.
  EXPECT_EQ(j.at("rope_parameters").at("rope_type").get<std::string>(), "default");
  EXPECT_EQ(j.at("rope_parameters").at("rope_theta").get<double>(), 5000.0);
  EXPECT_EQ(j.at("rope_parameters").at("partial_rotary_factor").get<double>(), 1.0);
  EXPECT_EQ(j.at("dtype").get<std::string>(), "float32");
  // The tokenizer: the SentencePiece model and its Hugging Face pipeline.
  EXPECT_EQ(read_file(tmp / "hf/spiece.model"), read_file(tmp / "ckpt/spm.model"));
  EXPECT_FALSE(fs::exists(tmp / "hf/tokenizer.model"));
  const json_io::Json tc = json_io::load(tmp / "hf/tokenizer_config.json");
  EXPECT_EQ(tc.at("tokenizer_class").get<std::string>(), "PreTrainedTokenizerFast");
  EXPECT_EQ(tc.at("eos_token").get<std::string>(), "</s>");
  const json_io::Json tj = json_io::load(tmp / "hf/tokenizer.json");
  EXPECT_EQ(tj.at("model").at("type").get<std::string>(), "BPE");
  EXPECT_EQ(tj.at("model").at("vocab").size(), static_cast<size_t>(V));
  // What AutoTokenizer puts before a text: </s>, as `rotor generate` does.
  EXPECT_EQ(tj.at("post_processor").at("special_tokens").at("</s>").at("ids").at(0).get<int>(), 3);
}

TEST(LmHfExport, Gpt2Layout) {
  const int64_t D = 16;
  const Config c = lm_config({"learned", false, false, D});
  test::TempDir tmp;
  export_model(c, tmp);
  SafetensorsFile f(tmp / "hf/model.safetensors");
  std::map<std::string, Shape> got;
  for (const auto& e : f.entries()) got[e.name] = e.shape;
  EXPECT_EQ(got, expected_gpt2(D));
  SafetensorsFile src(tmp / "ckpt/model.safetensors");
  // c_attn[in][out]: out column D + r is k_proj row r.
  const std::vector<float> w = f.load("transformer.h.1.attn.c_attn.weight").to_floats();
  const std::vector<float> k = src.load("model.layers.1.self_attn.k_proj.weight").to_floats();
  for (int64_t r = 0; r < D; ++r)
    for (int64_t in = 0; in < D; ++in) EXPECT_EQ(w[in * 3 * D + D + r], k[r * D + in]);
  const std::vector<float> fc1 = src.load("model.layers.0.fc1.weight").to_floats();  // [FF, D]
  const std::vector<float> c_fc = f.load("transformer.h.0.mlp.c_fc.weight").to_floats();
  EXPECT_EQ(c_fc[3 * FF + 5], fc1[5 * D + 3]);
  EXPECT_EQ(f.load("transformer.wte.weight").to_floats(),
            src.load("model.embed_tokens.weight").to_floats());
  EXPECT_EQ(f.load("lm_head.weight").to_floats(), src.load("lm_head.weight").to_floats());
  EXPECT_EQ(f.load("transformer.wpe.weight").to_floats(),
            src.load("model.embed_positions.weight").to_floats());
  const json_io::Json j = json_io::load(tmp / "hf/config.json");
  EXPECT_EQ(j.at("architectures").at(0).get<std::string>(), "GPT2LMHeadModel");
  EXPECT_EQ(j.at("n_embd").get<int64_t>(), D);
  EXPECT_EQ(j.at("n_inner").get<int64_t>(), FF);
  EXPECT_EQ(j.at("n_positions").get<int64_t>(), P);
  EXPECT_EQ(j.at("activation_function").get<std::string>(), "gelu_new");
  EXPECT_DOUBLE_EQ(j.at("layer_norm_epsilon").get<double>(), 1e-5);
  EXPECT_EQ(j.at("eos_token_id").get<int>(), 3);
}

class LmHfRoundTrip : public ::testing::TestWithParam<LmCase> {};

TEST_P(LmHfRoundTrip, IsBitwiseWithTheSameLogits) {
  const Config c = lm_config(GetParam());
  test::TempDir tmp;
  nn::ParameterStore original;
  auto model = build(c, original, 1);
  const std::vector<float> values = export_model(c, tmp, 1);
  ASSERT_EQ(original.values().to_floats(), values);
  nn::ParameterStore store;
  auto imported = build(c, store, 99);
  const checkpoint::HfImportResult r = checkpoint::import_hf(tmp / "hf", c, store);
  EXPECT_EQ(r.model_type, std::string(GetParam().position) == "rope" ? "gpt_neox" : "gpt2");
  EXPECT_TRUE(r.unused.empty()) << r.unused.front();
  EXPECT_EQ(r.loaded, static_cast<int64_t>(store.parameters().size()));
  EXPECT_EQ(store.values().to_floats(), values);  // bitwise
  const Tensor ids = Tensor::from_ints({5, 9, 3, 17, 22, 1, 38, 4, 30, 12, 2, 7}, {2, 6});
  EXPECT_EQ(imported->forward_logits(ids, nn::Context{}).to_floats(),
            model->forward_logits(ids, nn::Context{}).to_floats());
}

INSTANTIATE_TEST_SUITE_P(
    Models, LmHfRoundTrip,
    ::testing::Values(LmCase{"rope", true, true, 32}, LmCase{"rope", false, true, 16},
                      LmCase{"rope", false, false, 32}, LmCase{"learned", true, true, 32},
                      LmCase{"learned", false, true, 16}, LmCase{"learned", true, false, 16}),
    [](const auto& info) {
      const LmCase& k = info.param;
      return std::string(k.position) + (k.share ? "_tied" : "_untied") +
             (k.scale ? "_scaled" : "") + "_d" + std::to_string(k.d);
    });

// Untied with a scale that is not a power of two: the import finds a table
// whose products with the scale are the exported ones, so the logits are
// bitwise rotor's (the table itself is, wherever one float has that product).
TEST(LmHfImport, UntiedScaledTableGivesTheSameProducts) {
  for (const char* position : {"rope", "learned"}) {
    const Config c = lm_config({position, false, true, 32});
    test::TempDir tmp;
    nn::ParameterStore original;
    auto model = build(c, original, 1);
    export_model(c, tmp, 1);
    nn::ParameterStore store;
    auto imported = build(c, store, 99);
    checkpoint::import_hf(tmp / "hf", c, store);
    const float s = std::sqrt(32.0f);
    const std::vector<float> a = original.find("model.embed_tokens.weight")->value.to_floats();
    const std::vector<float> b = store.find("model.embed_tokens.weight")->value.to_floats();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i] * s, b[i] * s) << i;
    const Tensor ids = Tensor::from_ints({5, 9, 3, 17, 22, 1, 38, 4}, {1, 8});
    EXPECT_EQ(imported->forward_logits(ids, nn::Context{}).to_floats(),
              model->forward_logits(ids, nn::Context{}).to_floats());
  }
}

// Llama's layer on the tiny LM: RMSNorm, SwiGLU, no biases, H = 2 query heads
// over one key/value head.
Config llama_config(int64_t d, bool share = true, bool scale = true) {
  Config c = lm_config({"rope", share, scale, d});
  c.model.norm_type = NormType::RmsNorm;
  c.model.activation = ops::Activation::SiLU;
  c.model.gated_ffn = true;
  c.model.bias = false;
  c.model.kv_heads = 1;
  return c;
}

std::map<std::string, Shape> expected_llama(int64_t D) {
  const int64_t Dkv = D / H;  // one key/value head
  std::map<std::string, Shape> m{{"model.embed_tokens.weight", {V, D}},
                                 {"lm_head.weight", {V, D}},
                                 {"model.norm.weight", {D}}};
  for (int i = 0; i < L; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    m[l + "input_layernorm.weight"] = {D};
    m[l + "post_attention_layernorm.weight"] = {D};
    m[l + "self_attn.q_proj.weight"] = {D, D};
    m[l + "self_attn.k_proj.weight"] = {Dkv, D};
    m[l + "self_attn.v_proj.weight"] = {Dkv, D};
    m[l + "self_attn.o_proj.weight"] = {D, D};
    m[l + "mlp.gate_proj.weight"] = {FF, D};
    m[l + "mlp.up_proj.weight"] = {FF, D};
    m[l + "mlp.down_proj.weight"] = {D, FF};
  }
  return m;
}

// rope with RMSNorm exports as LlamaForCausalLM: its tensors, the q/k rows in
// the halves layout, config.json; the import reads it back bitwise with the
// same logits, and refuses a config.json that differs in one line.
TEST(LmHfExport, LlamaLayoutAndRoundTrip) {
  const int64_t D = 16, Dh = D / H;
  const Config c = llama_config(D);
  test::TempDir tmp;
  nn::ParameterStore original;
  auto model = build(c, original, 1);
  const std::vector<float> values = export_model(c, tmp, 1);
  SafetensorsFile f(tmp / "hf/model.safetensors");
  std::map<std::string, Shape> got;
  for (const auto& e : f.entries()) got[e.name] = e.shape;
  EXPECT_EQ(got, expected_llama(D));
  SafetensorsFile src(tmp / "ckpt/model.safetensors");
  // k_proj: Hugging Face row j of the one head is rotor's row 2j (first
  // halves) or 2(j - Dh/2) + 1 (second halves): rotor's layout is interleaved.
  const std::vector<float> k = src.load("model.layers.1.self_attn.k_proj.weight").to_floats();
  const std::vector<float> hk = f.load("model.layers.1.self_attn.k_proj.weight").to_floats();
  for (int64_t j = 0; j < Dh; ++j) {
    const int64_t from = j < Dh / 2 ? 2 * j : 2 * (j - Dh / 2) + 1;
    for (int64_t in = 0; in < D; ++in) EXPECT_EQ(hk[j * D + in], k[from * D + in]) << j;
  }
  EXPECT_EQ(f.load("model.layers.0.mlp.gate_proj.weight").to_floats(),
            src.load("model.layers.0.fc1_gate.weight").to_floats());
  EXPECT_EQ(f.load("model.layers.0.mlp.up_proj.weight").to_floats(),
            src.load("model.layers.0.fc1.weight").to_floats());
  EXPECT_EQ(f.load("model.norm.weight").to_floats(),
            src.load("model.layer_norm.weight").to_floats());
  const json_io::Json j = json_io::load(tmp / "hf/config.json");
  EXPECT_EQ(j.at("architectures").at(0).get<std::string>(), "LlamaForCausalLM");
  EXPECT_EQ(j.at("num_key_value_heads").get<int64_t>(), 1);
  EXPECT_EQ(j.at("hidden_act").get<std::string>(), "silu");
  EXPECT_DOUBLE_EQ(j.at("rms_norm_eps").get<double>(), 1e-5);
  EXPECT_DOUBLE_EQ(j.at("rope_theta").get<double>(), 5000.0);
  EXPECT_FALSE(j.at("attention_bias").get<bool>());

  nn::ParameterStore store;
  auto imported = build(c, store, 99);
  const checkpoint::HfImportResult r = checkpoint::import_hf(tmp / "hf", c, store);
  EXPECT_EQ(r.model_type, "llama");
  EXPECT_TRUE(r.unused.empty());
  EXPECT_EQ(store.values().to_floats(), values);  // bitwise
  const Tensor ids = Tensor::from_ints({5, 9, 3, 17, 22, 1, 38, 4, 30, 12, 2, 7}, {2, 6});
  EXPECT_EQ(imported->forward_logits(ids, nn::Context{}).to_floats(),
            model->forward_logits(ids, nn::Context{}).to_floats());

  // Each setting config.json holds, changed: one line naming it.
  Config two = c;
  two.model.kv_heads = 2;
  EXPECT_NE(import_error(two, tmp / "hf").find("num_key_value_heads is 1, but model.kv_heads"),
            std::string::npos);
  Config gelu = c;
  gelu.model.activation = ops::Activation::GELU;
  EXPECT_NE(import_error(gelu, tmp / "hf").find("hidden_act is silu, but model.activation is gelu"),
            std::string::npos);
  Config neox = lm_config({"rope", true, true, D});
  EXPECT_NE(import_error(neox, tmp / "hf").find("model_type llama is rope with RMSNorm"),
            std::string::npos);
}

// Llama 3.1's rope scaling: rope_scaling and rope_parameters carry the type,
// the factor, both frequency factors and the original context; the import
// reads them back and names the one that differs.
TEST(LmHfExport, Llama3ScalingRoundTrip) {
  Config c = llama_config(16);
  c.model.rope.scaling = rope::Scaling::Llama3;
  c.model.rope.factor = 8.0;
  c.model.rope.original_max_positions = 16;
  c.model.rope.low_freq_factor = 1.0;
  c.model.rope.high_freq_factor = 2.0;
  test::TempDir tmp;
  nn::ParameterStore original;
  auto model = build(c, original, 1);
  export_model(c, tmp, 1);
  const json_io::Json j = json_io::load(tmp / "hf/config.json");
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json_io::Json& r = j.at(key);
    EXPECT_EQ(r.at("rope_type").get<std::string>(), "llama3") << key;
    EXPECT_DOUBLE_EQ(r.at("factor").get<double>(), 8.0) << key;
    EXPECT_DOUBLE_EQ(r.at("high_freq_factor").get<double>(), 2.0) << key;
    EXPECT_EQ(r.at("original_max_position_embeddings").get<int64_t>(), 16) << key;
  }
  nn::ParameterStore store;
  auto imported = build(c, store, 99);
  checkpoint::import_hf(tmp / "hf", c, store);
  const Tensor ids = Tensor::from_ints({5, 9, 3, 17, 22, 1, 38, 4, 30, 12, 2, 7}, {2, 6});
  EXPECT_EQ(imported->forward_logits(ids, nn::Context{}).to_floats(),
            model->forward_logits(ids, nn::Context{}).to_floats());
  Config other = c;
  other.model.rope.high_freq_factor = 4.0;
  EXPECT_NE(import_error(other, tmp / "hf")
                .find("high_freq_factor is 2, but model.rope.high_freq_factor is 4"),
            std::string::npos)
      << import_error(other, tmp / "hf");
  other = c;
  other.model.rope.original_max_positions = 0;  // model.max_positions, 20
  EXPECT_NE(import_error(other, tmp / "hf").find("original_max_position_embeddings is 16"),
            std::string::npos);
  // GPT-NeoX has no llama3 rope type here.
  Config neox = lm_config({"rope", true, true, 16});
  neox.model.rope = c.model.rope;
  EXPECT_NE(export_error(neox).find("model.rope.scaling is llama3; Hugging Face GPT-NeoX"),
            std::string::npos);
}

TEST(LmHfExport, RefusesWhatHuggingFaceCannotHold) {
  EXPECT_NE(export_error(lm_config({"rope", true, true, 16}, "post")).find("model.norm is post"),
            std::string::npos);
  // rope with RMSNorm is Llama's: a plain MLP, biases or partial rotation
  // have no place there; the other families take none of Llama's settings.
  Config rms = lm_config({"rope", true, true, 16});
  rms.model.norm_type = NormType::RmsNorm;
  EXPECT_NE(export_error(rms).find("model.gated_ffn is false; Hugging Face Llama"),
            std::string::npos);
  rms.model.gated_ffn = true;
  EXPECT_NE(export_error(rms).find("model.bias is true; Hugging Face Llama"), std::string::npos);
  Config partial = llama_config(16);
  partial.model.rope.fraction = 0.5;
  EXPECT_NE(export_error(partial).find("Hugging Face Llama rotates every head dimension"),
            std::string::npos);
  Config learned_rms = lm_config({"learned", true, true, 16});
  learned_rms.model.norm_type = NormType::RmsNorm;
  EXPECT_NE(export_error(learned_rms).find("Hugging Face GPT-2 normalizes with LayerNorm"),
            std::string::npos);
  Config gated = lm_config({"rope", true, true, 16});
  gated.model.gated_ffn = true;
  EXPECT_NE(export_error(gated).find("model.gated_ffn is true; Hugging Face GPT-NeoX's MLP"),
            std::string::npos);
  Config grouped = lm_config({"rope", true, true, 16});
  grouped.model.kv_heads = 1;
  EXPECT_NE(export_error(grouped).find("model.kv_heads is 1; Hugging Face GPT-NeoX"),
            std::string::npos);
  Config unbiased = lm_config({"learned", true, true, 16});
  unbiased.model.bias = false;
  EXPECT_NE(export_error(unbiased).find("model.bias is false; Hugging Face GPT-2"),
            std::string::npos);
  for (const char* position : {"sinusoidal", "none"})
    EXPECT_NE(
        export_error(lm_config({position, true, true, 16}))
            .find(std::string("model.position is ") + position + "; Hugging Face has no causal LM"),
        std::string::npos)
        << position;
}

// model.rope as GPT-NeoX holds it: rotary_pct, rotary_emb_base and
// rope_scaling written, and rope_parameters; a half-layout model exports its q/k rows as they are,
// and an interleaved model exported and imported into the half layout
// computes the same logits.
TEST(LmHfExport, HalfLayoutAndPartialRotation) {
  Config inter = lm_config({"rope", true, true, 32});  // head dim 16, tied: bitwise
  inter.model.rope.fraction = 0.5;
  inter.model.rope.scaling = rope::Scaling::Linear;
  inter.model.rope.factor = 2.0;
  Config half = inter;
  half.model.rope.layout = rope::Layout::Half;
  const Tensor ids = Tensor::from_ints({5, 9, 3, 17, 22, 1, 38, 4, 30, 12, 2, 7}, {2, 6});

  test::TempDir a;
  nn::ParameterStore original;
  auto model = build(inter, original, 1);
  export_model(inter, a, 1);
  const json_io::Json j = json_io::load(a / "hf/config.json");
  EXPECT_DOUBLE_EQ(j.at("rotary_pct").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j.at("rotary_emb_base").get<double>(), 5000.0);
  EXPECT_EQ(j.at("rope_scaling").at("type").get<std::string>(), "linear");
  EXPECT_DOUBLE_EQ(j.at("rope_scaling").at("factor").get<double>(), 2.0);
  const json_io::Json& p = j.at("rope_parameters");  // transformers 5's, the same
  EXPECT_EQ(p.at("rope_type").get<std::string>(), "linear");
  EXPECT_DOUBLE_EQ(p.at("factor").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(p.at("rope_theta").get<double>(), 5000.0);
  EXPECT_DOUBLE_EQ(p.at("partial_rotary_factor").get<double>(), 0.5);
  // Imported into the half layout: the rows as GPT-NeoX holds them, the same
  // attention scores up to the order of the sums.
  nn::ParameterStore store;
  auto imported = build(half, store, 99);
  checkpoint::import_hf(a / "hf", half, store);
  const std::vector<float> want = model->forward_logits(ids, nn::Context{}).to_floats();
  EXPECT_LT(test::max_rel_error(imported->forward_logits(ids, nn::Context{}).to_floats(), want),
            1e-5);
  // A half model round-trips bitwise, and the interleaved model read from its
  // export computes its logits.
  test::TempDir b;
  nn::ParameterStore half_store;
  auto half_model = build(half, half_store, 3);
  const std::vector<float> values = export_model(half, b, 3);
  nn::ParameterStore back;
  auto again = build(half, back, 7);
  checkpoint::import_hf(b / "hf", half, back);
  EXPECT_EQ(back.values().to_floats(), values);
  nn::ParameterStore inter_back;
  auto inter_model = build(inter, inter_back, 8);
  checkpoint::import_hf(b / "hf", inter, inter_back);
  EXPECT_LT(test::max_rel_error(inter_model->forward_logits(ids, nn::Context{}).to_floats(),
                                half_model->forward_logits(ids, nn::Context{}).to_floats()),
            1e-5);
}

TEST(LmHfExport, RefusesScalingGptNeoXCannotHold) {
  Config c = lm_config({"rope", true, true, 16});
  c.model.rope.scaling = rope::Scaling::Yarn;
  c.model.rope.factor = 4.0;
  c.model.rope.original_max_positions = 8;
  EXPECT_NE(export_error(c).find("model.rope.scaling is yarn"), std::string::npos)
      << export_error(c);
  c.model.rope.scaling = rope::Scaling::DynamicNtk;
  EXPECT_NE(export_error(c).find("model.rope.original_max_positions is 8"), std::string::npos)
      << export_error(c);
  c.model.rope.original_max_positions = P;
  EXPECT_EQ(export_error(c), "no error");
}

// Rewrites config.json's KEY.
void set_key(const std::string& dir, const std::string& key, const json_io::Json& value) {
  json_io::Json j = json_io::load(dir + "/config.json");
  j[key] = value;
  atomic_write_file(dir + "/config.json", j.dump(2));
}

TEST(LmHfImport, ConfigMismatchesAreOneLine) {
  const Config neox = lm_config({"rope", true, true, 16});
  struct Row {
    const char* key;
    json_io::Json value;
    const char* message;
  };
  const Row rows[] = {
      {"use_parallel_residual", true, "use_parallel_residual is true"},
      {"hidden_size", 32, "hidden_size is 32, but model.d_model is 16"},
      {"num_hidden_layers", 3, "num_hidden_layers is 3, but model.decoder_layers is 2"},
      {"vocab_size", 41, "vocab_size is 41, but the tokenizer's vocabulary size is 40"},
      {"hidden_act", "relu", "hidden_act is relu, but model.activation is gelu"},
      {"layer_norm_eps", 1e-12, "layer_norm_eps is 1e-12, but model.layer_norm_eps is 1e-05"},
      {"model_type", "gpt2", "model_type gpt2 has learned positions, but model.position is rope"},
      {"model_type", "llama", "model_type llama is rope with RMSNorm and a gated MLP"},
      {"model_type", "mistral",
       "model_type is mistral; task lm initializes from llama or "
       "gpt_neox (rope) or gpt2 (learned)"},
  };
  for (const Row& row : rows) {
    test::TempDir tmp;
    export_model(neox, tmp);
    set_key(tmp / "hf", row.key, row.value);
    const std::string e = import_error(neox, tmp / "hf");
    EXPECT_NE(e.find(row.message), std::string::npos) << row.key << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  const Config gpt2 = lm_config({"learned", true, true, 16});
  test::TempDir tmp;
  export_model(gpt2, tmp);
  set_key(tmp / "hf", "n_positions", 64);
  EXPECT_NE(import_error(gpt2, tmp / "hf").find("n_positions is 64, but model.max_positions is 20"),
            std::string::npos);
}

// GPT-NeoX's rotation as each transformers version writes config.json:
// 4.x rotary_pct, rotary_emb_base and rope_scaling; 5.x rope_parameters
// alone; the export writes both. A setting absent is transformers' default
// (10000, 0.25, unscaled), never silently rotor's; keys of the two versions
// that disagree, an unknown rope type and a rotation per layer type are
// refused; each in one line naming the key and both values.
TEST(LmHfImport, RopeSettingsOfBothVersions) {
  const Config neox = lm_config({"rope", true, true, 16});  // theta 5000, fraction 1
  using Edit = std::function<void(json_io::Json&)>;
  const Edit v4 = [](json_io::Json& j) {
    j.erase("rope_parameters");
    j.erase("dtype");
  };
  const Edit v5 = [](json_io::Json& j) {
    for (const char* k : {"rotary_pct", "rotary_emb_base", "rope_scaling", "torch_dtype"})
      j.erase(k);
  };
  struct Row {
    const char* name;
    Edit edit;
    const char* message;  // "" = loads
  };
  const Row rows[] = {
      {"as exported", [](json_io::Json&) {}, ""},
      {"4.x keys only", v4, ""},
      {"5.x keys only", v5, ""},
      {"4.x rotary_pct",
       [&](json_io::Json& j) {
         v4(j);
         j["rotary_pct"] = 0.25;
       },
       "rotary_pct is 0.25, but model.rope.fraction is 1"},
      {"4.x rotary_emb_base",
       [&](json_io::Json& j) {
         v4(j);
         j["rotary_emb_base"] = 10000.0;
       },
       "rotary_emb_base is 10000, but model.rope.theta is 5000"},
      {"4.x rope_scaling",
       [&](json_io::Json& j) {
         v4(j);
         j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
       },
       "rope_scaling.type is linear x2, but model.rope.scaling is none"},
      {"4.x theta absent",
       [&](json_io::Json& j) {
         v4(j);
         j.erase("rotary_emb_base");
       },
       "rope_theta (absent: transformers' default) is 10000, but model.rope.theta is 5000"},
      {"5.x rope_theta",
       [&](json_io::Json& j) {
         v5(j);
         j["rope_parameters"]["rope_theta"] = 500.0;
       },
       "rope_parameters.rope_theta is 500, but model.rope.theta is 5000"},
      {"5.x partial_rotary_factor",
       [&](json_io::Json& j) {
         v5(j);
         j["rope_parameters"]["partial_rotary_factor"] = 0.25;
       },
       "rope_parameters.partial_rotary_factor is 0.25, but model.rope.fraction is 1"},
      {"5.x linear",
       [&](json_io::Json& j) {
         v5(j);
         j["rope_parameters"]["rope_type"] = "linear";
         j["rope_parameters"]["factor"] = 2.0;
       },
       "rope_parameters.rope_type is linear x2, but model.rope.scaling is none"},
      {"5.x yarn",
       [&](json_io::Json& j) {
         v5(j);
         j["rope_parameters"]["rope_type"] = "yarn";
         j["rope_parameters"]["factor"] = 2.0;
       },
       "rope_parameters.rope_type is yarn; rotor reads the GPT-NeoX rope types default, linear "
       "and dynamic"},
      {"5.x theta absent",
       [&](json_io::Json& j) {
         v5(j);
         j["rope_parameters"].erase("rope_theta");
       },
       "rope_theta (absent: transformers' default) is 10000, but model.rope.theta is 5000"},
      {"5.x top-level rope_theta",
       [&](json_io::Json& j) {
         v5(j);
         j["rope_parameters"].erase("rope_theta");
         j["rope_theta"] = 500.0;
       },
       "rope_theta is 500, but model.rope.theta is 5000"},
      {"5.x per layer type",
       [&](json_io::Json& j) {
         v5(j);
         j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
       },
       "rope_parameters.full_attention is a rotation per layer type"},
      {"both, disagreeing", [](json_io::Json& j) { j["rotary_emb_base"] = 10000.0; },
       "rope_parameters.rope_theta is 5000.0 but rotary_emb_base is 10000.0; transformers 4.x "
       "and 5.x would read different models"},
  };
  for (const Row& row : rows) {
    test::TempDir tmp;
    export_model(neox, tmp);
    json_io::Json j = json_io::load(tmp / "hf/config.json");
    row.edit(j);
    atomic_write_file(tmp / "hf/config.json", j.dump(2));
    const std::string e = import_error(neox, tmp / "hf");
    if (std::string(row.message).empty()) {
      EXPECT_EQ(e, "no error") << row.name;
    } else {
      EXPECT_NE(e.find(row.message), std::string::npos) << row.name << ": " << e;
      EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
  }
}

TEST(LmHfImport, TiedModelNeedsTheScaledCopy) {
  const Config c = lm_config({"rope", true, true, 16});
  test::TempDir tmp;
  export_model(c, tmp);
  // Untied in Hugging Face after some training: the input table moved.
  NamedTensors t = load_safetensors(tmp / "hf/model.safetensors");
  for (auto& [name, v] : t)
    if (name == "gpt_neox.embed_in.weight") {
      std::vector<float> x = v.to_floats();
      x[7] += 0.01f;
      v = Tensor::from_floats(x, v.shape());
    }
  save_safetensors(tmp / "hf/model.safetensors", t);
  EXPECT_NE(import_error(c, tmp / "hf").find("model.share_embeddings ties"), std::string::npos);
  // Untied in rotor, it loads (both tables).
  nn::ParameterStore store;
  const Config untied = lm_config({"rope", false, true, 16});
  build(untied, store, 3);
  checkpoint::import_hf(tmp / "hf", untied, store);
  EXPECT_NE(store.find("lm_head.weight"), nullptr);
}

// GPT-2 as transformers saves it by default: tie_word_embeddings true and no
// lm_head.weight in the file.
TEST(LmHfImport, Gpt2TiedWithoutLmHead) {
  const Config c = lm_config({"learned", true, false, 16});
  test::TempDir tmp;
  const std::vector<float> values = export_model(c, tmp);
  NamedTensors t = load_safetensors(tmp / "hf/model.safetensors");
  std::erase_if(t, [](const auto& e) { return e.first == "lm_head.weight"; });
  save_safetensors(tmp / "hf/model.safetensors", t);
  json_io::Json j = json_io::load(tmp / "hf/config.json");
  j.erase("tie_word_embeddings");  // GPT2Config's default: true
  atomic_write_file(tmp / "hf/config.json", j.dump(2));
  nn::ParameterStore store;
  build(c, store, 99);
  checkpoint::import_hf(tmp / "hf", c, store);
  EXPECT_EQ(store.values().to_floats(), values);
  // The same file into a scaled tied rotor model cannot hold one table twice.
  const Config scaled = lm_config({"learned", true, true, 16});
  EXPECT_NE(import_error(scaled, tmp / "hf").find("or model.scale_embeddings to false"),
            std::string::npos);
}

TEST(LmHfImport, MissingTensorIsNamed) {
  const Config c = lm_config({"rope", true, true, 16});
  test::TempDir tmp;
  export_model(c, tmp);
  NamedTensors t = load_safetensors(tmp / "hf/model.safetensors");
  std::erase_if(
      t, [](const auto& e) { return e.first == "gpt_neox.layers.1.mlp.dense_4h_to_h.bias"; });
  save_safetensors(tmp / "hf/model.safetensors", t);
  EXPECT_NE(
      import_error(c, tmp / "hf").find("the weights lack gpt_neox.layers.1.mlp.dense_4h_to_h.bias"),
      std::string::npos);
}

}  // namespace
}  // namespace rotor
