// Next-visit prediction on EHR data end to end, through the rotor binary and
// the shipped configs (configs/ehr/): a synthetic cohort (`rotor synth ehr`)
// prepared twice with the same patients, seed and --min-visits (masked-LM
// sequences, and next-visit examples with labels, sharing the split and the
// code vocabulary); a short masked-LM pretraining of
// behrt_mlm_tiny.yaml; behrt_nextvisit_tiny.yaml fine-tuned from its best
// checkpoint (model.init_from naming a rotor run: the encoder loaded, the
// classifier head fresh), scored with ap, auroc and their averages; `rotor
// predict` writes a probability per code whose scores are the test record's.
// (Whether the tiny model beats the label-frequency baseline is measured by
// scripts/ehr_results.sh, not asserted here: at test sizes it does not.) Also: a checkpoint of
// another vocabulary is refused by model.init_from and by predict, with one line naming the files.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "data/ehr.h"
#include "eval/multilabel_metrics.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

using rotor::json_io::Json;
using rotor::test::RunResult;
using rotor::test::slurp;
using rotor::test::TempDir;

const std::string kConfigs = std::string(ROTOR_SOURCE_DIR) + "/configs/ehr/";

class EhrNextVisit : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(run("synth ehr --patients 600 --seed 3 --output " + (dir_ / "synth")).code, 0);
    for (const char* labels : {"", "next_visit"}) {
      const std::string out = dir_ / (*labels ? "nv" : "mlm");
      const RunResult r =
          run("prepare-ehr --events " + (dir_ / "synth/events.csv") + " --patients " +
              (dir_ / "synth/patients.csv") + " --output " + out + " --min-visits 3" +
              (*labels ? std::string(" --labels ") + labels : ""));
      ASSERT_EQ(r.code, 0) << r.err;
    }
  }
  RunResult run(const std::string& args) {
    return rotor::test::run_rotor(dir_, args, "OMP_NUM_THREADS=1");
  }
  // `rotor train CONFIG` on the data of `data` (mlm or nv), into dir_/RUN.
  RunResult train(const std::string& config, const std::string& data, const std::string& run_name,
                  const std::string& extra) {
    std::string args = "train " + kConfigs + config + " --set output_dir=" + (dir_ / run_name);
    for (const char* split : {"train", "valid", "test"})
      args += std::string(" --set data.") + split + "=" + (dir_ / data) + "/" + split;
    return run(args + " --set train.log_interval=10 " + extra);
  }
  std::vector<Json> records(const std::string& run_name, const std::string& split) {
    std::vector<Json> found;
    std::istringstream in(slurp(dir_ / run_name + "/metrics.jsonl"));
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line);
      if (j.at("split").get<std::string>() == split) found.push_back(j);
    }
    return found;
  }
  TempDir dir_;
};

TEST_F(EhrNextVisit, FineTunesFromARotorMaskedLmAndPredicts) {
  RunResult r = train("behrt_mlm_tiny.yaml", "mlm", "mlm_run",
                      "--set train.max_updates=60 --set train.valid_interval=30 "
                      "--set train.save_interval=30 --set optim.warmup_updates=6");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(slurp(dir_ / "mlm_run/checkpoints/best/vocab.txt"), slurp(dir_ / "mlm/vocab.txt"));
  r = train("behrt_nextvisit_tiny.yaml", "nv", "nv_run",
            "--set train.max_updates=40 --set train.valid_interval=20 "
            "--set train.save_interval=20 --set optim.warmup_updates=4 "
            "--set model.init_from=" +
                (dir_ / "mlm_run") + ":best");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string log = slurp(dir_ / "nv_run/train.log");
  EXPECT_NE(log.find("parameters from a rotor checkpoint; 3 newly initialized: "
                     "classifier.label_queries classifier.label_weight classifier.label_bias"),
            std::string::npos)
      << log;

  // The test patients' next-visit codes, multi-hot.
  const auto test_split = rotor::data::EhrSplit::open(dir_ / "nv/test");
  const int64_t C = test_split.meta().vocab_size - rotor::data::kEhrFirstCode;
  std::vector<uint8_t> truth(test_split.size() * static_cast<size_t>(C), 0);
  for (size_t i = 0; i < test_split.size(); ++i)
    for (int32_t id : test_split.labels(i))
      truth[i * static_cast<size_t>(C) + static_cast<size_t>(id - rotor::data::kEhrFirstCode)] = 1;
  const std::vector<Json> test = records("nv_run", "test");
  ASSERT_EQ(test.size(), 1u);
  const double ap = test[0].at("ap").get<double>(), auroc = test[0].at("auroc").get<double>();
  for (const char* key : {"ap", "auroc", "ap_micro", "ap_macro", "auroc_micro", "auroc_macro"}) {
    const double v = test[0].at(key).get<double>();
    EXPECT_TRUE(v >= 0 && v <= 1) << key << " " << v;
  }

  // predict: a probability per code of vocab.txt, scored as the test record.
  r = run("predict --checkpoint " + (dir_ / "nv_run") + ":best --input " + (dir_ / "nv/test") +
          " --output " + (dir_ / "preds.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> codes = rotor::data::ehr_label_names(dir_ / "nv");
  std::istringstream in(slurp(dir_ / "preds.tsv"));
  std::string line, header = "index\tprediction";
  for (const auto& c : codes) header += "\tp_" + c;
  std::getline(in, line);
  EXPECT_EQ(line, header);
  std::vector<double> probs;
  size_t rows = 0;
  for (; std::getline(in, line); ++rows) {
    std::istringstream fields(line);
    std::string index, predicted, p;
    std::getline(fields, index, '\t');
    std::getline(fields, predicted, '\t');
    EXPECT_EQ(index, std::to_string(rows));
    for (int64_t k = 0; k < C; ++k) {
      ASSERT_TRUE(std::getline(fields, p, '\t')) << line;
      probs.push_back(std::stod(p));
      EXPECT_TRUE(probs.back() >= 0 && probs.back() <= 1) << p;
    }
  }
  ASSERT_EQ(rows, test_split.size());
  const rotor::eval::MultilabelScores m = rotor::eval::multilabel_scores(probs, truth, C);
  EXPECT_NEAR(m.ap, ap, 1e-4);
  EXPECT_NEAR(m.auroc, auroc, 1e-4);
  EXPECT_NE(r.err.find("| ap "), std::string::npos) << r.err;

  // Another vocabulary (another seed: other training patients, so other
  // counts and another order of the codes): refused by
  // predict and by model.init_from, one line naming the files.
  r = run("prepare-ehr --events " + (dir_ / "synth/events.csv") + " --patients " +
          (dir_ / "synth/patients.csv") + " --output " + (dir_ / "other") +
          " --min-visits 3 --labels next_visit --seed 9");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run("predict --checkpoint " + (dir_ / "nv_run") + ":best --input " + (dir_ / "other/test"));
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.err.find("numbers its codes differently from"), std::string::npos) << r.err;
  r = train("behrt_nextvisit_tiny.yaml", "other", "other_run",
            "--set train.max_updates=2 --set model.init_from=" + (dir_ / "mlm_run") + ":best");
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.err.find("numbers the codes differently from"), std::string::npos) << r.err;
  // A checkpoint of other positions is refused before any weight is read.
  r = train("corebehrt_nextvisit_tiny.yaml", "nv", "rope_run",
            "--set train.max_updates=2 --set model.init_from=" + (dir_ / "mlm_run") + ":best");
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.err.find("has model.position learned, the config rope"), std::string::npos) << r.err;
}

TEST_F(EhrNextVisit, NeedsLabelledSplits) {
  const RunResult r = train("behrt_nextvisit_tiny.yaml", "mlm", "run", "--set train.max_updates=2");
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no labels (prepare-ehr ran without --labels"), std::string::npos) << r.err;
}

}  // namespace
