// The shipped next-visit recipe learns a task it must learn (issue 42): every
// visit of a patient repeats the one before it, so the codes of the next visit
// are those of the last one, and a model that reads its input scores them
// far above the label frequencies. A label alignment broken by batching or
// shuffling, a [CLS] head that does not see the encoder, or a head stuck at
// the label frequencies (docs/results.md, "Why the tiny next-visit recipes
// predicted the label frequencies") stays near the frequency baseline's AP
// and fails. configs/ehr/behrt_nextvisit_tiny.yaml as shipped, fewer
// updates; a few seconds on one thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "core/philox.h"
#include "data/ehr.h"
#include "eval/multilabel_metrics.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

using rotor::json_io::Json;
using rotor::test::RunResult;
using rotor::test::slurp;
using rotor::test::TempDir;

constexpr int kPatients = 1200, kCodes = 40;

// Patients of 2 to 5 visits a year apart, each visit the same 2 to 4 codes
// of kCodes (drawn per patient).
std::string repeating_cohort() {
  std::string out;
  for (int i = 0; i < kPatients; ++i) {
    rotor::PhiloxRng rng(7, static_cast<uint64_t>(i));
    std::vector<std::string> codes;
    const int n = 2 + static_cast<int>(rng.below(3));
    while (static_cast<int>(codes.size()) < n) {
      const std::string c = fmt::format("K{:02}", rng.below(kCodes));
      if (std::find(codes.begin(), codes.end(), c) == codes.end()) codes.push_back(c);
    }
    Json p = Json::object();
    p["patient_id"] = fmt::format("R{:04}", i);
    p["visits"] = Json::array();
    const int visits = 2 + static_cast<int>(rng.below(4));
    const int64_t age = 12 * (20 + static_cast<int64_t>(rng.below(50)));
    for (int v = 0; v < visits; ++v)
      p["visits"].push_back({{"age", age + 12 * v}, {"codes", codes}});
    out += p.dump() + "\n";
  }
  return out;
}

TEST(EhrLearns, NextVisitRepeatsTheLastOne) {
  TempDir d;
  std::ofstream(d / "cohort.jsonl") << repeating_cohort();
  RunResult r = rotor::test::run_rotor(d, "prepare-ehr --jsonl " + (d / "cohort.jsonl") +
                                              " --output " + (d / "nv") + " --labels next_visit");
  ASSERT_EQ(r.code, 0) << r.err;

  // The label-frequency baseline on test: what a head that ignores its input scores.
  const rotor::data::EhrSplit train = rotor::data::EhrSplit::open(d / "nv/train");
  const rotor::data::EhrSplit test = rotor::data::EhrSplit::open(d / "nv/test");
  const int64_t C = train.meta().vocab_size - rotor::data::kEhrFirstCode;
  std::vector<double> freq(static_cast<size_t>(C), 0.0), scores;
  for (size_t i = 0; i < train.size(); ++i)
    for (int32_t id : train.labels(i)) freq[static_cast<size_t>(id - 7)] += 1;
  std::vector<uint8_t> truth;
  for (size_t i = 0; i < test.size(); ++i) {
    std::vector<uint8_t> row(static_cast<size_t>(C), 0);
    for (int32_t id : test.labels(i)) row[static_cast<size_t>(id - 7)] = 1;
    truth.insert(truth.end(), row.begin(), row.end());
    scores.insert(scores.end(), freq.begin(), freq.end());
  }
  const double baseline = rotor::eval::multilabel_scores(scores, truth, C).ap;
  EXPECT_LT(baseline, 0.3);

  std::string args = "train " + std::string(ROTOR_SOURCE_DIR) +
                     "/configs/ehr/behrt_nextvisit_tiny.yaml --set output_dir=" + (d / "run");
  for (const char* split : {"train", "valid", "test"})
    args += std::string(" --set data.") + split + "=" + (d / "nv") + "/" + split;
  args +=
      " --set train.max_updates=300 --set optim.warmup_updates=30 --set train.valid_interval=100"
      " --set train.save_interval=0 --set train.log_interval=50";
  r = rotor::test::run_rotor(d, args, "OMP_NUM_THREADS=1");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(slurp(d / "run/metrics.jsonl"));
  double ap = -1;
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
    if (j.at("split").get<std::string>() == "test") ap = j.at("ap").get<double>();
  }
  EXPECT_GT(ap, 0.9) << "label-frequency baseline " << baseline;
}

}  // namespace
