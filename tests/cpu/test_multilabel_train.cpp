// Task multilabel end to end, through the rotor binary: a tiny RoFormer
// trained from scratch on a synthetic TSV whose labels say which trigger
// words a sentence holds learns it (the loss falls; validation AP and AUROC
// beat the label-frequency baseline, computed here on the same set);
// metrics.jsonl holds ap, auroc and their micro and macro averages for the
// valid and test splits; checkpoints/best follows ap and holds labels.txt;
// `rotor predict` writes per-label probabilities whose scores are the test
// record's; `rotor average` keeps labels.txt; the Hugging Face export is a
// multi-label classifier, and it (or the checkpoint) starts runs whose
// labels are reordered or one more, each label's row read by its name;
// --resume refuses a changed label vocabulary; bad rows are one line naming
// the file and the row.
// configs/multilabel/tiny.yaml trains on the data of
// scripts/data/make_multilabel_tsv.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/json_io.h"
#include "eval/multilabel_metrics.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

using rotor::json_io::Json;
using rotor::test::RunResult;
using rotor::test::slurp;
using rotor::test::TempDir;

// Label L is present when its trigger word is; the triggers are drawn with
// different frequencies, so that the frequency baseline ranks labels.
const char* const kLabels[] = {"ant", "bee", "cow", "dog"};
const char* const kTriggers[] = {"apple", "boat", "cloud", "drum"};
const double kFrequency[] = {0.5, 0.35, 0.2, 0.1};
const char* const kFiller[] = {"the", "a",    "red",  "blue", "small", "big", "old",
                               "new", "sits", "runs", "near", "far",   "and", "with"};

struct Split {
  std::string tsv;
  std::vector<std::vector<uint8_t>> truth;
};

Split make_split(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Split s;
  s.tsv = "id\tsentence\tcodes\n";
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> words;
    const int fill = 3 + static_cast<int>(rng() % 4);
    for (int w = 0; w < fill; ++w) words.push_back(kFiller[rng() % 14]);
    std::vector<uint8_t> t(4, 0);
    std::string codes;
    for (int k = 0; k < 4; ++k)
      if (u(rng) < kFrequency[k]) {
        t[k] = 1;
        words.insert(words.begin() + static_cast<long>(rng() % (words.size() + 1)), kTriggers[k]);
        codes += (codes.empty() ? "" : ",") + std::string(kLabels[k]);
      }
    std::string sentence;
    for (const auto& w : words) sentence += (sentence.empty() ? "" : " ") + w;
    s.tsv += std::to_string(i) + "\t" + sentence + "\t" + codes + "\n";
    s.truth.push_back(t);
  }
  return s;
}

class MultilabelTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    train_ = make_split(600, 1);
    valid_ = make_split(120, 2);
    test_ = make_split(100, 3);
    write("train.tsv", train_.tsv);
    write("valid.tsv", valid_.tsv);
    write("test.tsv", test_.tsv);
    std::string text;
    for (const char* w : kTriggers) text += std::string(w) + "\n";
    for (const char* w : kFiller) text += std::string(w) + "\n";
    write("words.txt", text);
    const RunResult r =
        run("spm-train --input " + (dir_ / "words.txt") + " --model-prefix " + (dir_ / "spm") +
            " --vocab-size 60 --user-defined-symbols '[MASK],[CLS],[SEP]'");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  RunResult run(const std::string& args) {
    return rotor::test::run_rotor(dir_, args, "OMP_NUM_THREADS=1");
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  rotor::test::TinyConfig config(const std::string& run) {
    return rotor::test::tiny_encoder("multilabel", dir_ / run)
        .set("data.train", dir_ / "train.tsv")
        .set("data.valid", dir_ / "valid.tsv")
        .set("data.test", dir_ / "test.tsv")
        .set("data.spm_model", dir_ / "spm.model")
        .set("data.label_column", "codes")
        .set("data.seq_len", "48")
        .set("model.dropout", "0.0")
        .set("train.max_updates", "400")
        .set("train.batch_size", "16")
        .set("train.log_interval", "10")
        .set("train.valid_interval", "100")
        .set("train.save_interval", "100")
        .set("train.best_metric", "ap")
        .set("optim.name", "adamw")
        .set("optim.lr", "3.0e-3")
        .set("optim.warmup_updates", "10");
  }
  std::vector<Json> records(const std::string& run, const std::string& split) {
    std::vector<Json> found;
    std::istringstream in(slurp(dir_ / run + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line);
      if (j.at("split").get<std::string>() == split) found.push_back(j);
    }
    return found;
  }
  // The scores of a constant prediction: each label's frequency in training.
  rotor::eval::MultilabelScores baseline(const Split& s) {
    std::vector<double> freq(4, 0);
    for (const auto& t : train_.truth)
      for (int k = 0; k < 4; ++k) freq[k] += t[k] / static_cast<double>(train_.truth.size());
    std::vector<double> scores;
    std::vector<uint8_t> truth;
    for (const auto& t : s.truth)
      for (int k = 0; k < 4; ++k) {
        scores.push_back(freq[k]);
        truth.push_back(t[k]);
      }
    return rotor::eval::multilabel_scores(scores, truth, 4);
  }
  TempDir dir_;
  Split train_, valid_, test_;
};

TEST_F(MultilabelTrain, LearnsBeatsTheFrequencyBaselineAndPredicts) {
  config("run").write(dir_ / "ml.yaml");
  RunResult r = run("train " + (dir_ / "ml.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<Json> train = records("run", "train"), valid = records("run", "valid"),
                          test = records("run", "test");
  ASSERT_GE(train.size(), 10u);
  EXPECT_LT(train.back().at("loss").get<double>(), 0.6 * train.front().at("loss").get<double>());
  ASSERT_EQ(valid.size(), 4u);
  ASSERT_EQ(test.size(), 1u);
  for (const Json* j : {&valid.back(), &test.back()})
    for (const char* key : {"ap", "auroc", "ap_micro", "ap_macro", "auroc_micro", "auroc_macro"}) {
      ASSERT_TRUE(j->contains(key)) << key << " in " << j->dump();
      const double v = j->at(key).get<double>();
      EXPECT_TRUE(v >= 0 && v <= 1) << key << " " << v;
    }
  // Within an example the frequency baseline ranks the frequent labels first,
  // which is often right (its sample-averaged ap is about 0.86 here); across
  // examples it ranks nothing (macro auroc 0.5, macro ap each label's
  // prevalence).
  const rotor::eval::MultilabelScores base = baseline(valid_);
  EXPECT_DOUBLE_EQ(base.auroc_macro, 0.5);
  double best_ap = 0;
  for (const Json& v : valid) best_ap = std::max(best_ap, v.at("ap").get<double>());
  const Json& last = valid.back();
  EXPECT_GT(best_ap, base.ap + 0.05) << "baseline ap " << base.ap;
  EXPECT_GT(last.at("auroc").get<double>(), base.auroc + 0.05) << "baseline " << base.auroc;
  EXPECT_GT(last.at("ap_micro").get<double>(), base.ap_micro + 0.1) << "baseline " << base.ap_micro;
  EXPECT_GT(last.at("ap_macro").get<double>(), base.ap_macro + 0.2) << "baseline " << base.ap_macro;
  EXPECT_GT(last.at("auroc_macro").get<double>(), 0.75);
  // The best checkpoint follows ap and holds the label vocabulary.
  const Json state = rotor::json_io::load(dir_ / "run/checkpoints/best/trainer_state.json");
  EXPECT_EQ(state.at("best_metric").get<std::string>(), "ap");
  EXPECT_DOUBLE_EQ(state.at("best_score").get<double>(), best_ap);
  EXPECT_EQ(slurp(dir_ / "run/checkpoints/best/labels.txt"), "ant\nbee\ncow\ndog\n");
  EXPECT_EQ(slurp(dir_ / "run/checkpoints/step_400/labels.txt"), "ant\nbee\ncow\ndog\n");

  // predict: per-label probabilities of the best model; their scores are
  // the test record's (data.test is scored by the best model).
  r = run("predict --checkpoint " + (dir_ / "run") + ":best --input " + (dir_ / "test.tsv") +
          " --output " + (dir_ / "preds.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(slurp(dir_ / "preds.tsv"));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "index\tprediction\tp_ant\tp_bee\tp_cow\tp_dog");
  std::vector<double> probs;
  std::vector<uint8_t> truth;
  int rows = 0;
  for (; std::getline(in, line); ++rows) {
    std::istringstream fields(line);
    std::string index, predicted;
    std::getline(fields, index, '\t');
    std::getline(fields, predicted, '\t');
    EXPECT_EQ(index, std::to_string(rows));
    for (int k = 0; k < 4; ++k) {
      std::string p;
      std::getline(fields, p, '\t');
      probs.push_back(std::stod(p));
      truth.push_back(test_.truth[static_cast<size_t>(rows)][k]);
      // The prediction lists the labels of probability >= 0.5.
      EXPECT_EQ(predicted.find(kLabels[k]) != std::string::npos, probs.back() >= 0.5) << line;
    }
  }
  ASSERT_EQ(rows, 100);
  const rotor::eval::MultilabelScores m = rotor::eval::multilabel_scores(probs, truth, 4);
  EXPECT_NEAR(m.ap, test.back().at("ap").get<double>(), 1e-4);
  EXPECT_NEAR(m.auroc_macro, test.back().at("auroc_macro").get<double>(), 1e-4);
  EXPECT_NE(r.err.find("| ap "), std::string::npos) << r.err;  // scored: the input has labels

  // An average of checkpoints keeps the vocabulary, and predicts alike.
  r = run("average --last 2 --run " + (dir_ / "run") + " --output " + (dir_ / "avg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(dir_ / "avg/labels.txt"), "ant\nbee\ncow\ndog\n");
  r = run("predict --checkpoint " + (dir_ / "avg") + " --input " + (dir_ / "test.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), "index\tprediction\tp_ant\tp_bee\tp_cow\tp_dog");

  // The export is a multi-label sequence classifier whose outputs are the
  // labels (checked against transformers by tests/scripts/hf_transformers_check.py).
  r = run("export --checkpoint " + (dir_ / "run") + ":best --format hf --output " + (dir_ / "hf"));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json hf = rotor::json_io::load(dir_ / "hf/config.json");
  EXPECT_EQ(hf.at("problem_type").get<std::string>(), "multi_label_classification");
  EXPECT_EQ(hf.at("id2label").dump(), R"({"0":"ant","1":"bee","2":"cow","3":"dog"})");
  // A checkpoint without its labels.txt is refused, nothing written.
  std::filesystem::copy(dir_ / "run/checkpoints/best", dir_ / "nolabels",
                        std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir_ / "nolabels/labels.txt");
  r = run("export --checkpoint " + (dir_ / "nolabels") + " --format hf --output " + (dir_ / "hf2"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("rotor: error: " + (dir_ / "nolabels/labels.txt") +
                       ": missing (a task-multilabel checkpoint holds its label vocabulary there)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "hf2"));
  // It starts a run whose labels are in another order, and one with a label
  // more from the rotor checkpoint itself: each label's row follows its name,
  // so that each label keeps its probability (one update at lr 1e-30).
  for (const auto& [from, labels, note] :
       {std::tuple<std::string, std::string, std::string>{
            dir_ / "hf", "[dog, cow, bee, ant]",
            "lists the task's 4 labels in another order: the classifier's label rows are read "
            "by name"},
        {dir_ / "run:best", "[ant, bee, cow, dog, emu]",
         "4 of the task's 5 labels are " + (dir_ / "run/checkpoints/best") +
             "'s: their classifier rows are read by name; those of emu keep their fresh "
             "initialization"}}) {
    SCOPED_TRACE(labels);
    config("again")
        .set("model.init_from", from)
        .set("data.labels", labels)
        .set("train.max_updates", "1")
        .set("optim.lr", "1.0e-30")
        .set("optim.warmup_updates", "0")
        .set("optim.schedule", "constant")
        .write(dir_ / "again.yaml");
    r = run("train " + (dir_ / "again.yaml") + " --overwrite");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(slurp(dir_ / "again/train.log").find(note), std::string::npos)
        << slurp(dir_ / "again/train.log");
    r = run("predict --checkpoint " + (dir_ / "again") + " --input " + (dir_ / "test.tsv"));
    ASSERT_EQ(r.code, 0) << r.err;
    // Column p_<label> of both files, row by row.
    const auto column = [](const std::string& text, const std::string& label) {
      std::istringstream in(text);
      std::string line, field;
      std::getline(in, line);
      std::istringstream head(line);
      int at = 0;
      for (; std::getline(head, field, '\t') && field != "p_" + label;) ++at;
      std::vector<std::string> values;
      while (std::getline(in, line)) {
        std::istringstream row(line);
        for (int k = 0; k <= at; ++k) std::getline(row, field, '\t');
        values.push_back(field);
      }
      return values;
    };
    for (const char* label : kLabels) {
      const std::vector<std::string> want = column(slurp(dir_ / "preds.tsv"), label);
      ASSERT_EQ(want.size(), 100u) << label;
      EXPECT_EQ(column(r.out, label), want) << label;
    }
  }

  // A checkpoint of another norm type does not start a run.
  config("again")
      .set("model.init_from", dir_ / "run:best")
      .set("model.norm_type", "rms_norm")
      .write(dir_ / "again.yaml");
  r = run("train " + (dir_ / "again.yaml") + " --overwrite");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("has model.norm_type layer_norm, the config rms_norm"), std::string::npos)
      << r.err;

  // --resume with another label vocabulary is refused before anything changes.
  r = run("train " + (dir_ / "ml.yaml") +
          " --resume --set train.max_updates=410 --set data.labels=[ant,bee,cow,dog,emu]");
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--resume: the label vocabulary (5 labels, from data.labels) differs from"),
            std::string::npos)
      << r.err;
}

TEST_F(MultilabelTrain, BadRowsAreOneLine) {
  write("valid_bad.tsv", "id\tsentence\tcodes\n0\tthe apple\tant\n1\tthe fish\tant,eel\n");
  config("bad").set("data.valid", dir_ / "valid_bad.tsv").write(dir_ / "bad.yaml");
  RunResult r = run("train " + (dir_ / "bad.yaml"));
  ASSERT_NE(r.code, 0);
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_NE(last.find("valid_bad.tsv:3: label \"eel\" is not one of the run's 4 labels"),
            std::string::npos)
      << r.err;
  write("train_bad.tsv", "id\tsentence\tcodes\n0\tthe apple\tant,,bee\n");
  config("bad2").set("data.train", dir_ / "train_bad.tsv").write(dir_ / "bad2.yaml");
  r = run("train " + (dir_ / "bad2.yaml"));
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.err.find("train_bad.tsv:2: an empty label in \"ant,,bee\""), std::string::npos)
      << r.err;
}

TEST_F(MultilabelTrain, ShippedTinyConfigTrains) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const std::string src = ROTOR_SOURCE_DIR, bin = ROTOR_BINARY;
  RunResult r = rotor::test::run_in(
      dir_.path(), "python3 " + src +
                       "/scripts/data/make_multilabel_tsv.py --output data/multilabel --train 300 "
                       "--valid 60 --test 40 && " +
                       bin +
                       " spm-train --input data/multilabel/words.txt --model-prefix "
                       "data/multilabel/spm --vocab-size 80 --user-defined-symbols "
                       "'[MASK],[CLS],[SEP]'");
  ASSERT_EQ(r.code, 0) << r.err;
  r = rotor::test::run_in(dir_.path(), bin + " train " + src +
                                           "/configs/multilabel/tiny.yaml --set output_dir=run "
                                           "--set train.max_updates=20 --set "
                                           "train.valid_interval=20 --set train.save_interval=20");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<Json> valid = records("run", "valid"), test = records("run", "test");
  ASSERT_EQ(valid.size(), 1u);
  ASSERT_EQ(test.size(), 1u);
  EXPECT_TRUE(valid[0].contains("ap") && valid[0].contains("auroc_macro")) << valid[0].dump();
  EXPECT_EQ(slurp(dir_ / "run/checkpoints/best/labels.txt"),
            "ant\nbee\ncow\ndog\neel\nfox\npair\n");
}

}  // namespace
