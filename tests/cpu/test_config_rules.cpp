// Configs that cannot run, one row each: `rotor train CONFIG` must refuse
// every one at load (docs/design.md, "Config") with exit status 1 and ONE
// line naming the file line of the key the rule is about (or the --set
// argument that set it) and the key, before the run directory exists. The
// data files are real (synthetic text, a TSV, a tokenizer) and each base
// config trains with them, so a rule, not a missing file, is what stops a row.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::run_rotor;
using rotor::test::TempDir;
using Keys = std::vector<std::pair<std::string, std::string>>;  // key path -> YAML value

enum class Base { Translation, Mlm, Classification, Lm, Multilabel };

// The keys of each base config, in the order they are written; DIR stands
// for the directory of the data.
Keys base_keys(Base base) {
  Keys common = {{"output_dir", "DIR/out"},
                 {"seed", "3"},
                 {"device", "cpu"},
                 {"model.encoder_layers", "1"},
                 {"model.d_model", "16"},
                 {"model.n_heads", "2"},
                 {"model.d_ff", "32"},
                 {"model.position", "rope"},
                 {"model.max_positions", "64"},
                 {"data.spm_model", "DIR/spm.model"},
                 {"train.max_updates", "1"},
                 {"train.valid_interval", "0"},
                 {"train.save_interval", "0"},
                 {"optim.warmup_updates", "1"}};
  Keys task;
  switch (base) {
    case Base::Translation:
      task = {{"task", "translation"},
              {"model.decoder_layers", "1"},
              {"data.train", "DIR/data/train"},
              {"data.max_tokens", "256"},
              {"data.max_len_ratio", "20"}};
      break;
    case Base::Mlm:
      task = {{"task", "mlm"},
              {"data.train", "DIR/mlm.txt"},
              {"data.seq_len", "16"},
              {"train.batch_size", "2"}};
      break;
    case Base::Lm:
      task = {{"task", "lm"},         {"model.decoder_layers", "1"},
              {"model.norm", "pre"},  {"data.train", "DIR/mlm.txt"},
              {"data.seq_len", "16"}, {"train.batch_size", "2"}};
      break;
    case Base::Classification:
      task = {{"task", "classification"},     {"data.train", "DIR/cls.tsv"},
              {"data.sentence1_column", "s"}, {"data.label_column", "label"},
              {"data.labels", "[even, odd]"}, {"data.seq_len", "16"},
              {"train.batch_size", "2"}};
      break;
    case Base::Multilabel:
      task = {{"task", "multilabel"},         {"data.train", "DIR/ml.tsv"},
              {"data.sentence1_column", "s"}, {"data.label_column", "codes"},
              {"data.seq_len", "16"},         {"train.batch_size", "2"}};
      break;
  }
  // A decoder-only LM counts its layers in model.decoder_layers: an
  // encoder_layers other than the default would do nothing, and is refused.
  if (base == Base::Lm)
    std::erase_if(common, [](const auto& kv) { return kv.first == "model.encoder_layers"; });
  task.insert(task.end(), common.begin(), common.end());
  return task;
}

// Writes `keys` as YAML (top-level keys, then one block per section) into
// `path` and returns the 1-based line of each key path.
std::vector<std::pair<std::string, int>> write_yaml(const std::string& path, const Keys& keys,
                                                    const std::string& dir) {
  std::vector<std::pair<std::string, int>> lines;
  std::string text;
  int line = 0;
  for (const auto& [key, value] : keys)
    if (key.find('.') == std::string::npos) {
      text += key + ": " + rotor::test::replace_all(value, "DIR", dir) + "\n";
      lines.emplace_back(key, ++line);
    }
  for (const char* section : {"model", "attention", "data", "train", "optim", "decode", "dist"}) {
    const std::string prefix = std::string(section) + ".";
    bool open = false;
    for (const auto& [key, value] : keys) {
      if (key.rfind(prefix, 0) != 0) continue;
      if (!open) text += std::string(section) + ":\n", ++line, open = true;
      text += "  " + key.substr(prefix.size()) + ": " +
              rotor::test::replace_all(value, "DIR", dir) + "\n";
      lines.emplace_back(key, ++line);
    }
  }
  std::ofstream(path) << text;
  return lines;
}

struct Rule {
  const char* name;
  Base base;
  Keys file;          // keys written into the config (replacing the base's)
  std::string set;    // one --set argument, or ""
  const char* key;    // the key the message names
  const char* where;  // the key whose line the message names; "" = the --set
  const char* words;  // the message holds these after "KEY: "
};

// clang-format off
const Rule kRules[] = {
  {"mlm_pre_norm", Base::Mlm, {{"model.norm", "pre"}}, "", "model.norm", "model.norm",
   "task mlm builds BERT/RoFormer, which are post-LN; got pre"},
  {"classification_pre_norm", Base::Classification, {}, "model.norm=pre", "model.norm", "",
   "task classification builds BERT/RoFormer"},
  {"heads_do_not_divide", Base::Translation, {{"model.n_heads", "3"}}, "", "model.n_heads",
   "model.n_heads", "3 heads do not divide model.d_model = 16"},
  {"kv_heads_do_not_divide", Base::Translation, {{"model.kv_heads", "3"}}, "", "model.kv_heads",
   "model.kv_heads", "3 key/value heads do not divide model.n_heads = 2"},
  {"kv_heads_deberta", Base::Mlm, {{"model.position", "deberta"}, {"model.kv_heads", "1"}}, "",
   "model.kv_heads", "model.kv_heads", "DeBERTa's relative terms project the shared positions"},
  {"rope_odd_head_size", Base::Translation, {{"model.d_model", "18"}}, "", "model.position",
   "model.position", "rope rotates pairs of features"},
  {"learned_positions_translation", Base::Translation,
   {{"model.position", "learned"}, {"model.max_positions", "8"}, {"data.max_len", "16"}}, "",
   "data.max_len", "data.max_len", "16 tokens + eos exceeds model.max_positions = 8"},
  {"learned_positions_mlm", Base::Mlm, {{"model.position", "learned"}, {"model.max_positions", "8"}},
   "", "data.seq_len", "data.seq_len", "16 exceeds model.max_positions = 8"},
  {"mask_probabilities", Base::Mlm, {{"data.mask_token_prob", "0.8"}, {"data.random_token_prob", "0.5"}},
   "", "data.random_token_prob", "data.random_token_prob", "exceeds 1"},
  {"mlm_block_too_short", Base::Mlm, {{"data.seq_len", "1"}}, "", "data.seq_len", "data.seq_len",
   "too short for [CLS] + tokens"},
  {"bleu_for_mlm", Base::Mlm, {}, "train.valid_metrics=[loss,bleu]", "train.valid_metrics", "",
   "bleu is a score of task translation; task mlm has none"},
  {"accuracy_for_translation", Base::Translation, {{"train.valid_metrics", "[loss, accuracy]"}}, "",
   "train.valid_metrics", "train.valid_metrics", "accuracy is a score of task mlm or classification"},
  {"best_metric_not_computed", Base::Translation, {{"train.best_metric", "chrf"}}, "",
   "train.best_metric", "train.best_metric", "chrf is not computed"},
  {"f1_of_three_labels", Base::Classification,
   {{"data.labels", "[a, b, c]"}, {"train.best_metric", "f1"}}, "", "train.best_metric",
   "train.best_metric", "f1 is the F1 of the second label of a two-label task"},
  {"pearson_of_classes", Base::Classification, {{"train.best_metric", "pearson"}}, "",
   "train.best_metric", "train.best_metric", "pearson correlates numbers"},
  {"regression_with_labels", Base::Classification, {{"data.regression", "true"}}, "",
   "data.labels", "data.labels", "leave data.labels empty"},
  {"label_column_is_the_sentence", Base::Classification, {{"data.label_column", "s"}}, "",
   "data.label_column", "data.label_column", "must name different columns"},
  {"column_names_without_header", Base::Classification, {{"data.header", "false"}}, "",
   "data.sentence1_column", "data.sentence1_column", "\"s\" is not a column index"},
  {"classification_block_too_short", Base::Classification, {{"data.seq_len", "2"}}, "",
   "data.seq_len", "data.seq_len", "cannot hold [CLS] a [SEP]"},
  {"init_from_translation", Base::Translation, {{"model.init_from", "DIR/hf"}}, "",
   "model.init_from", "model.init_from", "initializes a BERT/RoFormer encoder"},
  {"cudnn_on_cpu", Base::Mlm, {{"attention.impl", "cudnn"}}, "", "attention.impl",
   "attention.impl", "device is cpu"},
  {"cudnn_in_fp32", Base::Mlm, {{"device", "auto"}, {"attention.impl", "cudnn"}}, "",
   "attention.impl", "attention.impl", "precision is fp32"},
  {"linear_key_with_softmax", Base::Mlm, {{"attention.feature_map", "favor"}}, "",
   "attention.feature_map", "attention.feature_map",
   "a key of attention.kind linear, and attention.kind is softmax"},
  {"linear_eps_with_softmax", Base::Translation, {}, "attention.linear_eps=0.001",
   "attention.linear_eps", "", "a key of attention.kind linear"},
  {"linear_with_rotor", Base::Mlm, {{"attention.kind", "linear"}, {"attention.impl", "rotor"}}, "",
   "attention.impl", "attention.impl", "rotor is a core of softmax attention"},
  {"linear_with_cudnn", Base::Mlm,
   {{"attention.kind", "linear"}, {"device", "auto"}, {"attention.impl", "cudnn"}}, "",
   "attention.impl", "attention.impl", "cudnn is a core of softmax attention"},
  {"linear_attention_dropout", Base::Mlm,
   {{"attention.kind", "linear"}, {"model.attention_dropout", "0.1"}}, "",
   "model.attention_dropout", "model.attention_dropout", "attention.kind linear does not have"},
  {"linear_odd_rotated_features", Base::Mlm,
   {{"attention.kind", "linear"}, {"attention.feature_map", "favor"}, {"attention.features", "9"}},
   "", "attention.features", "attention.features", "9 is odd"},
  {"linear_bleu", Base::Translation,
   {{"attention.kind", "linear"}, {"train.valid_metrics", "[loss, bleu]"}}, "",
   "train.valid_metrics", "train.valid_metrics", "bleu decodes with the cached-key step"},
  {"linear_eps_zero", Base::Mlm, {{"attention.kind", "linear"}, {"attention.linear_eps", "0"}}, "",
   "attention.linear_eps", "attention.linear_eps", "expected a number > 0"},
  {"features_negative", Base::Mlm, {}, "attention.features=-2", "attention.features", "",
   "expected an integer >= 0"},
  {"unknown_attention_kind", Base::Mlm, {{"attention.kind", "performer"}}, "", "attention.kind",
   "attention.kind", "expected one of softmax | linear, got \"performer\""},
  {"huge_model", Base::Translation, {{"model.d_model", "2000000000"}}, "", "model.d_model",
   "model.d_model", "more than rotor can hold"},
  {"bad_rendezvous", Base::Translation, {}, "dist.rendezvous=tcp:x", "dist.rendezvous", "",
   "expected auto, mpi or file:DIR"},
  {"no_training_data", Base::Mlm, {}, "data.train=", "data.train", "",
   "required for training task mlm"},
  {"learned_max_len_is_max_positions", Base::Translation,
   {{"model.position", "learned"}, {"data.max_len", "64"}}, "", "data.max_len", "data.max_len",
   "64 tokens + eos exceeds model.max_positions = 64"},
  {"best_metric_without_valid", Base::Classification, {{"train.best_metric", "accuracy"}}, "",
   "train.best_metric", "train.best_metric", "accuracy picks checkpoints/best by validation"},
  {"patience_without_valid", Base::Translation, {}, "train.patience=2", "train.patience", "",
   "2 counts validations without improvement, but data.valid is empty"},
  {"max_len_b_negative", Base::Translation, {{"decode.max_len_b", "-1000"}}, "", "decode.max_len_b",
   "decode.max_len_b", "expected an integer from 0 to 1000000"},
  {"label_attention_for_lm", Base::Lm, {{"model.classifier_head", "label_attention"}}, "",
   "model.classifier_head", "model.classifier_head",
   "label_attention is a head of tasks classification and multilabel; task lm has no classifier"},
  {"lm_without_layers", Base::Lm, {{"model.decoder_layers", "0"}}, "", "model.decoder_layers",
   "model.decoder_layers", "task lm counts its causal layers here; got 0"},
  {"learned_positions_lm", Base::Lm, {{"model.position", "learned"}, {"model.max_positions", "8"}},
   "", "data.seq_len", "data.seq_len", "16 exceeds model.max_positions = 8"},
  {"init_from_translation_lists", Base::Translation, {}, "model.init_from=DIR/hf",
   "model.init_from", "",
   "initializes a BERT/RoFormer encoder (task mlm or classification or multilabel), a GPT-NeoX/GPT-2 "
   "causal LM (task lm); task translation has none"},
  {"multilabel_separator", Base::Multilabel, {{"data.label_separator", "\"ab\""}}, "",
   "data.label_separator", "data.label_separator", "\"ab\" is not one ASCII character"},
  {"multilabel_regression", Base::Multilabel, {{"data.regression", "true"}}, "", "data.regression",
   "data.regression", "task multilabel reads lists of labels, not numbers"},
  {"multilabel_label_with_separator", Base::Multilabel, {{"data.labels", "[odd, \"a,b\"]"}}, "",
   "data.labels", "data.labels", "\"a,b\" holds the separator \",\""},
  {"ap_for_classification", Base::Classification, {{"train.best_metric", "ap"}}, "",
   "train.best_metric", "train.best_metric", "ap is a score of task multilabel; task classification "
   "has none"},
  {"bleu_for_lm", Base::Lm, {{"train.best_metric", "bleu"}}, "", "train.best_metric",
   "train.best_metric", "bleu is a score of task translation; task lm has none"},
  {"huge_lm", Base::Lm, {{"model.d_ff", "2000000000"}, {"model.decoder_layers", "4"}}, "",
   "model.d_model", "model.d_model", "more than rotor can hold"},
  {"lr_beyond_float", Base::Mlm, {{"optim.lr", "1.0e+300"}}, "", "optim.lr", "optim.lr",
   "beyond the range of a 32-bit float"},
};
// clang-format on

void PrintTo(const Rule& r, std::ostream* os) {
  *os << r.name;
}

class ConfigRules : public ::testing::TestWithParam<Rule> {
 public:
  // The data every row reads, made once: the numbers task (translation), its
  // English side as a text (mlm) and as TSVs (classification, multilabel), a
  // tokenizer.
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string d = dir_->path();
    auto r = run_rotor(*dir_, "synth numbers-en-de --output " + d +
                                  "/data --train 120 --valid 10 --test 10 --seed 2");
    ASSERT_EQ(r.code, 0) << r.err;
    std::ifstream en(d + "/data/train.en");
    std::ofstream text(d + "/mlm.txt"), tsv(d + "/cls.tsv"), ml(d + "/ml.tsv");
    tsv << "s\tlabel\n";
    ml << "s\tcodes\n";
    int i = 0;
    for (std::string line; std::getline(en, line); ++i) {
      text << line << "\n";
      tsv << line << "\t" << (i % 2 ? "odd" : "even") << "\n";
      ml << line << "\t" << (i % 2 ? "odd" : "even") << (i % 3 ? "" : ",three") << "\n";
    }
    text.close();
    tsv.close();
    ml.close();
    fs::create_directory(d + "/hf");
    r = run_rotor(*dir_, "spm-train --input " + d + "/data/train.en --input " + d +
                             "/data/train.de --model-prefix " + d +
                             "/spm --vocab-size 80 --user-defined-symbols '[MASK],[CLS],[SEP]'");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

 protected:
  static TempDir* dir_;
};
TempDir* ConfigRules::dir_ = nullptr;

// Each base config trains with the data: what stops a row is its rule.
TEST_F(ConfigRules, BaseConfigsTrain) {
  ASSERT_NE(dir_, nullptr);
  for (Base base :
       {Base::Translation, Base::Mlm, Base::Classification, Base::Lm, Base::Multilabel}) {
    const std::string name = "base" + std::to_string(static_cast<int>(base));
    Keys keys = base_keys(base);
    for (auto& [key, value] : keys)
      if (key == "output_dir") value = "DIR/" + name;
    const std::string config = *dir_ / (name + ".yaml");
    write_yaml(config, keys, dir_->path());
    const auto r = run_rotor(*dir_, "train " + config, "OMP_NUM_THREADS=1");
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_TRUE(fs::exists(*dir_ / (name + "/checkpoint_last"))) << name;
  }
}

TEST_P(ConfigRules, RefusedAtLoadNamingTheKeysLine) {
  ASSERT_NE(dir_, nullptr);
  const Rule& rule = GetParam();
  const std::string d = dir_->path(), name = rule.name;
  Keys keys = base_keys(rule.base);
  for (const auto& [key, value] : rule.file) {
    bool replaced = false;
    for (auto& kv : keys)
      if (kv.first == key) kv.second = value, replaced = true;
    if (!replaced) keys.emplace_back(key, value);
  }
  for (auto& [key, value] : keys)
    if (key == "output_dir") value = "DIR/out_" + name;
  const std::string config = d + "/" + name + ".yaml";
  const auto lines = write_yaml(config, keys, d);

  std::string where;
  if (*rule.where) {
    for (const auto& [key, line] : lines)
      if (key == rule.where) where = config + ":" + std::to_string(line);
    ASSERT_FALSE(where.empty()) << rule.where << " is not written";
  } else {
    where = "--set " + rule.set;
  }
  const std::string args =
      "train " + config + (rule.set.empty() ? "" : " --set '" + rule.set + "'");
  const auto r = run_rotor(*dir_, args, "OMP_NUM_THREADS=1");
  EXPECT_EQ(r.code, 1) << r.err;
  const std::string prefix = "rotor: error: " + where + ": " + rule.key + ": ";
  EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << "expected " << prefix << "\ngot " << r.err;
  EXPECT_NE(r.err.find(rule.words, prefix.size()), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(fs::exists(d + "/out_" + name)) << "the run directory was made";
}

INSTANTIATE_TEST_SUITE_P(Rows, ConfigRules, ::testing::ValuesIn(kRules),
                         [](const ::testing::TestParamInfo<Rule>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
