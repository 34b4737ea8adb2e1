// Task classification as multiple choice (data.choices): the head's
// gradients against finite differences (BERT's pooler and RoFormer's head,
// one score a row, cross-entropy over each example's N scores), permuting
// the choices permutes the scores, the TSV layout (label, context, choices)
// packed as N pairs cut longest_first, its errors with FILE:LINE, the config
// rules, and end to end through the rotor binary: two choices learned in a
// few dozen updates from scratch, `rotor predict` writing the chosen index
// and the probabilities, RoFormer's export refused and BERT's exported as
// BertForMultipleChoice (read back, the same scores), a bad file one line.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "config/config.h"
#include "core/json_io.h"
#include "data/classification.h"
#include "data/sentencepiece.h"
#include "models/bert_classifier.h"
#include "support/classifier_step.h"
#include "support/dp_training.h"  // max_weight_diff
#include "support/model_gradcheck.h"
#include "support/packed_lm.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"
#include "tasks/classifier/outputs.h"
#include "tasks/data.h"

namespace rotor {
namespace {

// ---- the model --------------------------------------------------------------------

models::BertClassifierOptions tiny(bool roformer, int64_t choices) {
  models::BertClassifierOptions c;
  c.encoder.vocab_size = 40;
  c.encoder.num_layers = 1;
  c.encoder.layer = models::bert_base_layer();
  c.encoder.layer.d_model = 16;
  c.encoder.layer.n_heads = 2;
  c.encoder.layer.d_ff = 32;
  c.encoder.layer.layer_norm_eps = 1e-12f;
  c.encoder.position = roformer ? nn::PositionKind::Rope : nn::PositionKind::Learned;
  c.encoder.max_positions = 16;
  c.encoder.init_std = 0.3;
  c.num_labels = 1;
  c.choices = choices;
  c.dropout = 0.1f;
  return c;
}

// Two examples of three choices: rows [CLS] context [SEP] choice [SEP],
// padded; `order` permutes each example's choices (row k holds choice order[k]).
models::ClassificationBatch choice_batch(const std::vector<int>& order = {0, 1, 2},
                                         bool labels = true) {
  const std::vector<std::vector<int32_t>> rows = {
      {5, 12, 8, 6, 17, 9, 6}, {5, 12, 8, 6, 21, 6},  {5, 12, 8, 6, 30, 31, 6},  // example 0
      {5, 22, 6, 11, 6},       {5, 22, 6, 13, 14, 6}, {5, 22, 6, 25, 6}};        // example 1
  const int64_t T = 7;
  std::vector<int32_t> ids, types, lengths;
  for (int e = 0; e < 2; ++e)
    for (int k = 0; k < 3; ++k) {
      const std::vector<int32_t>& r = rows[static_cast<size_t>(e * 3 + order[k])];
      const size_t sep = static_cast<size_t>(std::find(r.begin(), r.end(), 6) - r.begin());
      for (size_t t = 0; t < static_cast<size_t>(T); ++t) {
        ids.push_back(t < r.size() ? r[t] : 0);
        types.push_back(t > sep && t < r.size() ? 1 : 0);
      }
      lengths.push_back(static_cast<int32_t>(r.size()));
    }
  models::ClassificationBatch b;
  b.input_ids = Tensor::from_ints(ids, {6, T});
  b.token_type_ids = Tensor::from_ints(types, {6, T});
  b.lengths = Tensor::from_ints(lengths, {6});
  if (labels) b.labels = Tensor::from_ints({2, 0}, {2});
  b.tokens = std::accumulate(lengths.begin(), lengths.end(), 0);
  return b;
}

class ChoiceGrad : public ::testing::TestWithParam<bool> {};

TEST_P(ChoiceGrad, MatchesFiniteDifferencesAndTheLossFromTheScores) {
  const bool roformer = GetParam();
  nn::ParameterStore store;
  models::BertForSequenceClassification model(tiny(roformer, 3), store);
  EXPECT_EQ(model.options().outputs(), 3);
  store.allocate(Device::cpu());
  store.initialize(1);
  test::jitter(store, 2, 0.1f);
  const models::ClassificationBatch batch = choice_batch();
  nn::Context ctx;
  ctx.training = true;  // dropout on, the same masks in every call
  ctx.seed = 3;
  ctx.micro_step = 2;
  store.zero_grad();
  std::vector<float> scores;
  const models::ClassificationSums s = model.forward_loss(batch, ctx, &scores);
  ASSERT_EQ(scores.size(), 6u);  // [B, N]
  EXPECT_EQ(s.examples, 2);
  EXPECT_TRUE(s.has_correct);
  double expect = 0;
  int64_t correct = 0;
  const int32_t y[2] = {2, 0};
  for (int b = 0; b < 2; ++b) {
    const float* z = scores.data() + b * 3;
    double total = 0;
    for (int k = 0; k < 3; ++k) total += std::exp(static_cast<double>(z[k]));
    expect += std::log(total) - z[y[b]];
    correct += std::max_element(z, z + 3) - z == y[b];
  }
  EXPECT_NEAR(s.loss, expect, 1e-5 * std::max(1.0, expect));
  EXPECT_EQ(s.correct, correct);
  model.backward(1.0f);
  auto objective = [&]() { return model.forward_loss(batch, ctx).loss; };
  const int checked = test::check_model_gradients(store, objective, [&](const std::string& name) {
    // The key bias cancels in softmax without rotation; the score's bias
    // shifts all N scores of an example alike, which the softmax cancels.
    return (name.find("attention.self.key.bias") != std::string::npos && !roformer) ||
           name == "classifier.bias" || name == "classifier.out_proj.bias";
  });
  EXPECT_GT(checked, 50);
  // One shared scoring unit: [1, d].
  const nn::Parameter* w =
      store.find(roformer ? "classifier.out_proj.weight" : "classifier.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (Shape{1, 16}));
}

INSTANTIATE_TEST_SUITE_P(Heads, ChoiceGrad, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "roformer" : "bert"; });

TEST(MultipleChoice, PermutingTheChoicesPermutesTheScores) {
  for (bool roformer : {false, true}) {
    nn::ParameterStore store;
    models::BertForSequenceClassification model(tiny(roformer, 3), store);
    store.allocate(Device::cpu());
    store.initialize(4);
    test::jitter(store, 5, 0.1f);
    nn::Context ctx;  // inference
    std::vector<float> a, b;
    model.forward_loss(choice_batch({0, 1, 2}, false), ctx, &a);
    const std::vector<int> order = {2, 0, 1};
    model.forward_loss(choice_batch(order, false), ctx, &b);
    for (int e = 0; e < 2; ++e)
      for (int k = 0; k < 3; ++k)
        EXPECT_NEAR(b[static_cast<size_t>(e * 3 + k)], a[static_cast<size_t>(e * 3 + order[k])],
                    1e-5)
            << roformer << " " << e << " " << k;
    // The scores differ between choices (the test would pass on constants).
    EXPECT_GT(std::abs(a[0] - a[1]) + std::abs(a[1] - a[2]), 1e-4);
  }
}

// ---- packed pairs (data.packing documents) -------------------------------------------

// Three examples of three choices as a set: the rows of choice_batch and a
// third example; labels 2, 0, 1.
data::ClassificationSet choice_set() {
  const std::vector<std::vector<int32_t>> pairs = {
      {5, 12, 8, 6, 17, 9, 6}, {5, 12, 8, 6, 21, 6},  {5, 12, 8, 6, 30, 31, 6},
      {5, 22, 6, 11, 6},       {5, 22, 6, 13, 14, 6}, {5, 22, 6, 25, 6},
      {5, 9, 6, 33, 6},        {5, 9, 6, 34, 35, 6},  {5, 9, 6, 36, 6}};
  data::ClassificationSet set;
  set.has_labels = true;
  set.choices = 3;
  const int32_t labels[] = {2, 0, 1};
  for (int e = 0; e < 3; ++e) {
    data::ClassificationExample ex;
    ex.label = labels[e];
    for (int k = 0; k < 3; ++k) {
      const std::vector<int32_t>& pair = pairs[static_cast<size_t>(e * 3 + k)];
      const size_t sep = static_cast<size_t>(std::find(pair.begin(), pair.end(), 6) - pair.begin());
      std::vector<int32_t> types;
      for (size_t t = 0; t < pair.size(); ++t) types.push_back(t > sep ? 1 : 0);
      ex.choice_ids.push_back(pair);
      ex.choice_types.push_back(types);
    }
    set.examples.push_back(ex);
  }
  return set;
}

// The pairs of a batch, in order, fill rows of pack_len: each pair's [CLS]
// at its place, B * N of them, documents numbered within each row.
TEST(MultipleChoicePacking, PairsFillRowsInOrder) {
  const data::ClassificationSet set = choice_set();
  const data::ClassificationHostBatch b = data::make_classification_batch(set, {1, 0}, false, 14);
  // Example 1's pairs (5, 6, 5 tokens), then example 0's (7, 6, 7): rows
  // {5, 6}, {5, 7}, {6, 7} of at most 14 tokens.
  ASSERT_EQ(b.input_ids.size(0), 3);
  const int64_t T = b.input_ids.size(1);
  EXPECT_EQ(T, 13);
  EXPECT_EQ(b.cls_positions,
            (std::vector<int32_t>{0, 5, static_cast<int32_t>(T), static_cast<int32_t>(T + 5),
                                  static_cast<int32_t>(2 * T), static_cast<int32_t>(2 * T + 6)}));
  const std::vector<int32_t> ids = b.input_ids.to_ints(), types = b.token_type_ids.to_ints();
  for (int32_t at : b.cls_positions) EXPECT_EQ(ids[static_cast<size_t>(at)], 5);
  EXPECT_EQ(b.documents[0], 0);
  EXPECT_EQ(b.documents[5], 1);
  EXPECT_EQ(b.documents[11], -1);  // row 0 holds 11 tokens
  EXPECT_EQ(b.documents[static_cast<size_t>(T + 5)], 1);
  EXPECT_EQ(types[4], 1);  // example 1 choice 0's last [SEP]
  EXPECT_EQ(types[5], 0);  // choice 1's [CLS]
  EXPECT_EQ(b.lengths.to_ints(), (std::vector<int32_t>{11, 12, 13}));
  EXPECT_EQ(b.labels.to_ints(), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(b.tokens, 36);
  try {
    data::make_classification_batch(set, {2, 0}, false, 6);
    ADD_FAILURE() << "a pair longer than the row was packed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("example 0 choice 0 has 7 tokens, more than 6"),
              std::string::npos)
        << e.what();
  }
}

class ChoicePacking : public ::testing::TestWithParam<bool> {};

// Packed pairs against one pair a row: the same scores, loss and
// gradients, and tasks::classify (validation, `rotor predict`) alike.
TEST_P(ChoicePacking, PackedPairsEqualOnePairARow) {
  const bool roformer = GetParam();
  models::BertClassifierOptions o = tiny(roformer, 3);
  o.dropout = 0.0f;
  o.encoder.layer.dropout = o.encoder.layer.attention_dropout = 0.0f;
  nn::ParameterStore store;
  models::BertForSequenceClassification model(o, store);
  store.allocate(Device::cpu());
  store.initialize(4);
  test::jitter(store, 5, 0.1f);
  const data::ClassificationSet set = choice_set();
  const std::vector<int64_t> ids{2, 0, 1};
  const data::ClassificationHostBatch packed = data::make_classification_batch(set, ids, false, 14);
  const data::ClassificationHostBatch plain = data::make_classification_batch(set, ids, false);
  ASSERT_LT(packed.input_ids.size(0), plain.input_ids.size(0));
  nn::Context ctx;
  ctx.training = true;
  const test::ClassifierStep a = test::classifier_step(model, store, packed, ctx),
                             b = test::classifier_step(model, store, plain, ctx);
  ASSERT_EQ(a.scores.size(), 9u);
  for (size_t i = 0; i < a.scores.size(); ++i)
    EXPECT_NEAR(a.scores[i], b.scores[i], 2e-5) << "score " << i;
  EXPECT_GT(std::abs(b.scores[0] - b.scores[1]) + std::abs(b.scores[1] - b.scores[2]),
            1e-4);  // not constants
  EXPECT_EQ(a.sums.examples, 3);
  EXPECT_EQ(a.sums.correct, b.sums.correct);
  EXPECT_NEAR(a.sums.loss, b.sums.loss, 1e-5 * std::max(1.0, std::abs(b.sums.loss)));
  EXPECT_LT(test::relative_grad_diff(a.grads, b.grads), 1e-4);
  double norm = 0;
  for (float g : b.grads) norm += static_cast<double>(g) * g;
  EXPECT_GT(norm, 1e-6);
  const tasks::ClassificationOutputs rows = tasks::classify(model, set, 2, nn::Context{}),
                                     packs = tasks::classify(model, set, 2, nn::Context{}, 14);
  ASSERT_EQ(packs.logits.size(), rows.logits.size());
  for (size_t i = 0; i < rows.logits.size(); ++i)
    EXPECT_NEAR(packs.logits[i], rows.logits[i], 2e-5) << "classify " << i;
  EXPECT_EQ(packs.predicted, rows.predicted);
}

INSTANTIATE_TEST_SUITE_P(Heads, ChoicePacking, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "roformer" : "bert"; });

// ---- the data -----------------------------------------------------------------------

class ChoiceTsv : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_ / "tok.bytes") << data::byte_tokenizer_text({"[MASK]", "[CLS]", "[SEP]"});
    tok_ = data::Tokenizer::load(dir_ / "tok.bytes");
  }
  std::string write(const std::string& text) {
    std::ofstream(dir_ / "mc.tsv") << text;
    return dir_ / "mc.tsv";
  }
  data::TsvFormat format(int64_t choices, int64_t max_len = 64) {
    data::TsvFormat f;
    f.choices = choices;
    f.max_len = max_len;
    return f;
  }
  std::string error(const std::string& text, bool require_labels = true) {
    try {
      data::read_classification_tsv(write(text), format(2), tok_, require_labels);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  test::TempDir dir_;
  data::Tokenizer tok_;
};

TEST_F(ChoiceTsv, PacksEachChoiceAsAPairCutLongestFirst) {
  const std::string p =
      write("label\tcontext\tc1\tc2\tc3\n1\tabcdefgh\txy\tz\tuvw\n\n0\tq\tr\ts\tt\n");
  const data::ClassificationSet s = data::read_classification_tsv(p, format(3, 8), tok_, true);
  ASSERT_EQ(s.size(), 2);
  EXPECT_EQ(s.choices, 3);
  EXPECT_EQ(s.examples[0].label, 1);
  EXPECT_EQ(s.examples[1].label, 0);
  const data::PairSpecialIds sp = data::PairSpecialIds::from_tokenizer(tok_);
  const char* choices[3] = {"xy", "z", "uvw"};
  for (int k = 0; k < 3; ++k) {
    std::vector<int32_t> ids, types;
    data::pack_example(tok_.encode("abcdefgh"), tok_.encode(choices[k]), true, 8, sp, ids, types);
    EXPECT_EQ(s.examples[0].choice_ids[static_cast<size_t>(k)], ids) << k;
    EXPECT_EQ(s.examples[0].choice_types[static_cast<size_t>(k)], types) << k;
    EXPECT_EQ(ids.size(), 8u);  // the context, the longer side, was cut
  }
  EXPECT_EQ(s.truncated, 1);
  // The batch: B * N rows, example b's choices in rows 3b .. 3b + 2; B labels.
  const data::ClassificationHostBatch b = data::make_classification_batch(s, {1, 0}, false);
  EXPECT_EQ(b.input_ids.shape(), (Shape{6, 8}));
  EXPECT_EQ(b.labels.to_ints(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(b.lengths.to_ints(), (std::vector<int32_t>{5, 5, 5, 8, 8, 8}));
  const std::vector<int32_t> ids = b.input_ids.to_ints();
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 24, ids.begin() + 32), s.examples[0].choice_ids[0]);
  EXPECT_EQ(b.size(), 2);
}

TEST_F(ChoiceTsv, FilesWithoutLabelsReadForPrediction) {
  const std::string p = write("context\tc1\tc2\nabc\td\te\n");
  const data::ClassificationSet s = data::read_classification_tsv(p, format(2), tok_, false);
  EXPECT_FALSE(s.has_labels);
  EXPECT_EQ(s.size(), 1);
  EXPECT_FALSE(data::make_classification_batch(s, {0}, false).labels.defined());
}

TEST_F(ChoiceTsv, ErrorsNameFileAndLine) {
  EXPECT_NE(error("label\tcontext\tc1\tc2\n0\ta\tb\tc\n0\ta\tb\n")
                .find("mc.tsv:3: 3 tab-separated fields, but 2 choices need 4"),
            std::string::npos);
  EXPECT_NE(error("label\tcontext\tc1\tc2\n2\ta\tb\tc\n")
                .find("mc.tsv:2: label \"2\" is not the index of a choice, 0 to 1"),
            std::string::npos);
  EXPECT_NE(error("label\tcontext\tc1\tc2\n-1\ta\tb\tc\n").find("mc.tsv:2: label \"-1\""),
            std::string::npos);
  EXPECT_NE(error("label\tcontext\tc1\tc2\nB\ta\tb\tc\n").find("mc.tsv:2: label \"B\""),
            std::string::npos);
  // Three choices in a file for two: the header says so.
  EXPECT_NE(error("label\tcontext\tc1\tc2\tc3\n0\ta\tb\tc\td\n")
                .find("mc.tsv:1: the header has 5 columns; 2 choices need 4"),
            std::string::npos);
  EXPECT_NE(error("context\tc1\tc2\na\tb\tc\n").find("mc.tsv:1: no label column"),
            std::string::npos);
  EXPECT_NE(error("label\tcontext\tc1\tc2\n").find("mc.tsv: no examples"), std::string::npos);
}

// ---- the config ---------------------------------------------------------------------

std::string config_error(const std::vector<std::string>& sets) {
  const std::string yaml =
      test::tiny_encoder("classification", "run").set("data.choices", "2").text();
  try {
    load_config_from_string(yaml, "mc.yaml", sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(MultipleChoiceConfig, Rules) {
  EXPECT_EQ(config_error({}), "no error");
  EXPECT_NE(config_error({"data.choices=1"}).find("data.choices: 1 candidates"), std::string::npos);
  EXPECT_NE(config_error({"data.choices=-1"}).find("data.choices"), std::string::npos);
  EXPECT_NE(config_error({"task=mlm"}).find("mc.yaml:"), std::string::npos);
  EXPECT_NE(config_error({"task=mlm"})
                .find("data.choices: a multiple-choice head is task classification's; task is mlm"),
            std::string::npos);
  EXPECT_NE(config_error({"data.labels=[a, b]"}).find("leave data.labels out"), std::string::npos);
  EXPECT_NE(config_error({"data.regression=true"}).find("data.regression"), std::string::npos);
  // The layout is positional: a named column would be ignored, so it is refused.
  for (const char* key : {"data.sentence1_column", "data.sentence2_column", "data.label_column"})
    EXPECT_NE(config_error({fmt::format("{}=question", key)})
                  .find(fmt::format("{}: with data.choices the columns are label, context", key)),
              std::string::npos)
        << key;
  EXPECT_NE(config_error({"data.seq_len=4"}).find("at least 5"), std::string::npos);
  EXPECT_NE(config_error({"data.valid=v.tsv", "train.best_metric=mcc"})
                .find("a multiple-choice task (data.choices: 2) scores accuracy"),
            std::string::npos);
  EXPECT_EQ(config_error({"data.valid=v.tsv", "train.best_metric=accuracy"}), "no error");
  const Config c = load_config_from_string(
      test::tiny_encoder("classification", "run").set("data.choices", "4").text());
  EXPECT_EQ(c.data.choices, 4);
  EXPECT_EQ(load_config_from_string(dump_config(c)), c);
}

// ---- end to end ---------------------------------------------------------------------

// Two choices, the right one starting "yes", the other "no": learned from
// scratch in 60 updates.
// Two-choice TSVs: train (200 examples) and valid (40), the right choice a
// "yes" word.
void write_choice_tsvs(const test::TempDir& dir) {
  for (const auto& [split, n] : {std::pair<std::string, int>{"train", 200}, {"valid", 40}}) {
    std::ofstream out(dir / split + ".tsv");
    out << "label\tcontext\tchoice_0\tchoice_1\n";
    const char* words[] = {"apple", "river", "stone", "cloud", "violet"};
    for (int i = 0; i < n; ++i) {
      const int right = (i * 7 + (split == "valid")) % 3 % 2;
      const std::string context = std::string(words[i % 5]) + " " + words[(i * 3) % 5];
      const std::string good = std::string("yes ") + words[(i * 2) % 5];
      const std::string bad = std::string("no ") + words[(i + 1) % 5];
      out << right << "\t" << context << "\t" << (right == 0 ? good : bad) << "\t"
          << (right == 1 ? good : bad) << "\n";
    }
  }
}

TEST(MultipleChoiceTrain, LearnsPredictsAndRefusesTheExport) {
  test::TempDir dir;
  write_choice_tsvs(dir);
  test::tiny_encoder("classification", dir / "run")
      .set("data.tokenizer", "bytes")
      .set("data.train", dir / "train.tsv")
      .set("data.valid", dir / "valid.tsv")
      .set("data.choices", "2")
      .set("data.seq_len", "48")
      .set("train.max_updates", "60")
      .set("train.batch_size", "8")
      .set("train.valid_interval", "60")
      .set("train.save_interval", "60")
      .set("optim.name", "adamw")
      .set("optim.lr", "5.0e-3")
      .set("optim.warmup_updates", "4")
      .write(dir / "mc.yaml");
  auto run = [&](const std::string& args) {
    return test::run_rotor(dir, args, "OMP_NUM_THREADS=1");
  };
  auto r = run("train " + (dir / "mc.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream metrics(test::slurp(dir / "run/metrics.jsonl"));
  std::string line, valid;
  while (std::getline(metrics, line))
    if (line.find("\"split\":\"valid\"") != std::string::npos ||
        line.find("\"split\": \"valid\"") != std::string::npos)
      valid = line;
  ASSERT_FALSE(valid.empty());
  EXPECT_NE(valid.find("\"accuracy\":1"), std::string::npos) << valid;
  EXPECT_EQ(valid.find("mcc"), std::string::npos) << valid;

  r = run("predict --checkpoint " + (dir / "run") + " --input " + (dir / "valid.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("predict: 40 examples | loss "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("| accuracy 100.00"), std::string::npos) << r.err;
  std::istringstream pred(r.out);
  std::getline(pred, line);
  EXPECT_EQ(line, "index\tprediction\tp_0\tp_1");
  std::getline(pred, line);  // example 0: the right choice is 1 for the valid split
  std::istringstream fields(line);
  int index = -1, chosen = -1;
  double p0 = 0, p1 = 0;
  fields >> index >> chosen >> p0 >> p1;
  EXPECT_EQ(index, 0);
  EXPECT_EQ(chosen, 1);
  EXPECT_NEAR(p0 + p1, 1.0, 1e-5);
  EXPECT_GT(p1, 0.5);

  r = run("export --checkpoint " + (dir / "run") + " --format hf --output " + (dir / "hf"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("a RoFormer multiple-choice classifier (data.choices: 2), which has no "
                       "Hugging Face export"),
            std::string::npos)
      << r.err;
  std::ofstream(dir / "bad.tsv") << "label\tcontext\tc0\tc1\n0\ta\tb\tc\n1\ta\tb\n";
  r = run("predict --checkpoint " + (dir / "run") + " --input " + (dir / "bad.tsv"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("bad.tsv:3: 3 tab-separated fields, but 2 choices need 4"),
            std::string::npos)
      << r.err;
}

// BERT's multiple-choice head is Hugging Face's BertForMultipleChoice: the
// export says so, and reads back into a run whose scores are the same
// (rotor -> Hugging Face -> rotor; the logits against transformers itself:
// tests/scripts/hf_transformers_check.py).
TEST(MultipleChoiceTrain, BertExportsAsBertForMultipleChoice) {
  test::TempDir dir;
  write_choice_tsvs(dir);
  auto config = [&](const std::string& out) {
    return test::tiny_encoder("classification", dir / out)
        .set("model.position", "learned")
        .set("data.tokenizer", "bytes")
        .set("data.train", dir / "train.tsv")
        .set("data.valid", dir / "valid.tsv")
        .set("data.choices", "2")
        .set("data.seq_len", "48")
        .set("train.batch_size", "8")
        .set("optim.name", "adamw");
  };
  config("run").set("train.max_updates", "20").set("optim.lr", "5.0e-3").write(dir / "mc.yaml");
  auto run = [&](const std::string& args) {
    return test::run_rotor(dir, args, "OMP_NUM_THREADS=1");
  };
  auto r = run("train " + (dir / "mc.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  r = run("export --checkpoint " + (dir / "run") + " --format hf --output " + (dir / "hf"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string cfg = test::slurp(dir / "hf/config.json");
  EXPECT_NE(cfg.find("\"BertForMultipleChoice\""), std::string::npos) << cfg;
  EXPECT_EQ(cfg.find("problem_type"), std::string::npos) << cfg;  // no labels to name
  config("back")
      .set("model.init_from", dir / "hf")
      .set("train.max_updates", "1")
      .set("optim.lr", "1.0e-30")
      .set("optim.warmup_updates", "0")
      .set("optim.schedule", "constant")
      .write(dir / "back.yaml");
  r = run("train " + (dir / "back.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(test::slurp(dir / "back/train.log").find("parameters from a Hugging Face bert"),
            std::string::npos);
  const auto scores = [&](const std::string& ckpt) {
    auto p = run("predict --checkpoint " + (dir / ckpt) + " --input " + (dir / "valid.tsv") +
                 " --scores");
    EXPECT_EQ(p.code, 0) << p.err;
    return p.out;
  };
  const std::string want = scores("run");
  EXPECT_NE(want.find("logit_1"), std::string::npos) << want;
  EXPECT_EQ(scores("back"), want);
}

// data.packing documents: the pairs of each batch fill rows of
// data.seq_len. Without dropout the updates equal one pair a row's, a
// packed run resumes exactly, and `rotor predict` reads its config.
TEST(MultipleChoiceTrain, PackedPairsTrainAsOnePairARow) {
  test::TempDir dir;
  write_choice_tsvs(dir);
  test::tiny_encoder("classification", dir / "rows")
      .set("data.tokenizer", "bytes")
      .set("data.train", dir / "train.tsv")
      .set("data.valid", dir / "valid.tsv")
      .set("data.choices", "2")
      .set("data.seq_len", "48")
      .set("model.dropout", "0")
      .set("model.attention_dropout", "0")
      .set("train.max_updates", "4")
      .set("train.batch_size", "8")
      .set("train.log_interval", "1")
      .set("train.valid_interval", "4")
      .set("train.save_interval", "2")
      .set("optim.name", "adamw")
      .set("optim.lr", "5.0e-3")
      .set("optim.warmup_updates", "1")
      .write(dir / "mc.yaml");
  auto run = [&](const std::string& args) {
    return test::run_rotor(dir, args, "OMP_NUM_THREADS=1");
  };
  auto train = [&](const std::string& name, const std::string& extra) {
    return run("train " + (dir / "mc.yaml") + " --set output_dir=" + (dir / name) + extra);
  };
  auto losses = [&](const std::string& name, const std::string& split) {
    std::vector<double> out;
    std::istringstream in(test::slurp(dir / name + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const json_io::Json j = json_io::Json::parse(line);
      if (j.at("split").get<std::string>() == split) out.push_back(j.at("loss").get<double>());
    }
    return out;
  };
  auto r = train("rows", "");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string packed = " --set data.packing=documents";
  r = train("packed", packed);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* split : {"train", "valid"}) {
    const std::vector<double> a = losses("rows", split), b = losses("packed", split);
    ASSERT_EQ(a.size(), split == std::string("train") ? 4u : 1u) << split;
    ASSERT_EQ(b.size(), a.size()) << split;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(b[i], a[i], 1e-4 * std::abs(a[i])) << split << " " << i;
  }
  r = train("split", packed + " --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("split", packed + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(test::max_weight_diff(dir / "packed/checkpoints/step_4/model.safetensors",
                                  dir / "split/checkpoints/step_4/model.safetensors"),
            0.0);
  r = run("predict --checkpoint " + (dir / "packed") + " --input " + (dir / "valid.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("predict: 40 examples | loss "), std::string::npos) << r.err;
  // The bench times the batches training makes: 8 examples of 2 pairs, each
  // pair about 20 bytes, are 16 rows, or 8 rows of 48 tokens packed.
  auto rows = [&](const std::string& extra) {
    const auto b = run("bench train " + (dir / "mc.yaml") + " --steps 2 --warmup 1 --set " +
                       "output_dir=" + (dir / "bench") + extra);
    EXPECT_EQ(b.code, 0) << b.err;
    const std::string text = b.out + b.err;
    const size_t at = text.find("per update: ");
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + 12));
  };
  EXPECT_EQ(rows(""), 16.0);
  EXPECT_EQ(rows(packed), 8.0);
}

}  // namespace
}  // namespace rotor
