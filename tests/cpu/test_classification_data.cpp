// Task classification's data and config: GLUE's scores against scikit-learn
// and SciPy, BERT's packing and truncation, GLUE-style TSV reading (named
// columns, pairs, labels, regression, test files without labels, errors with
// FILE:LINE), the batcher (deterministic, sharded, resumable), and the config
// keys (round trip, cross-field errors).
#include <filesystem>
#include <fstream>
#include <set>

#include "config/config.h"
#include "data/classification.h"
#include "data/sentencepiece.h"
#include "eval/glue_metrics.h"
#include "support/test_util.h"

namespace rotor {
namespace {

// ---- GLUE's scores --------------------------------------------------------------

// Reference values from scikit-learn 1.5 (matthews_corrcoef, f1_score) and
// SciPy 1.10 (pearsonr, spearmanr) on the same inputs.
TEST(GlueMetrics, MatchScikitLearnAndSciPy) {
  const std::vector<int32_t> p3 = {0, 1, 2, 2, 1, 0, 2, 1, 1, 0},
                             g3 = {0, 2, 2, 1, 1, 0, 2, 0, 1, 1};
  EXPECT_NEAR(eval::matthews_corrcoef(p3, g3, 3), 0.3939393939393939, 1e-12);
  EXPECT_NEAR(eval::accuracy(p3, g3), 0.6, 1e-12);
  const std::vector<int32_t> pb = {1, 1, 0, 1, 0, 0, 1, 1}, gb = {1, 0, 0, 1, 1, 0, 1, 1};
  EXPECT_NEAR(eval::f1_score(pb, gb), 0.8, 1e-12);
  EXPECT_NEAR(eval::matthews_corrcoef(pb, gb, 2), 0.4666666666666667, 1e-12);
  const std::vector<double> x = {1.0, 2.5, 2.5, 4.0, 3.0, 0.5}, y = {0.8, 2.0, 3.5, 3.9, 3.9, 1.0};
  EXPECT_NEAR(eval::pearson(x, y), 0.9013597919450179, 1e-12);
  EXPECT_NEAR(eval::spearman(x, y), 0.9117647058823529, 1e-12);  // ties on both sides
}

TEST(GlueMetrics, DegenerateInputsGiveZero) {
  const std::vector<int32_t> zeros(5, 0), ones(5, 1);
  EXPECT_EQ(eval::f1_score(zeros, zeros), 0.0);  // no positive anywhere
  EXPECT_EQ(eval::matthews_corrcoef(zeros, ones, 2), 0.0);
  EXPECT_EQ(eval::pearson({1, 1, 1}, {1, 2, 3}), 0.0);
  EXPECT_EQ(eval::accuracy({}, {}), 0.0);
  EXPECT_NEAR(eval::matthews_corrcoef(ones, ones, 2), 0.0, 1e-12);  // one class only
  EXPECT_NEAR(eval::spearman({1, 2, 3}, {10, 20, 30}), 1.0, 1e-12);
  EXPECT_NEAR(eval::spearman({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  EXPECT_THROW(eval::accuracy({1}, {1, 2}), Error);
}

// ---- packing ----------------------------------------------------------------------

TEST(ClassificationData, PacksAndTruncatesLongestFirst) {
  const data::PairSpecialIds sp{5, 6};
  std::vector<int32_t> ids, types;
  data::pack_example({10, 11, 12}, {20, 21}, true, 64, sp, ids, types);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 10, 11, 12, 6, 20, 21, 6}));
  EXPECT_EQ(types, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 1, 1}));
  // 6 + 2 + 3 specials = 11 > 8: a loses 3 (always the longer one).
  data::pack_example({10, 11, 12, 13, 14, 15}, {20, 21}, true, 8, sp, ids, types);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 10, 11, 12, 6, 20, 21, 6}));
  // Equal lengths: b loses first (Hugging Face's longest_first).
  data::pack_example({10, 11}, {20, 21}, true, 6, sp, ids, types);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 10, 11, 6, 20, 6}));
  data::pack_example({10, 11, 12}, {}, false, 4, sp, ids, types);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 10, 11, 6}));
  EXPECT_EQ(types, (std::vector<int32_t>{0, 0, 0, 0}));
}

// ---- TSV reading --------------------------------------------------------------------

class Tsv : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    std::ofstream(*dir_ / "text.txt")
        << "the cat sat on the mat\nthe dog ran in the park\na bird sang a song\n"
        << "der hund lief im park\ndie katze sass auf der matte\n";
    data::SpmTrainOptions o;
    o.inputs = {*dir_ / "text.txt"};
    o.model_prefix = *dir_ / "spm";
    o.vocab_size = 60;
    o.user_defined_symbols = {"[MASK]", "[CLS]", "[SEP]"};
    o.num_threads = 1;
    data::train_sentencepiece(o);
    tok_ = new data::Tokenizer(data::Tokenizer::load(*dir_ / "spm.model"));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete dir_;
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = *dir_ / name;
    std::ofstream(path) << text;
    return path;
  }
  data::TsvFormat pairs() {
    data::TsvFormat f;
    f.sentence1 = "s1";
    f.sentence2 = "s2";
    f.label = "gold";
    f.labels = {"no", "yes"};
    f.max_len = 32;
    return f;
  }
  static test::TempDir* dir_;
  static data::Tokenizer* tok_;
};
test::TempDir* Tsv::dir_ = nullptr;
data::Tokenizer* Tsv::tok_ = nullptr;

TEST_F(Tsv, ReadsNamedColumnsPairsAndLabels) {
  const std::string p = write("pairs.tsv",
                              "id\ts2\tgold\ts1\n"
                              "0\tthe dog\tyes\tthe cat \"sat\"\r\n"
                              "\n"
                              "1\tder hund\tno\ta bird\n");
  const data::ClassificationSet s = data::read_classification_tsv(p, pairs(), *tok_, true);
  ASSERT_EQ(s.size(), 2);
  EXPECT_TRUE(s.has_labels);
  EXPECT_EQ(s.examples[0].label, 1);
  EXPECT_EQ(s.examples[1].label, 0);
  // [CLS] s1 [SEP] s2 [SEP], the quotes kept as text (no quoting in GLUE's TSV).
  std::vector<int32_t> a = tok_->encode("the cat \"sat\""), b = tok_->encode("the dog");
  std::vector<int32_t> want{5};
  want.insert(want.end(), a.begin(), a.end());
  want.push_back(6);
  want.insert(want.end(), b.begin(), b.end());
  want.push_back(6);
  EXPECT_EQ(s.examples[0].ids, want);
  EXPECT_EQ(s.examples[0].types.back(), 1);
  EXPECT_EQ(s.examples[0].types.front(), 0);
  EXPECT_EQ(s.truncated, 0);
}

TEST_F(Tsv, RegressionHeaderlessTestFilesAndTruncation) {
  data::TsvFormat f;
  f.sentence1 = "1";
  f.label = "0";
  f.header = false;
  f.regression = true;
  f.max_len = 4;
  const std::string p = write("reg.tsv", "3.5\tthe cat sat on the mat\n-1e-1\ta bird\n");
  const data::ClassificationSet s = data::read_classification_tsv(p, f, *tok_, true);
  ASSERT_EQ(s.size(), 2);
  EXPECT_FLOAT_EQ(s.examples[0].target, 3.5f);
  EXPECT_FLOAT_EQ(s.examples[1].target, -0.1f);
  EXPECT_EQ(s.examples[0].ids.size(), 4u);  // cut to max_len
  EXPECT_GE(s.truncated, 1);
  // A test file without the label column (with a header: the column is absent).
  data::TsvFormat g = pairs();
  const std::string t = write("test.tsv", "index\ts1\ts2\n0\tthe cat\tthe dog\n");
  const data::ClassificationSet u = data::read_classification_tsv(t, g, *tok_, false);
  EXPECT_FALSE(u.has_labels);
  EXPECT_EQ(u.size(), 1);
  EXPECT_THROW(data::read_classification_tsv(t, g, *tok_, true), Error);
  const data::ClassificationHostBatch b = data::make_classification_batch(u, {0}, false);
  EXPECT_FALSE(b.labels.defined());
  EXPECT_FALSE(b.targets.defined());
}

TEST_F(Tsv, ErrorsNameFileAndLine) {
  auto message = [&](const std::string& text, const data::TsvFormat& f) {
    const std::string p = write("bad.tsv", text);
    try {
      data::read_classification_tsv(p, f, *tok_, true);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("s1\ts2\tgold\na\tb\tmaybe\n", pairs())
                .find("bad.tsv:2: label \"maybe\" is not one of data.labels [no, yes]"),
            std::string::npos);
  EXPECT_NE(
      message("s1\ts2\tgold\na\tb\tyes\nc\td\n", pairs()).find("bad.tsv:3: 2 tab-separated fields"),
      std::string::npos);
  EXPECT_NE(
      message("s1\tgold\na\tyes\n", pairs())
          .find("bad.tsv:1: no column \"s2\" (data.sentence2_column); the header has: s1, gold"),
      std::string::npos);
  EXPECT_NE(message("s1\ts2\tgold\n", pairs()).find("no examples"), std::string::npos);
  data::TsvFormat r = pairs();
  r.labels.clear();
  r.regression = true;
  EXPECT_NE(message("s1\ts2\tgold\na\tb\tx1\n", r).find("bad.tsv:2: label \"x1\" is not a number"),
            std::string::npos);
}

TEST_F(Tsv, BatcherIsDeterministicShardedAndResumable) {
  std::string text = "s1\ts2\tgold\n";
  for (int i = 0; i < 23; ++i)
    text += "the cat\tthe dog sat\t" + std::string(i % 2 ? "yes" : "no") + "\n";
  auto set = std::make_shared<const data::ClassificationSet>(
      data::read_classification_tsv(write("many.tsv", text), pairs(), *tok_, true));
  data::ClassificationBatcherOptions o;
  o.batch_size = 5;
  o.seed = 9;
  data::ClassificationBatcher a(set, false, o), b(set, false, o);
  EXPECT_EQ(a.batches_in_epoch(), 5);  // 23 / 5, the last batch partial
  std::set<int64_t> seen;
  for (const auto& batch : a.epoch_plan(0))
    for (int64_t i : batch) seen.insert(i);
  EXPECT_EQ(seen.size(), 23u);
  EXPECT_NE(a.epoch_plan(0), a.epoch_plan(1));  // reshuffled every epoch
  a.next();
  a.next();
  b.set_position(a.position());
  const data::ClassificationHostBatch x = a.next(), y = b.next();
  EXPECT_EQ(x.indices, y.indices);
  EXPECT_EQ(x.input_ids.to_ints(), y.input_ids.to_ints());
  EXPECT_EQ(x.labels.shape(), (Shape{5}));
  // Two ranks: disjoint batches of the global list.
  o.world_size = 2;
  o.rank = 1;
  data::ClassificationBatcher r1(set, false, o);
  EXPECT_EQ(r1.epoch_plan(0)[0], a.epoch_plan(0)[1]);
  // Evaluation order.
  o.world_size = 1;
  o.rank = 0;
  o.shuffle = false;
  data::ClassificationBatcher ev(set, false, o);
  EXPECT_EQ(ev.next().indices, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// ---- config -------------------------------------------------------------------------

const char* kYaml = R"(task: classification
model:
  position: rope
  init_from: /models/roformer
data:
  train: train.tsv
  valid: dev.tsv
  sentence1_column: "#1 String"
  sentence2_column: "#2 String"
  label_column: Quality
  labels: ["0", "1"]
  seq_len: 128
  max_len: 128
train:
  best_metric: f1
)";

TEST(ClassificationConfig, KeysRoundTrip) {
  const Config c = load_config_from_string(kYaml);
  EXPECT_EQ(c.task, *task_kind("classification"));
  EXPECT_EQ(c.model.init_from, "/models/roformer");
  EXPECT_EQ(c.data.sentence1_column, "#1 String");
  EXPECT_EQ(c.data.labels, (std::vector<std::string>{"0", "1"}));
  EXPECT_TRUE(c.data.header);
  EXPECT_EQ(c.train.best_metric, ValidMetric::F1);
  EXPECT_EQ(load_config_from_string(dump_config(c)), c);
  const Config o =
      load_config_from_string(kYaml, "x", {"data.labels=[a, \"b c\", d]", "train.best_metric=mcc"});
  EXPECT_EQ(o.data.labels, (std::vector<std::string>{"a", "b c", "d"}));
  EXPECT_EQ(load_config_from_string(dump_config(o)), o);
}

std::string error_of(const std::vector<std::string>& sets) {
  try {
    load_config_from_string(kYaml, "glue.yaml", sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ClassificationConfig, CrossFieldErrors) {
  EXPECT_NE(error_of({"data.labels=[]"})
                .find("data.labels: task classification needs two or more class labels"),
            std::string::npos);
  EXPECT_NE(error_of({"data.regression=true"}).find("leave data.labels empty"), std::string::npos);
  EXPECT_NE(error_of({"data.labels=[a, b, c]"})
                .find("train.best_metric: f1 is the F1 of the second label of a two-label task; "
                      "data.labels has 3"),
            std::string::npos);
  EXPECT_NE(error_of({"train.best_metric=pearson"}).find("pearson correlates numbers"),
            std::string::npos);
  EXPECT_NE(error_of({"data.labels=[]", "data.regression=true", "train.best_metric=accuracy"})
                .find("accuracy needs class labels"),
            std::string::npos);
  EXPECT_NE(error_of({"data.labels=[a, a]"}).find("\"a\" is listed twice"), std::string::npos);
  EXPECT_NE(error_of({"data.label_column=\"#1 String\""}).find("must name different columns"),
            std::string::npos);
  EXPECT_NE(error_of({"data.labels=5"}).find("needs two or more"), std::string::npos);
  EXPECT_NE(error_of({"data.labels={a: 1}"}).find("expected a list of strings"), std::string::npos);
  EXPECT_NE(error_of({"task=translation", "train.best_metric=loss"})
                .find("model.init_from: initializes a BERT/RoFormer encoder"),
            std::string::npos);
  EXPECT_NE(error_of({"task=mlm", "model.init_from=", "train.best_metric=mcc"})
                .find("mcc is a score of task classification; task mlm has none"),
            std::string::npos);
  // Every score that applies is reported without being listed.
  EXPECT_NO_THROW(load_config_from_string(kYaml, "x", {"train.best_metric=accuracy"}));
  EXPECT_NO_THROW(load_config_from_string(kYaml, "x", {"train.valid_metrics=[loss, f1, mcc]"}));
  EXPECT_NO_THROW(load_config_from_string(
      kYaml, "x", {"data.labels=[]", "data.regression=true", "train.best_metric=spearman"}));
}

// configs/glue: the paper's six tasks with its settings (section 4.3).
TEST(ClassificationConfig, GlueConfigsHoldThePapersSettings) {
  const std::vector<std::pair<std::string, ValidMetric>> tasks = {
      {"mrpc", ValidMetric::F1},       {"sst2", ValidMetric::Accuracy},
      {"qnli", ValidMetric::Accuracy}, {"stsb", ValidMetric::Spearman},
      {"qqp", ValidMetric::F1},        {"mnli", ValidMetric::Accuracy}};
  const Config base =
      load_config(std::string(ROTOR_SOURCE_DIR) + "/configs/mlm/roformer_base.yaml");
  for (const auto& [name, metric] : tasks) {
    SCOPED_TRACE(name);
    const Config c = load_config(std::string(ROTOR_SOURCE_DIR) + "/configs/glue/" + name + ".yaml");
    EXPECT_EQ(c.task, *task_kind("classification"));
    EXPECT_EQ(c.train.max_epochs, 3);
    EXPECT_EQ(c.train.batch_size, 32);
    EXPECT_EQ(c.data.seq_len, 512);
    EXPECT_GE(c.optim.lr, 2e-5);
    EXPECT_LE(c.optim.lr, 5e-5);
    EXPECT_EQ(c.train.best_metric, metric);
    EXPECT_EQ(c.data.regression, name == "stsb");
    EXPECT_EQ(c.data.labels.size(), name == "mnli" ? 3u : name == "stsb" ? 0u : 2u);
    // The architecture of the pretrained model it starts from.
    EXPECT_EQ(c.model, [&] {
      ModelConfig m = base.model;
      m.init_from = c.model.init_from;
      return m;
    }());
    EXPECT_FALSE(c.model.init_from.empty());
    EXPECT_NO_THROW(validate_for_training(c));
  }
}

}  // namespace
}  // namespace rotor
