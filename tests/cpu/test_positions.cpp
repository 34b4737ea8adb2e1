// The registry of position encodings (nn/position.h): every registered
// encoding round-trips its model.position name through the config, has its
// row in the table of traits below (a new encoding adds one), and the models
// built from a config do what its traits say -- a parameter table where it
// learns one, something added to the embeddings where it adds, q and k
// rotated where it rotates, the Hugging Face family it names -- and its
// config rule is the one validate() applies. The models: the BERT/RoFormer
// encoder, the encoder-decoder and the causal LM.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "models/bert.h"
#include "models/decoder_lm.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "nn/layers.h"
#include "nn/position.h"

namespace rotor {
namespace {

struct Traits {
  bool learned_table, fixed_table, rotates_qk, alibi, relative_bias, xl_terms, untied, disentangled,
      bert_only;
  std::string hf_family, hf_imports;
  bool export_note;
};

bool operator==(const Traits& a, const Traits& b) {
  return a.learned_table == b.learned_table && a.fixed_table == b.fixed_table &&
         a.rotates_qk == b.rotates_qk && a.alibi == b.alibi && a.relative_bias == b.relative_bias &&
         a.xl_terms == b.xl_terms && a.untied == b.untied && a.disentangled == b.disentangled &&
         a.bert_only == b.bert_only && a.hf_family == b.hf_family && a.hf_imports == b.hf_imports &&
         a.export_note == b.export_note;
}

void PrintTo(const Traits& t, std::ostream* os) {
  *os << "{learned " << t.learned_table << ", fixed " << t.fixed_table << ", rotates "
      << t.rotates_qk << ", alibi " << t.alibi << ", t5 " << t.relative_bias << ", xl "
      << t.xl_terms << ", tupe " << t.untied << ", deberta " << t.disentangled << ", bert only "
      << t.bert_only << ", hf " << t.hf_family << " imports '" << t.hf_imports << "', note "
      << t.export_note << "}";
}

Traits traits_of(nn::PositionKind k) {
  return {k->learned_table, k->fixed_table != nullptr, k->rotates_qk, k->alibi, k->relative_bias,
          k->xl_terms, k->untied_correlation, k->disentangled, k->bert_encoder_only,
          // the family, and the model_type where it is another ("bert as deberta-v2")
          std::string(k->hf.family) +
              (k->hf.model_type.empty() ? "" : " as " + std::string(k->hf.model_type)),
          std::string(k->hf.imports), !k->hf.export_note.empty()};
}

// What each encoding is, by its model.position name (in registry order).
const std::vector<std::pair<std::string, Traits>> kTable = {
    {"sinusoidal",
     {false, true, false, false, false, false, false, false, false, "bert", "", true}},
    {"learned",
     {true, false, false, false, false, false, false, false, false, "bert",
      "learned absolute positions", false}},
    {"rope",
     {false, false, true, false, false, false, false, false, false, "roformer", "rotary positions",
      false}},
    {"none", {false, false, false, false, false, false, false, false, false, "bert", "", true}},
    {"alibi", {false, false, false, true, false, false, false, false, false, "bert", "", false}},
    {"t5", {false, false, false, false, true, false, false, false, false, "bert", "", false}},
    {"transformer_xl",
     {false, false, false, false, false, true, false, false, false, "bert", "", false}},
    {"tupe", {false, false, false, false, false, false, true, false, true, "bert", "", false}},
    {"deberta",
     {false, false, false, false, false, false, false, true, true, "bert as deberta-v2",
      "DeBERTa-v2's disentangled attention", false}},
};

Config config_with(const std::string& position, const std::string& task = "mlm") {
  // One layer of each kind the task builds (a count it does not read is refused).
  const std::string layers = task == "mlm"  ? "  encoder_layers: 1\n"
                             : task == "lm" ? "  decoder_layers: 1\n"
                                            : "  encoder_layers: 1\n  decoder_layers: 1\n";
  return load_config_from_string("task: " + task + "\nmodel:\n  d_model: 16\n  n_heads: 2\n" +
                                     "  d_ff: 32\n" + layers + "  max_positions: 32\n  position: " +
                                     position + "\ndata:\n  seq_len: 16\n  max_len: 16\n",
                                 "configs/x.yaml");
}

std::string load_error(const std::string& yaml) {
  try {
    load_config_from_string(yaml, "configs/x.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

TEST(Positions, TheTableListsEveryRegisteredEncodingInOrder) {
  ASSERT_EQ(nn::position_kinds().size(), kTable.size());
  for (size_t i = 0; i < kTable.size(); ++i) {
    const nn::PositionKind k = nn::position_kinds()[i];
    EXPECT_EQ(k.name(), kTable[i].first);
    EXPECT_EQ(traits_of(k), kTable[i].second) << k.name();
  }
  EXPECT_EQ(nn::PositionKind::Sinusoidal.name(), "sinusoidal");
  EXPECT_EQ(nn::PositionKind::Learned.name(), "learned");
  EXPECT_EQ(nn::PositionKind::Rope.name(), "rope");
  EXPECT_EQ(nn::PositionKind::None.name(), "none");
}

TEST(Positions, EveryNameRoundTripsThroughTheConfig) {
  std::string choices;
  for (nn::PositionKind k : nn::position_kinds()) {
    const std::string name(k.name());
    choices += (choices.empty() ? "" : " | ") + name;
    EXPECT_EQ(nn::position_kind(name), k);
    EXPECT_EQ(enum_from_string<nn::PositionKind>(name), k);
    EXPECT_EQ(to_string(k), name);
    const Config c = config_with(name);
    EXPECT_EQ(c.model.position, k) << name;
    const std::string dumped = dump_config(c);
    EXPECT_NE(dumped.find("  position: " + name + "\n"), std::string::npos) << dumped;
    EXPECT_EQ(load_config_from_string(dumped, "dumped"), c) << name;
  }
  EXPECT_EQ(enum_choices<nn::PositionKind>(), choices);
  EXPECT_FALSE(nn::position_kind("rotary"));
  EXPECT_FALSE(nn::position_kind("Rope"));
  // The error lists the registered names.
  EXPECT_EQ(load_error("model:\n  position: rotary\n"),
            "configs/x.yaml:2: model.position: expected one of " + choices + ", got \"rotary\"");
}

// What a model built from the config registers and computes, by the traits.
TEST(Positions, ModelsDoWhatTheTraitsSay) {
  for (nn::PositionKind k : nn::position_kinds()) {
    const std::string name(k.name());
    SCOPED_TRACE(name);
    const Config mlm = config_with(name);
    const models::BertOptions b = models::bert_options(mlm, 40);
    EXPECT_EQ(b.position, k);
    EXPECT_EQ(b.layer.rope, k->rotates_qk);
    EXPECT_EQ(b.layer.alibi, k->alibi);
    EXPECT_EQ(b.prefix(), k->hf.family);
    EXPECT_EQ(models::hf_encoder_options(mlm).prefix, k->hf.family);
    {
      nn::ParameterStore store;
      models::BertForMaskedLM model(b, store);
      const std::string table = b.prefix() + ".embeddings.position_embeddings.weight";
      EXPECT_EQ(store.find(table) != nullptr, k->learned_table);
      EXPECT_NE(store.find(b.prefix() + ".embeddings.word_embeddings.weight"), nullptr);
      // T5's table, [buckets, heads], one per stack.
      const nn::Parameter* rel = store.find(b.prefix() + ".encoder.relative_attention_bias.weight");
      EXPECT_EQ(rel != nullptr, k->relative_bias);
      if (rel) {
        EXPECT_EQ(rel->shape, (Shape{32, 2}));
      }
      // TUPE's own table and projections.
      EXPECT_EQ(store.find(b.prefix() + ".encoder.tupe.position_embeddings.weight") != nullptr,
                k->untied_correlation);
      EXPECT_EQ(store.find(b.prefix() + ".encoder.tupe.cls") != nullptr, k->untied_correlation);
    }
    if (k->bert_encoder_only) {  // the BERT encoder's alone: translation and lm refuse it
      EXPECT_THROW(config_with(name, "translation"), Error);
      EXPECT_THROW(config_with(name, "lm"), Error);
      continue;
    }
    const Config mt = config_with(name, "translation");
    const models::TransformerOptions t = models::transformer_options(mt, 40);
    EXPECT_EQ(t.position, k);
    EXPECT_EQ(t.layer.rope, k->rotates_qk);
    EXPECT_EQ(t.layer.alibi, k->alibi);
    {
      nn::ParameterStore store;
      models::EncoderDecoder model(t, store);
      EXPECT_EQ(store.find("model.encoder.embed_positions.weight") != nullptr, k->learned_table);
      EXPECT_EQ(store.find("model.decoder.embed_positions.weight") != nullptr, k->learned_table);
      for (const char* stack : {"encoder", "decoder"})
        EXPECT_EQ(store.find(std::string("model.") + stack + ".relative_attention_bias.weight") !=
                      nullptr,
                  k->relative_bias);
    }
    const Config lmc = config_with(name, "lm");
    const models::DecoderLmOptions l = models::lm_options(lmc, 40);
    EXPECT_EQ(l.position, k);
    EXPECT_EQ(l.layer.rope, k->rotates_qk);
    EXPECT_EQ(l.layer.alibi, k->alibi);
    {
      nn::ParameterStore store;
      models::DecoderLM model(l, store);
      EXPECT_EQ(store.find("model.embed_positions.weight") != nullptr, k->learned_table);
      EXPECT_EQ(store.find("model.relative_attention_bias.weight") != nullptr, k->relative_bias);
      store.allocate(Device::cpu());
      store.initialize(3);
      // A run of one token: attention mixes equal values whatever it
      // weighs (rotated or not, up to rounding), so the positions differ
      // exactly where the encoding adds to the embeddings.
      const std::vector<float> lg =
          model.forward_logits(Tensor::from_ints({7, 7, 7, 7}, {1, 4}), nn::Context{}).to_floats();
      bool differ = false;
      for (int64_t v = 0; v < 40; ++v) differ = differ || std::abs(lg[v] - lg[3 * 40 + v]) > 1e-4f;
      EXPECT_EQ(differ, k->adds_to_embeddings());
    }
    // The position layer adds something exactly where the encoding adds.
    nn::ParameterStore store;
    nn::PositionEncoding pe(store, "p", k, 8, 4, 0.5);
    store.allocate(Device::cpu());
    store.initialize(7);
    Tensor x = Tensor::zeros({2, 5, 4});
    pe.add(x, 3, nn::Context{});
    float norm = 0.0f;
    for (float v : x.to_floats()) norm += v * v;
    EXPECT_EQ(norm > 0.0f, k->adds_to_embeddings());
    if (k->fixed_table) {
      // rows 3..7 of the fixed table, for both sequences.
      const std::vector<float> table = k->fixed_table(8, 4).to_floats();
      const std::vector<float> got = x.to_floats();
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < 5 * 4; ++i) EXPECT_EQ(got[b * 20 + i], table[3 * 4 + i]);
    }
  }
}

// Each encoding's config rule is what validate() applies, naming its keys.
TEST(Positions, TheirRulesAreTheConfigChecks) {
  nn::PositionShape odd_head{18, 2, 32, 16, "data.seq_len"};
  nn::PositionShape too_long{16, 2, 8, 16, "data.seq_len"};
  for (const std::string task : {"mlm", "lm"})
    for (nn::PositionKind k : nn::position_kinds()) {
      SCOPED_TRACE(task + " " + std::string(k.name()));
      const std::string yaml =
          "task: " + task +
          "\nmodel:\n  d_model: 18\n  n_heads: 2\n  position: " + std::string(k.name()) +
          "\n  max_positions: 8\n" + "data:\n  seq_len: 16\n";
      std::optional<nn::PositionProblem> p;
      if (k->check) p = k->check(odd_head);
      if (!p && k->check) p = k->check(too_long);
      if (!p) {
        if (k->bert_encoder_only && task == "lm") {  // refused for the decoder, not by its rule
          EXPECT_THROW(load_config_from_string(yaml, "configs/x.yaml"), Error);
        } else {
          EXPECT_NO_THROW(load_config_from_string(yaml, "configs/x.yaml"));
        }
        continue;
      }
      const std::string e = load_error(yaml);
      EXPECT_NE(e.find(p->key + ": " + p->message), std::string::npos) << e;
    }
  ASSERT_TRUE(nn::PositionKind::Rope->check);
  const auto rope = nn::PositionKind::Rope->check(odd_head);
  ASSERT_TRUE(rope);
  EXPECT_EQ(rope->key, "model.position");
  EXPECT_NE(rope->message.find("even head size"), std::string::npos);
  EXPECT_FALSE(nn::PositionKind::Rope->check(too_long));
  const auto learned = nn::PositionKind::Learned->check(too_long);
  ASSERT_TRUE(learned);
  EXPECT_EQ(learned->key, "data.seq_len");
  EXPECT_EQ(learned->message, "16 exceeds model.max_positions = 8 (learned positions)");
}

}  // namespace
}  // namespace rotor
