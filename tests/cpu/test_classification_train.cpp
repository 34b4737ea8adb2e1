// Task classification end to end, through the rotor binary: a tiny RoFormer
// pretrained (task mlm) and exported to Hugging Face initializes a classifier
// (model.init_from), which learns a single-sentence task; validation reports
// accuracy, f1 and mcc, checkpoints/best follows train.best_metric, data.test
// is scored by the best model, `rotor predict` reproduces the best
// validation and writes GLUE's submission layout, and the fine-tuned model
// exports as a sequence classifier. A regressor trained from scratch reports
// pearson and spearman. `rotor mlm-logits` writes a NumPy file. Bad inputs
// are one line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "support/dp_training.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::json_io::Json;
using rotor::test::RunResult;
using rotor::test::slurp;
using rotor::test::TempDir;

// tiny_configs.h's encoder at two layers of four heads, with BERT's
// layer-norm epsilon (what a Hugging Face export carries).
rotor::test::TinyConfig encoder(const std::string& task, const std::string& run) {
  return rotor::test::tiny_encoder(task, run)
      .set("model.encoder_layers", "2")
      .set("model.n_heads", "4")
      .set("model.layer_norm_eps", "1.0e-12")
      .set("model.max_positions", "48");
}

// Whether the number is odd: the last word says it ("twenty-three", "five").
std::string parity(const std::string& english) {
  for (const char* odd : {"one", "three", "five", "seven", "nine", "eleven", "thirteen", "fifteen",
                          "seventeen", "nineteen"}) {
    const std::string o = odd;
    if (english.size() >= o.size() && english.compare(english.size() - o.size(), o.size(), o) == 0)
      return "odd";
  }
  return "even";
}

size_t words(const std::string& s) {
  std::istringstream in(s);
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

class ClassificationTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = run("synth numbers-en-de --output " + (dir_ / "data") +
                 " --train 1500 --valid 150 --test 60 --test-long 5 --seed 4");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* split : {"train", "valid", "test"}) {
      std::ifstream in(dir_ / "data/" + split + ".en");
      std::ofstream cls(dir_ / std::string(split) + ".tsv"),
          reg(dir_ / std::string(split) + "_reg.tsv");
      std::ofstream unlabeled(dir_ / std::string(split) + "_nolabel.tsv");
      cls << "label\tsentence\n";
      reg << "sentence\tscore\n";
      unlabeled << "index\tsentence\n";
      int i = 0;
      for (std::string line; std::getline(in, line); ++i) {
        cls << parity(line) << "\t" << line << "\n";
        reg << line << "\t" << words(line) * 0.5 << "\n";
        unlabeled << i << "\t" << line << "\n";
      }
    }
  }
  RunResult run(const std::string& args) {
    return rotor::test::run_rotor(dir_, args, "OMP_NUM_THREADS=1");
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
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
  // A tiny RoFormer pretrained for a few updates and exported to DIR/hf.
  void pretrain() {
    encoder("mlm", dir_ / "mlm")
        .set("data.train", dir_ / "data/train.en")
        .set("data.vocab_size", "150")
        .set("data.seq_len", "48")
        .set("train.max_updates", "20")
        .set("train.batch_size", "16")
        .set("optim.name", "adamw")
        .set("optim.lr", "3.0e-3")
        .set("optim.warmup_updates", "2")
        .write(dir_ / "mlm.yaml");
    auto r = run("train " + (dir_ / "mlm.yaml"));
    ASSERT_EQ(r.code, 0) << r.err;
    r = run("export --checkpoint " + (dir_ / "mlm") + " --format hf --output " + (dir_ / "hf"));
    ASSERT_EQ(r.code, 0) << r.err;
  }
  // A regression classifier from scratch on the words' lengths (a tokenizer
  // trained here), run directory DIR/NAME; the caller adds the schedule.
  rotor::test::TinyConfig regression_from_scratch(const std::string& name) {
    auto r = run("spm-train --input " + (dir_ / "data/train.en") + " --model-prefix " +
                 (dir_ / "spm") + " --vocab-size 150 --user-defined-symbols [MASK],[CLS],[SEP]");
    EXPECT_EQ(r.code, 0) << r.err;
    return encoder("classification", dir_ / name)
        .set("data.train", dir_ / "train_reg.tsv")
        .set("data.valid", dir_ / "valid_reg.tsv")
        .set("data.spm_model", dir_ / "spm.model")
        .set("data.label_column", "score")
        .set("data.regression", "true")
        .set("data.seq_len", "48");
  }
  // Four updates of 16 examples without dropout, from regression_from_scratch,
  // written to DIR/FILE (HEAD: model.classifier_head); a run of it is
  // train(FILE, NAME, EXTRA) into DIR/NAME.
  void write_packing_config(const std::string& file, const std::string& head) {
    regression_from_scratch("unused")
        .set("model.dropout", "0")
        .set("model.attention_dropout", "0")
        .set("model.classifier_head", head)
        .set("train.max_updates", "4")
        .set("train.batch_size", "16")
        .set("train.log_interval", "1")
        .set("train.valid_interval", "2")
        .set("train.save_interval", "2")
        .write(dir_ / file);
  }
  RunResult train(const std::string& file, const std::string& name, const std::string& extra) {
    return run("train " + (dir_ / file) + " --set output_dir=" + (dir_ / name) + extra);
  }
  // Packed examples train as one example a row: the same four losses within
  // round-off.
  void expect_same_train_losses(const std::string& rows, const std::string& packed) {
    const auto a = records(rows, "train"), b = records(packed, "train");
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 4u);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(b[i].at("loss").get<double>(), a[i].at("loss").get<double>(),
                  1e-4 * std::abs(a[i].at("loss").get<double>()))
          << i;
  }
  // The parity classifier fine-tuned from DIR/hf.
  std::string classifier_yaml() {
    return encoder("classification", dir_ / "cls")
        .set("model.init_from", dir_ / "hf")
        .set("data.train", dir_ / "train.tsv")
        .set("data.valid", dir_ / "valid.tsv")
        .set("data.test", dir_ / "test.tsv")
        .set("data.labels", "[even, odd]")
        .set("data.seq_len", "48")
        .set("train.max_updates", "160")
        .set("train.batch_size", "16")
        .set("train.log_interval", "20")
        .set("train.valid_interval", "40")
        .set("train.save_interval", "80")
        .set("train.best_metric", "mcc")
        .set("optim.name", "adamw")
        .set("optim.lr", "2.0e-3")
        .set("optim.warmup_updates", "10")
        .set("optim.schedule", "linear")
        .text();
  }
  TempDir dir_;
};

TEST_F(ClassificationTrain, FineTunesValidatesKeepsTheBestAndPredicts) {
  pretrain();
  write("cls.yaml", classifier_yaml());
  auto r = run("train " + (dir_ / "cls.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = slurp(dir_ / "cls/train.log");
  EXPECT_NE(log.find("parameters from a Hugging Face roformer; 4 newly initialized"),
            std::string::npos)
      << log;
  const auto valid = records("cls", "valid");
  ASSERT_EQ(valid.size(), 4u);  // updates 40, 80, 120, 160
  double best = -1e9;
  int64_t best_step = 0;
  for (const auto& v : valid) {
    for (const char* k : {"loss", "accuracy", "f1", "mcc"})
      ASSERT_TRUE(v.contains(k)) << k << " missing in " << v.dump();
    EXPECT_FALSE(v.contains("pearson"));
    const double mcc = v.at("mcc").get<double>();
    if (mcc > best) best = mcc, best_step = v.at("step").get<int64_t>();
  }
  // The task is learned: odd or even is the last word.
  EXPECT_GT(valid.back().at("accuracy").get<double>(), 0.8) << valid.back().dump();
  EXPECT_GT(best, 50.0);
  const Json state = rotor::json_io::load(dir_ / "cls/checkpoints/best/trainer_state.json");
  EXPECT_EQ(state.at("best_metric").get<std::string>(), "mcc");
  EXPECT_EQ(state.at("best_step").get<int64_t>(), best_step);
  const auto test = records("cls", "test");
  ASSERT_EQ(test.size(), 1u);
  EXPECT_NE(log.find("test: the best model (mcc"), std::string::npos);

  // predict with the best model reproduces its validation.
  r = run("predict --checkpoint " + (dir_ / "cls") + ":best --input " + (dir_ / "valid.tsv") +
          " --output " + (dir_ / "valid.pred"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find(fmt::format("mcc {:.2f}", best)), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("predict: 150 examples"), std::string::npos) << r.err;
  // A file without labels: GLUE's submission layout.
  r = run("predict --checkpoint " + (dir_ / "cls") + ":best --input " +
          (dir_ / "test_nolabel.tsv") + " --output " + (dir_ / "test.pred") + " --scores");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream pred(slurp(dir_ / "test.pred"));
  std::string line;
  std::getline(pred, line);
  EXPECT_EQ(line, "index\tprediction\tlogit_even\tlogit_odd");
  int n = 0;
  for (; std::getline(pred, line); ++n) {
    EXPECT_EQ(line.rfind(std::to_string(n) + "\t", 0), 0u) << line;
    EXPECT_TRUE(line.find("\todd\t") != std::string::npos ||
                line.find("\teven\t") != std::string::npos)
        << line;
  }
  EXPECT_EQ(n, 60);
  EXPECT_EQ(r.err.find("accuracy"), std::string::npos);  // no labels: no scores

  // The fine-tuned model exports as a sequence classifier.
  r = run("export --checkpoint " + (dir_ / "cls") + ":best --format hf --output " + (dir_ / "hfc"));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json cfg = rotor::json_io::load(dir_ / "hfc/config.json");
  EXPECT_EQ(cfg.at("architectures").at(0).get<std::string>(), "RoFormerForSequenceClassification");
  EXPECT_EQ(cfg.at("id2label").at("1").get<std::string>(), "odd");
  EXPECT_EQ(cfg.at("problem_type").get<std::string>(), "single_label_classification");

  // mlm-logits of the pretrained model as a NumPy file: [N, T, V].
  write("lines.txt", "seven hundred\none\tdrei\n");
  r = run("mlm-logits --checkpoint " + (dir_ / "mlm") + " --input " + (dir_ / "lines.txt") +
          " --output " + (dir_ / "lg.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string npy = slurp(dir_ / "lg.npy");
  ASSERT_GT(npy.size(), 128u);
  EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
  const size_t header =
      static_cast<unsigned char>(npy[8]) + 256 * static_cast<unsigned char>(npy[9]);
  EXPECT_EQ((10 + header) % 64, 0u);
  EXPECT_NE(npy.find("'descr': '<f4'"), std::string::npos);
  const size_t shape = npy.find("'shape': (2, ");
  ASSERT_NE(shape, std::string::npos) << npy.substr(0, 10 + header);
  const int64_t T = std::stoll(npy.substr(shape + 13));
  EXPECT_EQ(npy.size(), 10 + header + static_cast<size_t>(2 * T * 150 * 4));
}

TEST_F(ClassificationTrain, RegressionFromScratchReportsCorrelations) {
  regression_from_scratch("reg")
      .set("train.max_updates", "150")
      .set("train.batch_size", "16")
      .set("train.valid_interval", "30")
      .set("train.save_interval", "150")
      .set("train.best_metric", "spearman")
      .set("optim.lr", "2.0e-3")
      .set("optim.warmup_updates", "5")
      .write(dir_ / "reg.yaml");
  auto r = run("train " + (dir_ / "reg.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto valid = records("reg", "valid");
  ASSERT_EQ(valid.size(), 5u);
  for (const auto& v : valid) {
    EXPECT_TRUE(v.contains("pearson") && v.contains("spearman")) << v.dump();
    EXPECT_FALSE(v.contains("accuracy"));
  }
  // The length of a number in words is learned (slowly, from scratch).
  EXPECT_GT(valid.back().at("pearson").get<double>(), 20.0) << valid.back().dump();
  EXPECT_GT(valid.back().at("pearson").get<double>(), valid.front().at("pearson").get<double>());
  r = run("predict --checkpoint " + (dir_ / "reg") + " --input " + (dir_ / "valid_reg.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("| pearson "), std::string::npos) << r.err;
  std::istringstream out(r.out);
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "index\tprediction");
  std::getline(out, line);
  EXPECT_TRUE(std::isfinite(std::stod(line.substr(line.find('\t') + 1)))) << line;
}

// data.packing documents packs each batch's examples into rows of
// data.seq_len: without dropout the updates are those of one example a row
// (the same examples, the same losses within round-off), the batches hold
// fewer rows, and a resumed packed run continues exactly.
TEST_F(ClassificationTrain, PackedExamplesTrainAsOneExampleARow) {
  write_packing_config("pack.yaml", "cls");
  RunResult r = train("pack.yaml", "rows", "");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string packed = " --set data.packing=documents";
  r = train("pack.yaml", "packed", packed);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_train_losses("rows", "packed");
  EXPECT_NEAR(records("packed", "valid").back().at("loss").get<double>(),
              records("rows", "valid").back().at("loss").get<double>(), 1e-3);
  r = train("pack.yaml", "packed_split", packed + " --set train.max_updates=2");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("pack.yaml", "packed_split", packed + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(
      rotor::test::max_weight_diff(dir_ / "packed/checkpoints/step_4/model.safetensors",
                                   dir_ / "packed_split/checkpoints/step_4/model.safetensors"),
      0.0);
  // Packing shows in the bench: fewer padded slots.
  r = run("bench train " + (dir_ / "pack.yaml") + " --steps 2 --warmup 1" + packed);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("padding: "), std::string::npos) << r.out + r.err;
}

// model.classifier_head label_attention: packed examples train as one
// example a row (the head reads each example's own tokens), `rotor predict`
// reads the head back and scores as the run's test did, and the Hugging Face
// export is refused with the head's name.
TEST_F(ClassificationTrain, LabelAttentionPacksPredictsAndRefusesTheExport) {
  write_packing_config("la.yaml", "label_attention");
  RunResult r = train("la.yaml", "la_rows", "");
  ASSERT_EQ(r.code, 0) << r.err;
  r = train("la.yaml", "la_packed", " --set data.packing=documents");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_train_losses("la_rows", "la_packed");
  r = run("predict --checkpoint " + (dir_ / "la_rows") + " --input " + (dir_ / "valid_reg.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  const double valid_loss = records("la_rows", "valid").back().at("loss").get<double>();
  EXPECT_NE(r.err.find(fmt::format("loss {:.4f}", valid_loss)), std::string::npos)
      << r.err << " (valid loss " << valid_loss << ")";
  r = run("export --checkpoint " + (dir_ / "la_rows") + " --format hf --output " +
          (dir_ / "la_hf"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("model.classifier_head is label_attention"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "la_hf"));
}

// TUPE (model.position tupe) fine-tunes the classifier from scratch: its
// correlation and [CLS] scalars train with the encoder, and `rotor predict`
// reads them back.
TEST_F(ClassificationTrain, TupeClassifierTrainsAndPredicts) {
  regression_from_scratch("tupe")
      .set("model.position", "tupe")
      .set("train.max_updates", "60")
      .set("train.batch_size", "16")
      .set("train.valid_interval", "30")
      .set("train.save_interval", "60")
      .set("train.best_metric", "spearman")
      .set("optim.lr", "2.0e-3")
      .set("optim.warmup_updates", "5")
      .write(dir_ / "tupe.yaml");
  auto r = run("train " + (dir_ / "tupe.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto valid = records("tupe", "valid");
  ASSERT_EQ(valid.size(), 2u);
  EXPECT_TRUE(std::isfinite(valid.back().at("pearson").get<double>())) << valid.back().dump();
  r = run("predict --checkpoint " + (dir_ / "tupe") + " --input " + (dir_ / "valid_reg.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("| pearson "), std::string::npos) << r.err;
}

// A classifier with random attention features redrawn every update
// (FAVOR+): `rotor predict` runs it with the features of the update its
// checkpoint was saved after (cli/inference_session.h), so it reproduces the
// run's validation of that checkpoint; with the first update's features
// (what it ran before) the loss differs.
TEST_F(ClassificationTrain, PredictOfAFavorClassifierUsesItsCheckpointsDraw) {
  regression_from_scratch("favor")
      .set("attention.kind", "linear")
      .set("attention.feature_map", "favor")
      .set("attention.feature_redraw", "1")
      .set("train.max_updates", "6")
      .set("train.batch_size", "16")
      .set("train.valid_interval", "6")
      .set("train.save_interval", "6")
      .set("optim.lr", "2.0e-3")
      .set("optim.warmup_updates", "2")
      .write(dir_ / "favor.yaml");
  auto r = run("train " + (dir_ / "favor.yaml"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto valid = records("favor", "valid");
  ASSERT_EQ(valid.size(), 1u);
  r = run("predict --checkpoint " + (dir_ / "favor") + " --input " + (dir_ / "valid_reg.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  // The correlations move by whole points with other features (the loss,
  // printed to 4 digits, by less than its last one).
  for (const char* k : {"pearson", "spearman"}) {
    const size_t at = r.err.find(std::string("| ") + k + " ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const double printed = std::stod(r.err.substr(at + 3 + std::strlen(k)));
    EXPECT_NEAR(printed, valid.back().at(k).get<double>(), 0.006) << k << ": " << r.err;
  }
}

TEST_F(ClassificationTrain, BadInputsAreOneLine) {
  auto one_line = [](const RunResult& r, const std::string& expect) {
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find(expect), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("rotor: error:"), std::string::npos) << r.err;
  };
  pretrain();
  // No tokenizer: classification does not train one.
  write("a.yaml", classifier_yaml());
  one_line(run("train " + (dir_ / "a.yaml") +
               " --set model.init_from= --set output_dir=" + (dir_ / "a")),
           "task classification reads the tokenizer of its encoder");
  // A pretrained model of another size.
  one_line(
      run("train " + (dir_ / "a.yaml") + " --set model.d_ff=128 --set output_dir=" + (dir_ / "b")),
      "config.json: intermediate_size is 64, but model.d_ff is 128");
  // A label the config does not list.
  one_line(run("train " + (dir_ / "a.yaml") +
               " --set data.labels=[even,odd2] --set output_dir=" + (dir_ / "c")),
           "train.tsv:5: label \"odd\" is not one of data.labels [even, odd2]");
  // Commands given the other task's checkpoint.
  one_line(run("predict --checkpoint " + (dir_ / "mlm") + " --input " + (dir_ / "valid.tsv")),
           "predict runs task-classification and task-multilabel models");
  write("ids.txt", "5 7 999\n");
  one_line(run("mlm-logits --checkpoint " + (dir_ / "mlm") + " --input " + (dir_ / "ids.txt") +
               " --input-format ids --output " + (dir_ / "x.npy")),
           "token id 999 outside the vocabulary [0, 150)");
  one_line(run("mlm-logits --checkpoint " + (dir_ / "mlm") + " --input " + (dir_ / "ids.txt") +
               " --output " + (dir_ / "x.txt")),
           "name a .npy or .safetensors file");
}

}  // namespace
