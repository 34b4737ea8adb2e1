// The EHR path is checked as the text path is (issue 40, class 3): codes and
// patient ids that would break vocab.txt and the patient lists, implausible
// ages, a vocabulary or a cohort left empty, --resume on a prepare-ehr
// directory that is no longer the one the run was trained on, and an export
// to Hugging Face of what BERT cannot hold. One table, one row per case, run
// like tests/cpu/test_input_checks.cpp: the rotor binary in a fresh copy of a
// small world after the row's set-up, asserting the exit status, the one
// error line (or, for a row that succeeds, a text somewhere in stderr), that
// no file that existed before changed (but under the row's writable path),
// and the row's check.
//
// The world:
//   mini/{patients,events}.csv   two patients (A born 1950-01-01, B), three
//                                visits: rows append to them (events.csv's
//                                next line is 5, patients.csv's 4)
//   mini.jsonl                   the same patients as JSON lines (next line 3)
//   src/{events,patients}.csv    `rotor synth ehr` of 60 patients
//   ehr/                         src prepared with the default options (seed 1)
//   ehr.yaml, ehrrun/            an EHR masked LM (token RoPE, an age table of
//                                128 ids), trained 2 updates
//   visitrun/                    the same with learned visit positions, no ages
//   t2vrun/                      the same with Time2Vec ages
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>

#include "support/error_table.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

using rotor::test::TempDir;

struct Case {
  const char* name;
  const char* setup;        // sh commands run in the case directory first ("" for none)
  const char* args;         // the rotor command line
  int code;                 // expected exit status
  const char* message;      // in the error line (code != 0) or in stderr (code 0; "" for none)
  const char* check = "";   // sh test that must hold afterwards
  const char* writes = "";  // files under this path may change
};

#define MINI_CSV "prepare-ehr --events mini/events.csv --patients mini/patients.csv --output o "
#define MINI_JSONL "prepare-ehr --jsonl mini.jsonl --output o "
#define EVENT(row) "printf '" row "\\n' >> mini/events.csv"
#define PATIENT(row) "printf '" row "\\n' >> mini/patients.csv"
#define JSONL(line) "printf '%s\\n' '" line "' >> mini.jsonl"
#define NOTHING_WRITTEN "! test -e o"
#define PREPARE_SRC(opts)                                                                 \
  "rm -rf ehr && $ROTOR prepare-ehr --events src/events.csv --patients src/patients.csv " \
  "--output ehr " opts " >/dev/null"
#define RESUME "train ehr.yaml --resume"
#define REFUSED_RESUME(why)                                                       \
  "--resume: data.train ehr/train: the prepare-ehr directory ehr is not the one " \
  "ehrrun/checkpoints/step_2 was trained on (" why

// clang-format off
const Case kCases[] = {
  // ---- separators refused where codes and ids enter ----
  {"csv_code_with_tab", EVENT("A,2003-01-01,3,A\\tB"), MINI_CSV, 1,
   "mini/events.csv:5: code \"A\\tB\" holds a tab (byte 2): vocab.txt and the patient lists hold "
   "one name a line", NOTHING_WRITTEN},
  {"csv_quoted_code_with_tab", EVENT("A,2003-01-01,3,\"J\\t45\""), MINI_CSV, 1,
   "mini/events.csv:5: code \"J\\t45\" holds a tab (byte 2)", NOTHING_WRITTEN},
  {"csv_code_with_carriage_return", EVENT("A,2003-01-01,3,A\\rB"), MINI_CSV, 1,
   "mini/events.csv:5: code \"A\\rB\" holds a carriage return (byte 2)", NOTHING_WRITTEN},
  {"csv_code_with_control_character", EVENT("A,2003-01-01,3,A\\001B"), MINI_CSV, 1,
   "mini/events.csv:5: code \"A\\x01B\" holds a control character (byte 2)", NOTHING_WRITTEN},
  {"csv_code_spelled_as_special", EVENT("A,2003-01-01,3,[SEP]"), MINI_CSV, 1,
   "mini/events.csv:5: code \"[SEP]\" is spelled as a special token of vocab.txt",
   NOTHING_WRITTEN},
  {"csv_patient_id_with_tab", PATIENT("C\\tD,1970-01-01"), MINI_CSV, 1,
   "mini/patients.csv:4: patient id \"C\\tD\" holds a tab (byte 2)", NOTHING_WRITTEN},
  {"jsonl_patient_id_with_newline", JSONL("{\"patient_id\": \"C\\nD\", \"visits\": []}"),
   MINI_JSONL, 1, "mini.jsonl:3: patient id \"C\\nD\" holds a line feed (byte 2)", NOTHING_WRITTEN},
  {"jsonl_code_with_newline",
   JSONL("{\"patient_id\": \"C\", \"visits\": [{\"age\": 3, \"codes\": [\"X\\nY\"]}]}"),
   MINI_JSONL, 1,
   "mini.jsonl:3: visit 1: code \"X\\nY\" holds a line feed (byte 2)", NOTHING_WRITTEN},
  {"jsonl_code_with_tab",
   JSONL("{\"patient_id\": \"C\", \"visits\": [{\"age\": 3, \"codes\": [\"X\", \"\\tY\"]}]}"),
   MINI_JSONL, 1, "mini.jsonl:3: visit 1: code \"\\tY\" holds a tab (byte 1)", NOTHING_WRITTEN},
  {"jsonl_code_spelled_as_special",
   JSONL("{\"patient_id\": \"C\", \"visits\": [{\"age\": 3, \"codes\": [\"<unk>\"]}]}"), MINI_JSONL,
   1, "mini.jsonl:3: visit 1: code \"<unk>\" is spelled as a special token of vocab.txt",
   NOTHING_WRITTEN},
  // Other characters are names like any: a space, a comma, a quote, non-ASCII.
  {"codes_with_space_comma_quote_accepted", EVENT("A,2003-01-01,3,\"E 11,\"\"x\"\"\"") " && "
   EVENT("B,2003-01-01,3,Ä1"),
   MINI_CSV "--valid-fraction 0 --test-fraction 0", 0, "prepare-ehr: 2 patients",
   "grep -qP '^E 11,\"x\"\\t1$' o/vocab.txt && grep -qP '^Ä1\\t1$' o/vocab.txt", "o"},

  // ---- plausible ages ----
  {"csv_age_9998_years", PATIENT("C,0001-01-01") " && " EVENT("C,9999-01-01,1,X"), MINI_CSV, 1,
   "mini/events.csv:5: date 9999-01-01 is 9998 years after the birth date of patient 'C' "
   "(0001-01-01); ages above 150 years are refused as implausible", NOTHING_WRITTEN},
  {"csv_age_151_years", PATIENT("C,1850-01-01") " && " EVENT("C,2001-01-01,1,X"), MINI_CSV, 1,
   "mini/events.csv:5: date 2001-01-01 is 151 years after", NOTHING_WRITTEN},
  {"csv_age_150_years_accepted", PATIENT("C,1851-01-01") " && " EVENT("C,2001-01-01,1,X"),
   MINI_CSV "--valid-fraction 0 --test-fraction 0", 0, "prepare-ehr: 3 patients",
   "grep -q '\"age_vocab_size\": 151' o/ehr.json", "o"},
  {"csv_age_in_months_same_bound", PATIENT("C,1850-01-01") " && " EVENT("C,2001-01-01,1,X"),
   MINI_CSV "--age-unit months", 1, "is 151 years after the birth date of patient 'C'",
   NOTHING_WRITTEN},
  {"jsonl_age_1801_months",
   JSONL("{\"patient_id\": \"C\", \"visits\": [{\"age\": 1801, \"codes\": [\"X\"]}]}"), MINI_JSONL,
   1, "mini.jsonl:3: visit 1: age 1801 is not a number of months from 0 to 1800 (150 years)",
   NOTHING_WRITTEN},

  // ---- nothing left: refused at prepare time ----
  {"min_count_leaves_no_code", "", MINI_CSV "--min-count 5 --valid-fraction 0 --test-fraction 0",
   1, "prepare-ehr: no code is left: the most frequent of the 2 codes of the training split "
   "occurs 2 times, fewer than --min-count 5; lower --min-count", NOTHING_WRITTEN},
  {"min_count_leaves_no_code_jsonl", "", MINI_JSONL "--min-count 1000", 1,
   "no code is left", NOTHING_WRITTEN},
  {"min_visits_leaves_no_patient", "", MINI_CSV "--min-visits 3", 1,
   "prepare-ehr: no patient left of 2 (fewer than --min-visits 3: 2, no label: 0)",
   NOTHING_WRITTEN},
  {"labels_leave_no_patient", "", MINI_JSONL "--labels window:1", 1,
   "prepare-ehr: no patient left of 2", NOTHING_WRITTEN},
  {"min_count_over_existing_keeps_it", "", "prepare-ehr --events src/events.csv --patients "
   "src/patients.csv --output ehr --min-count 100000", 1, "no code is left"},

  // ---- --resume checks the data the checkpoint was trained on ----
  {"resume_unchanged_continues", "", RESUME " --set train.max_updates=3", 0, "",
   "test -d ehrrun/checkpoints/step_3 && "
   "grep -q '\"--seed\": 1' ehrrun/checkpoints/step_3/ehr_data.json && "
   "grep -q '\"data.valid\"' ehrrun/checkpoints/step_3/ehr_data.json", "ehrrun"},
  {"resume_reprepared_with_other_seed", PREPARE_SRC("--seed 2"), RESUME, 1,
   REFUSED_RESUME("--seed was 1, is 2 now); its ids may mean other codes")},
  {"resume_reprepared_with_other_min_count", PREPARE_SRC("--min-count 3"), RESUME, 1,
   REFUSED_RESUME("--min-count was 1, is 3 now)")},
  {"resume_reprepared_in_months", PREPARE_SRC("--age-unit months"), RESUME, 1,
   REFUSED_RESUME("--age-unit was years, is months now)")},
  {"resume_reprepared_from_changed_events",
   "echo 'P000001,2019-01-01,V99,ZZZ' >> src/events.csv && " PREPARE_SRC(""), RESUME, 1,
   REFUSED_RESUME("--events src/events.csv changed (")},
  {"resume_reprepared_alike_continues", PREPARE_SRC("--seed 1"),
   RESUME " --set train.max_updates=3", 0, "", "test -d ehrrun/checkpoints/step_3", "ehrrun"},
  {"resume_vocab_edited", "sed -i '8{h;d};9{G}' ehr/vocab.txt", RESUME, 1,
   REFUSED_RESUME("vocab.txt ehr/vocab.txt changed (same size, other content)")},
  {"resume_old_checkpoint_vocab_reordered",
   "rm ehrrun/checkpoints/step_2/ehr_data.json && sed -i '8{h;d};9{G}' ehr/vocab.txt", RESUME, 1,
   "--resume: ehr/vocab.txt numbers the codes differently from "
   "ehrrun/checkpoints/step_2/vocab.txt, the vocabulary ehrrun/checkpoints/step_2 was trained "
   "with (id 7 is "},
  {"resume_old_checkpoint_same_vocab_continues", "rm ehrrun/checkpoints/step_2/ehr_data.json",
   RESUME " --set train.max_updates=3", 0, "", "test -d ehrrun/checkpoints/step_3", "ehrrun"},
  {"resume_checkpoint_without_vocab", "rm ehrrun/checkpoints/step_2/vocab.txt", RESUME, 1,
   "--resume: ehrrun/checkpoints/step_2 lacks vocab.txt, the code vocabulary of its EHR data"},
  {"resume_valid_split_reprepared",
   "$ROTOR prepare-ehr --events src/events.csv --patients src/patients.csv --output ehr2 "
   "--min-count 1 >/dev/null && $ROTOR train ehr.yaml --set data.valid=ehr2/valid "
   "--set output_dir=r2 2>/dev/null && rm -rf ehr2 && $ROTOR prepare-ehr --events "
   "src/events.csv --patients src/patients.csv --output ehr2 --valid-fraction 0.3 >/dev/null",
   RESUME " --set data.valid=ehr2/valid --set output_dir=r2", 1,
   "--resume: data.valid ehr2/valid: the prepare-ehr directory ehr2 is not the one "
   "r2/checkpoints/step_2 was trained on (--valid-fraction was 0.1, is 0.3 now)"},
  {"resume_test_split_added_continues", "",
   RESUME " --set data.test=ehr/test --set train.max_updates=3", 0, "",
   "test -d ehrrun/checkpoints/step_3", "ehrrun"},
  {"average_keeps_the_record", "", "average ehrrun/checkpoints/step_2 --output avg", 0, "",
   "cmp ehrrun/checkpoints/step_2/ehr_data.json avg/ehr_data.json && "
   "cmp ehrrun/checkpoints/step_2/vocab.txt avg/vocab.txt", "avg"},

  // ---- export refuses what Hugging Face BERT cannot hold ----
  {"export_age_table_refused", "", "export --checkpoint ehrrun --output out", 1,
   "export --format hf: the model adds an age embedding (model.age_vocab_size 128, "
   "model.age_embedding table), which Hugging Face BERT/RoFormer cannot hold", "! test -e out"},
  {"export_time2vec_refused", "", "export --checkpoint t2vrun --output out", 1,
   "(model.age_vocab_size 128, model.age_embedding time2vec)", "! test -e out"},
  {"export_visit_positions_refused", "", "export --checkpoint visitrun --output out", 1,
   "export --format hf: model.position_source is visit, and Hugging Face BERT/RoFormer count "
   "positions by token", "! test -e out"},

  // ---- scores over nothing, and keys that do nothing, on EHR data ----
  {"eval_no_code_masked", "", "eval --checkpoint ehrrun --input ehr/valid --block-size 2", 1,
   "eval: --input ehr/valid: no tokens scored: the fixed validation masks select none of its "
   "tokens"},
  {"eval_scores_the_split", "", "eval --checkpoint ehrrun --input ehr/valid --json", 0, ""},
  {"time2vec_dim_without_time2vec", "", "train ehr.yaml --set model.time2vec_dim=8 "
   "--set output_dir=fresh", 1,
   "model.time2vec_dim: 8 sizes Time2Vec ages, and model.age_embedding is table",
   "! test -e fresh"},
  {"time2vec_dim_too_large", "", "train ehr.yaml --set model.age_embedding=time2vec "
   "--set model.time2vec_dim=2e9 --set output_dir=fresh", 1,
   "model.time2vec_dim: 2000000000 periodic terms would need about ", "! test -e fresh"},
};
// clang-format on

// The row's name in test listings (not its bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

rotor::test::RunResult sh(const std::string& dir, const std::string& script) {
  return rotor::test::run_script(dir, script);
}

class EhrChecks : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    base_ = new TempDir();
    const std::string b = base_->path();
    std::filesystem::create_directories(b + "/mini");
    std::ofstream(b + "/mini/patients.csv")
        << "patient_id,birth_date\nA,1950-01-01\nB,1960-06-15\n";
    std::ofstream(b + "/mini/events.csv") << "patient_id,time,visit_id,code\n"
                                             "A,2001-01-01,1,X\nA,2002-01-01,2,Y\n"
                                             "B,2001-03-03,1,X\n";
    std::ofstream(b + "/mini.jsonl")
        << "{\"patient_id\": \"A\", \"visits\": [{\"age\": 612, \"codes\": [\"X\"]}, "
           "{\"age\": 624, \"codes\": [\"Y\"]}]}\n"
           "{\"patient_id\": \"B\", \"visits\": [{\"age\": 488, \"codes\": [\"X\"]}]}\n";
    std::ofstream(b + "/ehr.yaml") << R"(task: mlm
output_dir: ehrrun
seed: 5
device: cpu
model:
  encoder_layers: 1
  d_model: 32
  n_heads: 2
  d_ff: 64
  activation: gelu
  position: rope
  max_positions: 64
  age_vocab_size: 128
data:
  format: ehr
  train: ehr/train
  valid: ehr/valid
  seq_len: 32
train:
  max_updates: 2
  batch_size: 4
  log_interval: 1
  valid_interval: 2
  save_interval: 2
optim:
  name: adamw
  lr: 1.0e-3
  warmup_updates: 1
)";
    const auto s =
        sh(b,
           "set -e; $ROTOR synth ehr --output src --patients 60 --seed 3 >/dev/null; "
           "$ROTOR prepare-ehr --events src/events.csv --patients src/patients.csv "
           "--output ehr >/dev/null; $ROTOR train ehr.yaml 2>/dev/null; "
           "$ROTOR train ehr.yaml --set output_dir=visitrun --set model.position=learned "
           "--set model.position_source=visit --set model.age_vocab_size=0 "
           "2>/dev/null; "
           "$ROTOR train ehr.yaml --set output_dir=t2vrun "
           "--set model.age_embedding=time2vec 2>/dev/null");
    ASSERT_EQ(s.code, 0) << s.err;
  }
  static void TearDownTestSuite() {
    delete base_;
    base_ = nullptr;
  }

 protected:
  static TempDir* base_;
};
TempDir* EhrChecks::base_ = nullptr;

TEST_P(EhrChecks, CheckedAsTextIs) {
  const Case& c = GetParam();
  ASSERT_NE(base_, nullptr);
  TempDir dir;
  rotor::test::copy_world(base_->path(), dir);
  if (*c.setup) {
    const auto s = sh(dir.path(), c.setup);
    ASSERT_EQ(s.code, 0) << "set-up: " << c.setup << "\n" << s.err;
  }
  const auto before = rotor::test::snapshot(dir.path());
  const auto o = sh(dir.path(), "$ROTOR " + std::string(c.args));
  EXPECT_EQ(o.code, c.code) << c.args << "\nstderr: " << o.err;
  if (c.code != 0) {
    rotor::test::expect_error_line(o.err, c.message);
  } else {
    rotor::test::expect_no_error(o.err);
    EXPECT_NE((o.out + o.err).find(c.message), std::string::npos)
        << "expected \"" << c.message << "\" in: " << o.out << o.err;
  }
  rotor::test::expect_unchanged(before, rotor::test::snapshot(dir.path()), c.writes);
  if (*c.check) {
    EXPECT_EQ(sh(dir.path(), c.check).code, 0) << "check: " << c.check;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, EhrChecks, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
