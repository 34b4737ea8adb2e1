// `rotor eval` through the rotor binary: on the validation file of a tiny
// causal-LM run and a tiny masked-LM run, it reproduces the run's own
// validation (loss, bits per byte, accuracy in metrics.jsonl) for the last
// and the best checkpoint; --block-size and --lengths score other block
// lengths; a learned position table stops it; bad arguments and inputs are
// one-line errors. An EHR masked LM scores a prepare-ehr split (DIR/valid)
// with the run's own validation numbers, and refuses a text file, another
// directory's numbering and --lengths in one line each.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "core/json_io.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::json_io::Json;
using rotor::test::run_rotor;
using rotor::test::RunResult;
using rotor::test::TempDir;

// The validation records of a run's metrics.jsonl, by step.
std::map<int64_t, Json> valid_records(const std::string& run) {
  std::map<int64_t, Json> out;
  std::ifstream f(run + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    Json j = rotor::json_io::parse(line, "metrics.jsonl");
    if (j["split"] == "valid") out[j["step"].get<int64_t>()] = j;
  }
  return out;
}

void expect_rel(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-6 * std::abs(want)) << what;
}

class EvalCmd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const TempDir& d = *dir_;
    ASSERT_EQ(run_rotor(d, rotor::test::synth_args(d / "data", {300, 10, 10, 5})).code, 0);
    rotor::test::write_mlm_text(d / "data", d / "train.txt", d / "valid.txt", 10);
    rotor::test::tiny_lm(d / "train.txt", d / "valid.txt", d / "lm").write(d / "lm.yaml");
    rotor::test::tiny_lm(d / "train.txt", d / "valid.txt", d / "learned")
        .set("model.position", "learned")
        .set("model.max_positions", "32")
        .set("train.max_updates", "2")
        .write(d / "learned.yaml");
    rotor::test::tiny_mlm(d / "train.txt", d / "valid.txt", d / "mlm").write(d / "mlm.yaml");
    // An EHR masked LM (learned visit positions, ages) on a synthetic cohort.
    ASSERT_EQ(run_rotor(d, "synth ehr --patients 160 --seed 3 --output " + (d / "ehr_synth")).code,
              0);
    // ehr_other keeps only the frequent codes: another numbering.
    for (const char* out : {"ehr", "ehr_other"}) {
      const std::string min_count = std::string(out) == "ehr" ? "1" : "40";
      ASSERT_EQ(run_rotor(d, "prepare-ehr --events " + (d / "ehr_synth/events.csv") +
                                 " --patients " + (d / "ehr_synth/patients.csv") + " --output " +
                                 (d / out) + " --min-count " + min_count)
                    .code,
                0);
    }
    rotor::test::tiny_mlm(d / "ehr/train", d / "ehr/valid", d / "ehr_mlm")
        .set("data.format", "ehr")
        .set("model.position", "learned")
        .set("model.position_source", "visit")
        .set("model.age_vocab_size", "128")
        .write(d / "ehr_mlm.yaml");
    // Random features redrawn every update: validation uses the last update's.
    rotor::test::tiny_mlm(d / "train.txt", d / "valid.txt", d / "favor")
        .set("attention.kind", "linear")
        .set("attention.feature_map", "favor")
        .set("attention.feature_redraw", "1")
        .set("train.valid_interval", "2")
        .set("train.save_interval", "2")
        .set("train.keep_last", "2")
        .write(d / "favor.yaml");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // `rotor eval ARGS --json`: its one JSON object.
  static Json eval_json(const std::string& args) {
    const RunResult r = run_rotor(*dir_, "eval " + args + " --json", "OMP_NUM_THREADS=1");
    EXPECT_EQ(r.code, 0) << r.err;
    return rotor::json_io::parse(r.out, "rotor eval --json");
  }
  static std::string path(const std::string& name) { return *dir_ / name; }
  // The run RUN (lm, learned, mlm), trained on first use (ctest runs each
  // test in a process of its own).
  static std::string run(const std::string& name) {
    if (!fs::exists(path(name + "/checkpoint_last"))) {
      const RunResult r = run_rotor(*dir_, "train " + path(name + ".yaml"), "OMP_NUM_THREADS=1");
      EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    }
    return path(name);
  }

  static TempDir* dir_;
};
TempDir* EvalCmd::dir_ = nullptr;

TEST_F(EvalCmd, LmAgreesWithTheRunsValidation) {
  const auto valid = valid_records(run("lm"));
  ASSERT_EQ(valid.size(), 2u);  // updates 2 and 4
  const Json last = eval_json("--checkpoint " + path("lm") + " --input " + path("valid.txt"));
  EXPECT_EQ(last["task"], "lm");
  EXPECT_EQ(last["length"], 16);  // data.seq_len
  EXPECT_EQ(last["bytes"].get<int64_t>(), static_cast<int64_t>(fs::file_size(path("valid.txt"))));
  expect_rel(last["loss"].get<double>(), valid.at(4)["loss"].get<double>(), "loss at 4");
  expect_rel(last["bpb"].get<double>(), valid.at(4)["bpb"].get<double>(), "bpb at 4");
  expect_rel(last["ppl"].get<double>(), valid.at(4)["ppl"].get<double>(), "ppl at 4");
  EXPECT_EQ(last["accuracy"].get<double>(), valid.at(4)["accuracy"].get<double>());

  // The best checkpoint holds the validation of the lowest loss; step_2 the first.
  const double best_loss =
      std::min(valid.at(2)["loss"].get<double>(), valid.at(4)["loss"].get<double>());
  const Json best = eval_json("--checkpoint " + path("lm") + ":best --input " + path("valid.txt"));
  expect_rel(best["loss"].get<double>(), best_loss, "best loss");
  const Json first = eval_json("--checkpoint " + path("lm/checkpoints/step_2") + " --input " +
                               path("valid.txt") + " --batch-size 3");
  expect_rel(first["loss"].get<double>(), valid.at(2)["loss"].get<double>(), "loss at 2");

  // Other block lengths score the same targets with other contexts; the
  // row of data.seq_len in --lengths is the validation's.
  const Json lengths = eval_json("--checkpoint " + path("lm") + " --input " + path("valid.txt") +
                                 " --lengths 4,16,100");
  ASSERT_EQ(lengths["lengths"].size(), 3u);
  EXPECT_FALSE(lengths.contains("stopped"));
  for (const Json& row : lengths["lengths"]) EXPECT_EQ(row["tokens"], last["tokens"]);
  EXPECT_EQ(lengths["lengths"][1]["length"], 16);
  expect_rel(lengths["lengths"][1]["loss"].get<double>(), last["loss"].get<double>(), "16");
  EXPECT_NE(lengths["lengths"][0]["loss"].get<double>(), last["loss"].get<double>());
  const Json four =
      eval_json("--checkpoint " + path("lm") + " --input " + path("valid.txt") + " --block-size 4");
  expect_rel(four["loss"].get<double>(), lengths["lengths"][0]["loss"].get<double>(), "4");

  // The default output is a table.
  const RunResult table =
      run_rotor(*dir_, "eval --checkpoint " + path("lm") + " --input " + path("valid.txt"), "");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("non-overlapping blocks"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("bpb"), std::string::npos) << table.out;
}

TEST_F(EvalCmd, LearnedPositionsStopAtTheirTable) {
  const auto valid = valid_records(run("learned"));
  ASSERT_EQ(valid.size(), 1u);
  const Json j = eval_json("--checkpoint " + path("learned") + " --input " + path("valid.txt"));
  expect_rel(j["loss"].get<double>(), valid.at(2)["loss"].get<double>(), "learned loss");
  // Lengths past model.max_positions = 32 are not scored: it says so.
  const RunResult r = run_rotor(*dir_,
                                "eval --json --checkpoint " + path("learned") + " --input " +
                                    path("valid.txt") + " --lengths 16,32,64,128",
                                "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json l = rotor::json_io::parse(r.out, "eval --lengths");
  ASSERT_EQ(l["lengths"].size(), 2u);
  EXPECT_EQ(l["lengths"][1]["length"], 32);
  EXPECT_NE(l["stopped"].get<std::string>().find("length 64"), std::string::npos) << l.dump();
  EXPECT_NE(r.err.find("model.max_positions = 32"), std::string::npos) << r.err;
  // A block past the table alone is an error.
  const RunResult e = run_rotor(*dir_, "eval --checkpoint " + path("learned") + " --input " +
                                           path("valid.txt") + " --block-size 33");
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.out, "");
  EXPECT_NE(e.err.find("--block-size 33: the model's learned position table"), std::string::npos)
      << e.err;
}

TEST_F(EvalCmd, MlmAgreesWithTheRunsValidation) {
  const auto valid = valid_records(run("mlm"));
  ASSERT_EQ(valid.size(), 1u);  // update 3
  const Json j = eval_json("--checkpoint " + path("mlm") + " --input " + path("valid.txt"));
  EXPECT_EQ(j["task"], "mlm");
  EXPECT_EQ(j["length"], 32);
  EXPECT_GT(j["masked_tokens"].get<int64_t>(), 0);
  expect_rel(j["loss"].get<double>(), valid.at(3)["loss"].get<double>(), "mlm loss");
  EXPECT_EQ(j["accuracy"].get<double>(), valid.at(3)["accuracy"].get<double>());
  EXPECT_FALSE(j.contains("bpb"));
  // The masks are fixed: the same result again.
  const Json again = eval_json("--checkpoint " + path("mlm") + " --input " + path("valid.txt"));
  EXPECT_EQ(again["loss"].get<double>(), j["loss"].get<double>());
  // A linear-attention model scores with the random features of the update
  // its checkpoint was saved after, as the run's validation of it did: the
  // last one, and an earlier checkpoint's own (features redrawn every update).
  const auto favor = valid_records(run("favor"));
  ASSERT_EQ(favor.size(), 2u);  // updates 2 and 3
  const Json f = eval_json("--checkpoint " + path("favor") + " --input " + path("valid.txt"));
  expect_rel(f["loss"].get<double>(), favor.at(3)["loss"].get<double>(), "favor loss");
  const Json f2 = eval_json("--checkpoint " + path("favor/checkpoints/step_2") + " --input " +
                            path("valid.txt"));
  expect_rel(f2["loss"].get<double>(), favor.at(2)["loss"].get<double>(), "favor loss at 2");
}

TEST_F(EvalCmd, EhrMlmScoresAPrepareEhrSplitAsItsValidation) {
  const auto valid = valid_records(run("ehr_mlm"));
  ASSERT_EQ(valid.size(), 1u);  // update 3
  const Json j = eval_json("--checkpoint " + path("ehr_mlm") + " --input " + path("ehr/valid"));
  EXPECT_EQ(j["task"], "mlm");
  EXPECT_EQ(j["length"], 32);
  EXPECT_GT(j["patients"].get<int64_t>(), 0);
  EXPECT_GT(j["masked_tokens"].get<int64_t>(), 0);
  expect_rel(j["loss"].get<double>(), valid.at(3)["loss"].get<double>(), "ehr mlm loss");
  EXPECT_EQ(j["accuracy"].get<double>(), valid.at(3)["accuracy"].get<double>());
  // Another batch size, the same masks and numbers.
  const Json b = eval_json("--checkpoint " + path("ehr_mlm") + " --input " + path("ehr/valid") +
                           " --batch-size 3");
  expect_rel(b["loss"].get<double>(), j["loss"].get<double>(), "batch size 3");
  // Bad inputs: one line each.
  const std::string ck = " --checkpoint " + path("ehr_mlm");
  const std::pair<std::string, std::string> cases[] = {
      {ck + " --input " + path("valid.txt"), "is not a split of a rotor prepare-ehr directory"},
      {ck + " --input " + path("ehr_other/valid"), "numbers its codes differently from"},
      {ck + " --input " + path("ehr/valid") + " --lengths 8,16", "--lengths scores text blocks"},
      {ck + " --input " + path("ehr/valid") + " --block-size 1", "--block-size"},
      {" --checkpoint " + run("mlm") + " --input " + path("ehr/valid"), "no such file"},
  };
  for (const auto& [args, want] : cases) {
    const RunResult r = run_rotor(*dir_, "eval" + args, "OMP_NUM_THREADS=1");
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(EvalCmd, BadInputsAreOneLineErrors) {
  std::ofstream(path("empty.txt"));
  std::ofstream(path("blank.txt")) << "\n\n";
  std::ofstream(path("bad_utf8.txt")) << "fine\nnot \xff fine\n";
  // A task-translation checkpoint: the lm checkpoint's config says so.
  run("lm");
  run("mlm");
  fs::copy(path("lm/checkpoints/step_4"), path("translation"), fs::copy_options::recursive);
  {
    std::string cfg = rotor::test::slurp(path("translation/config.yaml"));
    cfg.replace(cfg.find("task: lm"), 8, "task: translation");
    std::ofstream(path("translation/config.yaml")) << cfg;
  }
  const std::string lm = " --checkpoint " + path("lm");
  const std::string in = " --input " + path("valid.txt");
  const std::pair<std::string, std::string> cases[] = {
      {lm + " --input " + path("missing.txt"), "missing.txt: no such file"},
      {lm + " --input " + path("empty.txt"), "no text (the file is empty)"},
      {lm + " --input " + path("blank.txt"), "no text (the file is empty)"},
      {lm + " --input " + path("bad_utf8.txt"), "bad_utf8.txt:2: invalid UTF-8"},
      {lm + " --input " + path("data"), "is a directory, not a file"},
      {" --checkpoint " + path("nothing") + in, "no such checkpoint"},
      {" --checkpoint " + path("translation") + in, "is a task-translation checkpoint"},
      {lm + in + " --block-size 0", "--block-size must be an integer from 1"},
      {lm + in + " --block-size 4 --lengths 8", "give --block-size or --lengths, not both"},
      {lm + in + " --lengths 8,x", "--lengths must be integers separated by commas"},
      {lm + in + " --lengths 8,8", "--lengths must increase"},
      {lm + in + " --lengths ,", "--lengths must be integers"},
      {lm + in + " --batch-size 0", "--batch-size must be an integer from 1"},
      {" --checkpoint " + path("mlm") + in + " --block-size 1",
       "--block-size must be an integer from 2"},
  };
  for (const auto& [args, want] : cases) {
    SCOPED_TRACE(args);
    const RunResult r = run_rotor(*dir_, "eval --json" + args);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
  }
}

}  // namespace
