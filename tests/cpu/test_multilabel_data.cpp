// Task multilabel's data and config: label lists in a TSV column (the
// separator, spaces, empty lists, repeated labels), the label vocabulary of
// the training file, multi-hot batches, errors naming FILE:LINE, the
// labels.txt of checkpoints, and the config's cross-field rules.
#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "data/classification.h"
#include "data/sentencepiece.h"
#include "data/tsv.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "tasks/classifier/outputs.h"
#include "tasks/data.h"

namespace rotor {
namespace {

class MultilabelTsv : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    std::ofstream(*dir_ / "text.txt") << "the cat sat on the mat\nthe dog ran in the park\n"
                                      << "a bird sang a song\nder hund lief im park\n";
    data::SpmTrainOptions o;
    o.inputs = {*dir_ / "text.txt"};
    o.model_prefix = *dir_ / "spm";
    o.vocab_size = 50;
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
  static data::TsvFormat format(char sep = ',') {
    data::TsvFormat f;
    f.sentence1 = "text";
    f.label = "codes";
    f.multilabel = true;
    f.label_separator = sep;
    f.max_len = 16;
    return f;
  }
  std::string error(const std::string& text, const data::TsvFormat& f, bool vocabulary = false) {
    const std::string p = write("bad.tsv", text);
    try {
      if (vocabulary)
        data::label_vocabulary(test::slurp(p), p, f);
      else
        data::read_classification_tsv(p, f, *tok_, true);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  static test::TempDir* dir_;
  static data::Tokenizer* tok_;
};
test::TempDir* MultilabelTsv::dir_ = nullptr;
data::Tokenizer* MultilabelTsv::tok_ = nullptr;

const char* kTrain =
    "codes\ttext\n"
    "dog, cat\tthe cat sat\n"
    "\tthe dog ran\n"            // no labels
    "bird,bird , ant\ta bird\n"  // repeated: once
    "  \tder hund\n";            // spaces: no labels

TEST_F(MultilabelTsv, VocabularyListsAndMultiHotBatches) {
  const std::string p = write("train.tsv", kTrain);
  data::TsvFormat f = format();
  f.labels = data::label_vocabulary(test::slurp(p), p, f);
  EXPECT_EQ(f.labels, (std::vector<std::string>{"ant", "bird", "cat", "dog"}));  // sorted
  const data::ClassificationSet s = data::read_classification_tsv(p, f, *tok_, true);
  ASSERT_EQ(s.size(), 4);
  EXPECT_TRUE(s.multilabel);
  EXPECT_EQ(s.num_labels, 4);
  EXPECT_EQ(s.examples[0].label_set, (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(s.examples[1].label_set.empty());
  EXPECT_EQ(s.examples[2].label_set, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(s.examples[3].label_set.empty());
  const data::ClassificationHostBatch b = data::make_classification_batch(s, {2, 1, 0}, false);
  EXPECT_FALSE(b.labels.defined());
  ASSERT_EQ(b.targets.shape(), (Shape{3, 4}));
  EXPECT_EQ(b.targets.to_floats(), (std::vector<float>{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  // A file without the label column (predict's input) has no targets.
  const std::string t = write("test.tsv", "text\nthe cat\n");
  const data::ClassificationSet u = data::read_classification_tsv(t, f, *tok_, false);
  EXPECT_FALSE(u.has_labels);
  EXPECT_FALSE(data::make_classification_batch(u, {0}, false).targets.defined());
}

TEST_F(MultilabelTsv, SpaceSeparatedLists) {
  const std::string p = write("spaces.tsv", "codes\ttext\nJ45  I10\tthe cat\n I10 \ta bird\n");
  data::TsvFormat f = format(' ');
  f.labels = data::label_vocabulary(test::slurp(p), p, f);
  EXPECT_EQ(f.labels, (std::vector<std::string>{"I10", "J45"}));
  const data::ClassificationSet s = data::read_classification_tsv(p, f, *tok_, true);
  EXPECT_EQ(s.examples[0].label_set, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(s.examples[1].label_set, (std::vector<int32_t>{0}));
}

TEST_F(MultilabelTsv, ErrorsNameFileAndLine) {
  data::TsvFormat f = format();
  f.labels = {"cat", "dog"};
  EXPECT_NE(error("codes\ttext\ncat\ta\ndog,emu\tb\n", f)
                .find("bad.tsv:3: label \"emu\" is not one of the run's 2 labels (data.labels, "
                      "or else the labels of data.train)"),
            std::string::npos);
  EXPECT_NE(error("codes\ttext\ncat,,dog\ta\n", f)
                .find("bad.tsv:2: an empty label in \"cat,,dog\" (labels separated by \",\", "
                      "data.label_separator)"),
            std::string::npos);
  EXPECT_NE(error("codes\ttext\ncat\ta\ndog,\tb\n", f, true).find("bad.tsv:3: an empty label"),
            std::string::npos);
  EXPECT_NE(error("codes\ttext\ncat\ta\tc\n", f).find("bad.tsv:2: 3 tab-separated fields"),
            std::string::npos);
  EXPECT_NE(error("text\na\n", f, true).find("bad.tsv:1: no column \"codes\""), std::string::npos);
}

TEST_F(MultilabelTsv, LabelsFileRoundTripsAndRefusesDamage) {
  const std::vector<std::string> labels = {"a b", "c", "I10.1"};
  const std::string p = write("labels.txt", rotor::checkpoint::labels_file_text(labels));
  EXPECT_EQ(test::slurp(p), "a b\nc\nI10.1\n");
  EXPECT_EQ(rotor::checkpoint::read_labels_file(p), labels);
  auto error_of = [&](const std::string& path) {
    try {
      rotor::checkpoint::read_labels_file(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(write("e.txt", "a\n\nb\n")).find("e.txt:2: an empty label"),
            std::string::npos);
  EXPECT_NE(error_of(write("n.txt", "")).find("n.txt: no labels"), std::string::npos);
  EXPECT_NE(error_of(*dir_ / "absent.txt").find("absent.txt: missing"), std::string::npos);
}

TEST_F(MultilabelTsv, VocabularyOfTheConfig) {
  Config c;
  c.task = *task_kind("multilabel");
  c.data.train = write("train.tsv", kTrain);
  c.data.sentence1_column = "text";
  c.data.label_column = "codes";
  EXPECT_EQ(tasks::multilabel_vocabulary(c),
            (std::vector<std::string>{"ant", "bird", "cat", "dog"}));
  c.data.labels = {"z", "y"};  // given: as given, in its order
  EXPECT_EQ(tasks::multilabel_vocabulary(c), c.data.labels);
  c.data.labels.clear();
  c.data.train = write("none.tsv", "codes\ttext\n\ta\n");
  try {
    tasks::multilabel_vocabulary(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no example has a label in column codes"),
              std::string::npos)
        << e.what();
  }
}

// ---- config ----------------------------------------------------------------------

constexpr const char* kYaml = R"(task: multilabel
data:
  train: t.tsv
  valid: v.tsv
  sentence1_column: text
  label_column: codes
train:
  best_metric: ap
)";

std::string error_of(const std::vector<std::string>& sets) {
  try {
    load_config_from_string(kYaml, "ml.yaml", sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(MultilabelConfig, KeysAndRules) {
  const Config c = load_config_from_string(kYaml);
  EXPECT_EQ(c.task, *task_kind("multilabel"));
  EXPECT_EQ(c.data.label_separator, ",");
  EXPECT_EQ(c.train.best_metric, ValidMetric::Ap);
  EXPECT_EQ(load_config_from_string(dump_config(c)), c);
  EXPECT_NO_THROW(load_config_from_string(kYaml, "x", {"train.best_metric=auroc"}));
  EXPECT_NO_THROW(load_config_from_string(kYaml, "x", {"data.label_separator=\" \""}));
  EXPECT_NE(error_of({"data.label_separator=\";;\""})
                .find("data.label_separator: \";;\" is not one ASCII character"),
            std::string::npos);
  EXPECT_NE(error_of({"data.label_separator=\"\\t\""}).find("data.label_separator"),
            std::string::npos);
  EXPECT_NE(error_of({"data.regression=true"}).find("task multilabel reads lists of labels"),
            std::string::npos);
  EXPECT_NE(error_of({"data.labels=[a, \"b,c\"]"}).find("\"b,c\" holds the separator"),
            std::string::npos);
  EXPECT_NE(error_of({"data.labels=[a, a]"}).find("\"a\" is listed twice"), std::string::npos);
  EXPECT_NE(error_of({"data.label_column=text"}).find("must name different columns"),
            std::string::npos);
  EXPECT_NE(error_of({"train.best_metric=accuracy"})
                .find("accuracy is a score of task mlm or classification or lm; task multilabel "
                      "has none"),
            std::string::npos);
  EXPECT_NE(error_of({"task=classification", "data.labels=[a, b]"})
                .find("ap is a score of task multilabel; task classification has none"),
            std::string::npos);
}

}  // namespace
}  // namespace rotor
