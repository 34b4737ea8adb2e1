// Outputs made of several files are written whole or not at all, every
// writer of a directory takes its lock, readers of a checkpoint are not
// pruned under, and the signals and names of the fourth reliability round
// (core/io.h write_directory, core/dir_lock.h, checkpoint.h HeldCheckpoint).
// Each case is one line of a table, run as a shell script in a fresh copy of a
// small world, under a timeout:
//   data/{train,valid,test}.{en,de}   raw text of the numbers task
//   tiny.yaml, run/                   a translation config and its trained run
//   mlm.yaml, mlm.txt, mlmrun/        a masked LM, its text and its run
//   mlmrun2/                          the same masked LM with another seed
//   hf/, hf2/                         mlmrun and mlmrun2 exported
//   small.model                       a SentencePiece model of 60 pieces
//   prep.{src,tgt}.{bin,idx}          `rotor prepare` of data/train with it
//   ehr_synth/, ehr/                  `rotor synth ehr` and its prepare-ehr directory
//   DEAD                              the pid of a process that has ended
// A case: {name, script, exit status, what stderr's last line holds ("" :
// no error line), a shell check afterwards, and the world's paths the case
// may change (the rest must stay as they were)}. No temporary may be left
// behind by any case.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/error_table.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::TempDir;

struct Case {
  const char* name;
  const char* script;
  int code;
  const char* message;
  const char* check;
  const char* writable;  // a path prefix the case may change ("" : none)
};

#define EXPORT "R export --checkpoint mlmrun --format hf"
#define EHR_INPUT "--events ehr_synth/events.csv --patients ehr_synth/patients.csv"
#define SAME_DIR(a, b) "diff -r " a " " b " >/dev/null"

// clang-format off
const Case kCases[] = {
  // ---- export: a directory written whole -------------------------------------------
  {"export_over_earlier_replaces_it_whole",
   "echo stale > hf/tokenizer.model && " EXPORT " --output hf", 0, "",
   "! test -e hf/tokenizer.model && test -f hf/config.json && test -f hf/tokenizer.json", "hf"},
  {"export_new_directory", EXPORT " --output out", 0, "",
   SAME_DIR("out", "hf"), ""},
  {"export_into_foreign_files_refused",
   "mkdir out && echo mine > out/notes.txt && " EXPORT " --output out", 1,
   "out holds notes.txt, which export does not write",
   "[ \"$(cat out/notes.txt)\" = mine ] && ! test -e out/config.json", ""},
  {"export_into_a_run_refused", EXPORT " --output run", 1, "which export does not write",
   "test -d run/checkpoints && ! test -e run/config.json", ""},
  {"export_into_a_file_refused", "echo x > out && " EXPORT " --output out", 1,
   "exists and is not a directory", "[ \"$(cat out)\" = x ]", ""},
  {"export_full_disk_keeps_earlier", "ulimit -f 40; " EXPORT " --output hf2", 1,
   "File too large", "", ""},
  {"export_locked_directory_refused",
   "flock -o hf2/.rotor.lock sleep 20 & f=$!; sleep 0.5; " EXPORT " --output hf2; s=$?; "
   "kill $f; exit $s",
   1, "hf2 is in use by", "", ""},
  {"export_removes_a_killed_exports_temporary",
   "mkdir hf.tmp-$(cat DEAD) && head -c 100000 /dev/zero > hf.tmp-$(cat DEAD)/model.safetensors && "
   EXPORT " --output hf", 0, "", "! test -e hf.tmp-$(cat DEAD)", "hf"},
  {"export_keeps_a_live_writers_temporary",
   "mkdir hf.tmp-$$ && " EXPORT " --output hf; s=$?; test -d hf.tmp-$$ && rmdir hf.tmp-$$; exit $s",
   0, "", "", "hf"},
  {"two_exports_at_once_never_mix",
   "(R export --checkpoint mlmrun --output out 2>e1; echo $? > c1) & "
   "(R export --checkpoint mlmrun2 --output out 2>e2; echo $? > c2) & wait; "
   "(" SAME_DIR("out", "hf") " || " SAME_DIR("out", "hf2") ") && "
   "for i in 1 2; do [ $(cat c$i) = 0 ] || grep -q 'is in use by' e$i || exit 9; done", 0, "",
   "", ""},
  // ---- prepare-ehr: a directory written whole --------------------------------------
  {"prepare_ehr_rerun_failing_keeps_earlier",
   "printf 'x,1\\n' > bad.csv && R prepare-ehr --events bad.csv --patients ehr_synth/patients.csv "
   "--output ehr", 1, "", "test -f ehr/ehr.json && test -f ehr/vocab.txt", ""},
  {"prepare_ehr_full_disk_keeps_earlier",
   "ulimit -f 30; R prepare-ehr " EHR_INPUT " --labels next_visit --output ehr", 1, "",
   "! test -e ehr/train.labels.idx && ! ls -d ehr.tmp-* 2>/dev/null", ""},
  {"prepare_ehr_rerun_replaces_whole",
   "R prepare-ehr " EHR_INPUT " --labels next_visit --output ehr && "
   "R prepare-ehr " EHR_INPUT " --output ehr", 0, "",
   "! test -e ehr/train.labels.idx && test -f ehr/ehr.json", "ehr"},
  {"prepare_ehr_removes_a_killed_runs_temporary",
   "mkdir ehr.tmp-$(cat DEAD) && head -c 1000000 /dev/zero > ehr.tmp-$(cat DEAD)/train.bin && "
   "R prepare-ehr " EHR_INPUT " --output ehr", 0, "", "! test -e ehr.tmp-$(cat DEAD)", "ehr"},
  {"prepare_ehr_into_foreign_files_refused",
   "mkdir e2 && echo mine > e2/mine.txt && R prepare-ehr " EHR_INPUT " --output e2", 1,
   "e2 holds mine.txt, which prepare-ehr does not write",
   "[ \"$(cat e2/mine.txt)\" = mine ] && ! test -e e2/ehr.json", ""},
  // ---- rotor prepare: a parallel pair replaced together ----------------------------
  {"prepare_full_disk_keeps_the_pair",
   "ulimit -f 2; R prepare --spm small.model --src data/train.en --tgt data/train.de "
   "--output-prefix prep", 1, "File too large", "", ""},
  {"prepare_replaces_the_pair",
   "R prepare --spm small.model --src data/valid.en --tgt data/valid.de --output-prefix prep", 0,
   "", "[ $(stat -c %s prep.src.idx) = $(stat -c %s prep.tgt.idx) ] && "
   "[ $(stat -c %s prep.src.idx) -lt 1000 ]", "prep"},
  // ---- SIGHUP stops a run with a checkpoint, as SIGTERM does -----------------------
  {"train_sighup_saves_and_stops",
   "\"$ROTOR\" train mlm.yaml --set output_dir=h --set train.max_updates=100000 --set "
   "train.save_interval=0 --set train.log_interval=1 > log 2>&1 & p=$!; "
   "i=0; while ! grep -q 'update ' log && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
   "kill -HUP $p; wait $p", 0, "",
   "grep -q 'signal 1 received' log && test -f h/checkpoint_last/model.safetensors", ""},
  // ---- launch runs only what is data-parallel --------------------------------------
  {"launch_n2_of_translate_refused",
   "R launch -n 2 -- translate --checkpoint run --input data/test.en", 1,
   "rotor translate is not data-parallel", "", ""},
  // ---- names JSON cannot hold ------------------------------------------------------
  {"eval_json_of_a_non_utf8_name_refused",
   "cp mlm.txt \"$(printf 'x\\377.txt')\" && "
   "R eval --checkpoint mlmrun --input \"$(printf 'x\\377.txt')\" --json", 1,
   "is not valid UTF-8, which the JSON output cannot hold", "", ""},
  {"eval_of_a_non_utf8_name_without_json",
   "cp mlm.txt \"$(printf 'x\\377.txt')\" && "
   "R eval --checkpoint mlmrun --input \"$(printf 'x\\377.txt')\"", 0, "", "", ""},
  {"train_into_a_non_utf8_directory_refused",
   "R train mlm.yaml --set output_dir=\"$(printf 'r\\377')\"", 1,
   "output_dir: not valid UTF-8", "! test -e \"$(printf 'r\\377')\"", ""},
};
// clang-format on

class WholeOutputs : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    base_ = new TempDir();
    const std::string b = base_->path();
    std::ofstream(b + "/tiny.yaml") << rotor::test::kWorldTranslationYaml;
    std::ofstream(b + "/mlm.yaml") << rotor::test::kWorldMlmYaml;
    const auto setup = rotor::test::run_script(
        b,
        "R synth numbers-en-de --output data --train 300 --valid 30 --test 20 --test-long 5 "
        "--seed 4 && paste -d' ' data/train.en data/train.de > mlm.txt && "
        "R spm-train --input data/train.en --input data/train.de --model-prefix small "
        "--vocab-size 60 && R train tiny.yaml && R train mlm.yaml && "
        "R train mlm.yaml --set output_dir=mlmrun2 --set seed=9 && "
        "R export --checkpoint mlmrun --output hf && R export --checkpoint mlmrun2 --output hf2 && "
        "R prepare --spm small.model --src data/train.en --tgt data/train.de --output-prefix prep "
        "&& R synth ehr --output ehr_synth --patients 200 --seed 3 && "
        "R prepare-ehr --events ehr_synth/events.csv --patients ehr_synth/patients.csv "
        "--output ehr || exit 1; sh -c 'exit 0' & p=$!; wait $p; echo $p > DEAD",
        600);
    ASSERT_EQ(setup.code, 0) << setup.err;
  }
  static void TearDownTestSuite() {
    delete base_;
    base_ = nullptr;
  }

 protected:
  static TempDir* base_;
};
TempDir* WholeOutputs::base_ = nullptr;

TEST_P(WholeOutputs, WholeOrNotAtAll) {
  const Case& c = GetParam();
  ASSERT_NE(base_, nullptr);
  TempDir dir;
  rotor::test::copy_world(base_->path(), dir);
  const auto world = rotor::test::snapshot(dir.path());
  const auto o = rotor::test::run_script(dir.path(), c.script);
  rotor::test::expect_unchanged(world, rotor::test::snapshot(dir.path()), c.writable);
  EXPECT_EQ(o.code, c.code) << c.script << "\nstderr: " << o.err;
  if (*c.message)
    rotor::test::expect_error_line(o.err, c.message);
  else if (c.code == 0)
    rotor::test::expect_no_error(o.err);
  if (*c.check) {
    const auto k = rotor::test::run_script(dir.path(), c.check);
    EXPECT_EQ(k.code, 0) << "check failed: " << c.check << "\nafter: " << o.err;
  }
  for (const auto& e : fs::recursive_directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name.find(".tmp-") == std::string::npos && name.find(".old-") == std::string::npos)
        << "temporary left behind: " << e.path();
  }
}

INSTANTIATE_TEST_SUITE_P(Table, WholeOutputs, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A reader of a run's checkpoint while the run saves every update and keeps
// one: never pruned under (checkpoint.h HeldCheckpoint). Before the readers
// held their checkpoint, about a third of these evals failed.
TEST(WholeOutputs, EvalWhileTheRunPrunes) {
  TempDir dir;
  std::ofstream(dir / "mlm.yaml") << rotor::test::kWorldMlmYaml;
  const auto r = rotor::test::run_script(
      dir.path(),
      "R synth numbers-en-de --output data --train 300 --valid 30 --test 20 --test-long 5 --seed 4 "
      "&& paste -d' ' data/train.en data/train.de > mlm.txt && R train mlm.yaml || exit 1; "
      "\"$ROTOR\" train mlm.yaml --resume --set train.max_updates=150 --set "
      "train.save_interval=1 --set train.keep_last=1 > log 2>&1 & p=$!; fails=0; n=0; "
      "while kill -0 $p 2>/dev/null && [ $n -lt 8 ]; do "
      "  R eval --checkpoint mlmrun --input mlm.txt > e.out 2> e.err || { fails=$((fails+1)); "
      "cat e.err; }; n=$((n+1)); done; wait $p; echo \"evals $n failed $fails\"; [ $fails = 0 ]",
      600);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

}  // namespace
