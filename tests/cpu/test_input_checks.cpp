// Inputs are checked where they enter (issue 30): text (UTF-8, byte-order
// marks, line ends, numbers, fields), numbers (ranges, float overflow),
// lengths against a model's position table, messages that name the right
// thing, and settings that would do nothing. One table, one row per case,
// run like tests/cpu/test_bad_inputs.cpp: the rotor binary in a fresh copy of
// a small world after the row's set-up, asserting the exit status, the
// message, that no file that existed before changed, and the row's check.
//
// A row: {name, set-up (sh), rotor arguments, exit status, message, check
// (sh, must exit 0; "" for none), the directory a successful run may write
// into ("" for none)}. A failing row's message is in stderr's
// last line, the only "rotor: error:" line; a succeeding row's message (when
// given) is somewhere in its stderr, which holds no error. Paths are relative
// to the case's directory, which holds:
//   data/{train,valid,test,test_long}.{en,de}  raw text of the numbers task
//   tiny.yaml, run/        a RoFormer translator (max_positions 256) and its run
//   rope8.yaml, rope8/     the same with max_positions 8, trained
//   learned.yaml, lrun/    learned positions, max_positions 10, data.max_len 9
//   mlm.yaml, mlm.txt, mlmrun/           a masked LM, its text and its run
//   cls.yaml, cls_{train,valid}.tsv, cls_spm.model, clsrun/
//                          a pair classifier (s1, s2, label: no/yes) and its run
//   reg.yaml               a regression on cls_train.tsv's columns (not trained)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "support/error_table.h"
#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::slurp;
using rotor::test::TempDir;

struct Case {
  const char* name;
  const char* setup;        // sh commands run in the case directory first ("" for none)
  const char* args;         // the rotor command line
  int code;                 // expected exit status
  const char* message;      // in the error line (code != 0) or in stderr (code 0)
  const char* check = "";   // sh test that must hold afterwards
  const char* writes = "";  // files under this path may change (a run it continues)
};

// A TSV of the classifier's columns whose row 3 (line 4) is `row`.
#define TSV_WITH(row) \
  "printf 's1\\ts2\\tlabel\\none\\ttwo\\tyes\\nthree\\tfour\\tno\\n" row "\\n' > x.tsv"

// clang-format off
const Case kCases[] = {
  // ---- 5: text checked where it enters ----
  {"tsv_invalid_utf8_in_training", TSV_WITH("bad \\377\\ttext\\tyes"),
   "train cls.yaml --set data.train=x.tsv --set output_dir=fresh", 1, "x.tsv:4: invalid UTF-8 at byte 5"},
  {"tsv_invalid_utf8_in_predict", TSV_WITH("ok\\t\\300\\200\\tno"),
   "predict --checkpoint clsrun --input x.tsv --output p.tsv", 1, "x.tsv:4: invalid UTF-8",
   "test ! -e p.tsv"},
  {"tsv_invalid_utf8_in_header", "printf 's1\\ts2\\tlab\\351l\\none\\ttwo\\tyes\\n' > x.tsv",
   "predict --checkpoint clsrun --input x.tsv", 1, "x.tsv:1: invalid UTF-8"},
  // Task multilabel reads the label column as lists ("yes,no").
  {"multilabel_unknown_label_in_valid", TSV_WITH("five\\tsix\\tyes,maybe"),
   "train cls.yaml --set task=multilabel --set data.valid=x.tsv --set output_dir=fresh", 1,
   "x.tsv:4: label \"maybe\" is not one of the run's 2 labels (data.labels, or else the labels of data.train)"},
  {"multilabel_empty_label_in_training", TSV_WITH("five\\tsix\\tyes,,no"),
   "train cls.yaml --set task=multilabel --set data.labels=[] --set data.train=x.tsv --set output_dir=fresh", 1,
   "x.tsv:4: an empty label in \"yes,,no\" (labels separated by \",\", data.label_separator)"},
  {"multilabel_empty_list_is_an_example", TSV_WITH("five\\tsix\\t"),
   "train cls.yaml --set task=multilabel --set data.labels=[] --set data.train=x.tsv --set output_dir=fresh", 0,
   "x.tsv: 3 examples, 0.67 labels each, 1 without a label",
   "test \"$(cat fresh/checkpoint_last/labels.txt)\" = \"$(printf 'no\\nyes')\"", "fresh"},
  {"multilabel_checkpoint_without_labels", "R train cls.yaml --set task=multilabel --set output_dir=mlrun 2>/dev/null && rm mlrun/checkpoints/best/labels.txt",
   "predict --checkpoint mlrun:best --input cls_valid.tsv --output p.tsv", 1,
   "mlrun/checkpoints/best/labels.txt: missing (a task-multilabel checkpoint holds its label vocabulary there)",
   "test ! -e p.tsv"},
  {"mlm_logits_invalid_utf8", "printf 'one two\\nthree \\377 four\\n' > x.txt",
   "mlm-logits --checkpoint mlmrun --input x.txt --output o.npy", 1, "x.txt:2: invalid UTF-8",
   "test ! -e o.npy"},
  {"tsv_byte_order_mark", "printf '\\357\\273\\277s1\\ts2\\tlabel\\none\\ttwo\\tyes\\nthree\\tfour\\tno\\n' > x.tsv",
   "predict --checkpoint clsrun --input x.tsv --output p.tsv", 0, "predict: 2 examples",
   "test $(wc -l < p.tsv) = 3"},
  {"tsv_cr_only_line_ends", "printf 's1\\ts2\\tlabel\\rone\\ttwo\\tyes\\rthree\\tfour\\tno\\rfive\\tsix\\tno\\r' > x.tsv",
   "predict --checkpoint clsrun --input x.tsv --output p.tsv", 0, "predict: 3 examples",
   "test $(wc -l < p.tsv) = 4"},
  {"tsv_crlf_line_ends", "printf 's1\\ts2\\tlabel\\r\\none\\ttwo\\tyes\\r\\n' > x.tsv",
   "predict --checkpoint clsrun --input x.tsv --output p.tsv", 0, "predict: 1 examples",
   "grep -q yes p.tsv || grep -q no p.tsv"},
  {"tsv_more_fields_than_header", TSV_WITH("five\\tsix\\tno\\textra"),
   "train cls.yaml --set data.train=x.tsv --set output_dir=fresh", 1,
   "x.tsv:4: 4 tab-separated fields, but the header has 3"},
  {"tsv_fewer_fields_than_header", TSV_WITH("five\\tno"),
   "predict --checkpoint clsrun --input x.tsv", 1, "x.tsv:4: 2 tab-separated fields, but the header has 3"},
  {"tsv_plus_sign_is_a_number", "sed 's/\\tno$/\\t+0.5/; s/\\tyes$/\\t-1.25/' cls_train.tsv > r.tsv",
   "train reg.yaml --set data.train=r.tsv --set data.valid=r.tsv --set output_dir=fresh", 0, "",
   "test -e fresh/checkpoint_last"},
  {"tsv_label_not_a_number", "sed '2,$s/\\t[a-z]*$/\\t0.5/; 3s/\\t0.5$/\\tnan/' cls_train.tsv > r.tsv",
   "train reg.yaml --set data.train=r.tsv --set output_dir=fresh", 1,
   "r.tsv:3: label \"nan\" is not a number"},
  // ---- 6: numbers checked where they enter ----
  {"tsv_label_beyond_float", "sed '2,$s/\\t[a-z]*$/\\t0.5/; 5s/\\t0.5$/\\t1e300/' cls_train.tsv > r.tsv",
   "train reg.yaml --set data.train=r.tsv --set output_dir=fresh", 1,
   "r.tsv:5: label \"1e300\" is not a number a 32-bit float holds", "test ! -e fresh/checkpoint_last"},
  {"config_max_len_b_negative", "", "train tiny.yaml --set decode.max_len_b=-1000 --set output_dir=fresh",
   1, "decode.max_len_b: expected an integer from 0 to 1000000, got \"-1000\"", "test ! -e fresh"},
  {"config_max_len_a_negative", "", "train tiny.yaml --set decode.max_len_a=-2 --set output_dir=fresh",
   1, "decode.max_len_a: expected a number from 0 to 1000"},
  {"config_lenpen_huge", "", "train tiny.yaml --set decode.lenpen=1e9 --set output_dir=fresh", 1,
   "decode.lenpen: expected a number from -10 to 10"},
  {"config_beam_huge", "", "train tiny.yaml --set decode.beam=5000 --set output_dir=fresh", 1,
   "decode.beam: expected an integer from 1 to 1024"},
  {"config_lr_beyond_float", "", "train tiny.yaml --set optim.lr=1e300 --set output_dir=fresh", 1,
   "optim.lr: expected a number > 0, got \"1e300\", beyond the range of a 32-bit float"},
  {"config_loss_scale_beyond_float", "", "train tiny.yaml --set train.loss_scale=1e39 --set output_dir=fresh",
   1, "train.loss_scale: expected a number > 0, got \"1e39\", beyond the range"},
  {"config_max_positions_one", "", "train tiny.yaml --set model.max_positions=1 --set output_dir=fresh",
   1, "model.max_positions: expected an integer >= 2"},
  // ---- 8: lengths against the positions ----
  {"learned_max_len_equal_to_positions", "",
   "train learned.yaml --set data.max_len=10 --set output_dir=fresh", 1,
   "data.max_len: 10 tokens + eos exceeds model.max_positions = 10 (learned positions)", "test ! -e fresh"},
  {"sinusoidal_max_len_over_positions", "",
   "train learned.yaml --set model.position=sinusoidal --set data.max_len=12 --set output_dir=fresh", 1,
   "data.max_len: 12 tokens + eos exceeds model.max_positions = 10 (sinusoidal positions)"},
  {"learned_valid_filtered_and_logged", "",
   "train learned.yaml --set data.valid=data/test_long --set output_dir=fresh", 0,
   "data.valid: dropped 4 sentence pairs of more than model.max_positions - 1 = 9 tokens",
   "test -e fresh/checkpoint_last"},
  {"learned_prepared_valid_too_long",
   "mkdir prep && $ROTOR prepare --spm lrun/spm.model --src data/test_long.en --tgt data/test_long.de "
   "--output-prefix prep/valid --max-len 0",
   "train learned.yaml --set data.valid=prep/valid --set data.spm_model=lrun/spm.model --set output_dir=fresh",
   1, "data.valid: prep/valid.src: sentence 1 has ", "test ! -e fresh/checkpoint_last"},
  {"translate_learned_rejects_long_line",
   "printf 'one two\\none two three four five six seven eight nine ten eleven\\n' > long.en",
   "translate --checkpoint lrun --input long.en --output out.de", 1,
   "long.en:2: ", "test ! -e out.de"},
  {"translate_rope_never_truncates",
   "p='nine hundred ninety-nine thousand nine hundred ninety-nine nine hundred ninety-nine "
   "thousand nine hundred'; printf '%s one\\n%s two\\n' \"$p\" \"$p\" > long.en",
   "translate --checkpoint rope8 --input long.en --output out.de --beam 1 --nbest 1", 0, "",
   "test $(wc -l < out.de) = 2 && test \"$(sed -n 1p out.de | cut -f3-)\" != \"$(sed -n 2p out.de | cut -f3-)\""},
  // ---- 9: messages that name the right thing ----
  {"data_train_is_a_directory", "", "train tiny.yaml --set data.train=data --set output_dir=fresh", 1,
   "data.train: data is a directory; name the prefix of the files in it (data/train for "
   "data/train.en and data/train.de)"},
  {"mlm_text_is_a_directory", "", "train mlm.yaml --set data.train=data --set output_dir=fresh", 1,
   "data.train: data is a directory; name a text file"},
  {"yaml_nested_too_deeply", "python3 -c \"print('a: ' + '[' * 100000)\" > deep.yaml",
   "train deep.yaml", 1, "deep.yaml:2:1: invalid YAML: nested too deeply"},
  {"config_is_dev_zero", "", "train /dev/zero", 1, "/dev/zero: it is a character device"},
  {"translate_mlm_checkpoint", "", "translate --checkpoint mlmrun --input data/test.en", 1,
   "is a task-mlm checkpoint; translate runs task-translation models"},
  {"init_from_is_a_file", "", "train cls.yaml --set model.init_from=cls.yaml --set data.spm_model= "
   "--set output_dir=fresh", 1, "model.init_from: cls.yaml is a file; name the Hugging Face model directory"},
  {"resume_without_best_and_test_set", "rm -r run/checkpoints/best",
   "train tiny.yaml --resume --set train.max_updates=6 --set data.test=data/test", 1,
   "checkpoints/best is missing, and data.test is scored by it", "test ! -e run/checkpoints/step_6"},
  {"resume_without_best_no_test_set", "rm -r run/checkpoints/best",
   "train tiny.yaml --resume --set train.max_updates=6", 0, "checkpoints/best is missing; the next",
   "test -e run/checkpoints/step_6", "run/"},
  // ---- 10: settings that would do nothing ----
  {"best_metric_without_valid", "",
   "train tiny.yaml --set data.valid= --set train.valid_metrics=[loss,chrf] --set train.best_metric=chrf "
   "--set output_dir=fresh", 1,
   "train.best_metric: chrf picks checkpoints/best by validation, but data.valid is empty", "test ! -e fresh"},
  {"patience_without_valid", "", "train tiny.yaml --set data.valid= --set train.patience=3 --set output_dir=fresh",
   1, "train.patience: 3 counts validations without improvement, but data.valid is empty"},
  {"mlm_accuracy_best_without_valid", "", "train mlm.yaml --set train.best_metric=accuracy --set output_dir=fresh",
   1, "train.best_metric: accuracy picks checkpoints/best by validation"},
};
// clang-format on

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

// Paths (relative to `root`) -> contents, for every regular file below it.
rotor::test::RunResult sh(const std::string& dir, const std::string& command) {
  return rotor::test::run_script(dir, command, 600);
}

class InputChecks : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    base_ = new TempDir();
    const std::string b = base_->path();
    const std::string r = std::string(ROTOR_BINARY) + " ";
    auto must = [&](const std::string& command) {
      const auto o = sh(b, command);
      ASSERT_EQ(o.code, 0) << command << "\n" << o.err;
    };
    must(r + rotor::test::synth_args("data", {300, 30, 20, 5, 4}));
    using rotor::test::tiny_translation;
    tiny_translation().write(b + "/tiny.yaml");
    tiny_translation("data", "rope8").set("model.max_positions", "8").write(b + "/rope8.yaml");
    tiny_translation("data", "lrun")
        .set("model.position", "learned")
        .set("model.max_positions", "10")
        .set("data.max_len", "9")
        .write(b + "/learned.yaml");
    rotor::test::tiny_mlm("mlm.txt", "", "mlmrun")
        .erase("data.valid")
        .set("train.max_updates", "2")
        .set("train.valid_interval", "0")
        .erase("train.save_interval")
        .write(b + "/mlm.yaml");
    rotor::test::write_mlm_text(b + "/data", b + "/mlm.txt");
    // The classifier's data: pairs of English and German sentences, "yes"
    // when they mean the same (every other line shifted otherwise).
    {
      std::ifstream en(b + "/data/train.en"), de(b + "/data/train.de");
      std::ofstream train(b + "/cls_train.tsv"), valid(b + "/cls_valid.tsv");
      train << "s1\ts2\tlabel\n";
      valid << "s1\ts2\tlabel\n";
      std::string e, d, prev = "null";
      for (int i = 0; std::getline(en, e) && std::getline(de, d); ++i) {
        const bool same = i % 2 == 0;
        (i % 5 == 0 ? valid : train)
            << e << "\t" << (same ? d : prev) << "\t" << (same ? "yes" : "no") << "\n";
        prev = d;
      }
    }
    must(r +
         "spm-train --input data/train.en --input data/train.de --model-prefix cls_spm "
         "--vocab-size 80 --user-defined-symbols '[MASK],[CLS],[SEP]'");
    rotor::test::tiny_classification("cls_train.tsv", "cls_valid.tsv", "cls_spm.model", "clsrun")
        .write(b + "/cls.yaml");
    rotor::test::tiny_classification("cls_train.tsv", "", "cls_spm.model", "regrun")
        .erase("data.valid")
        .set("data.labels", "[]")
        .set("data.regression", "true")
        .write(b + "/reg.yaml");
    for (const char* config : {"tiny.yaml", "rope8.yaml", "learned.yaml", "mlm.yaml", "cls.yaml"})
      must(r + "train " + config);
  }
  static void TearDownTestSuite() {
    delete base_;
    base_ = nullptr;
  }

 protected:
  static TempDir* base_;
};
TempDir* InputChecks::base_ = nullptr;

TEST_P(InputChecks, CheckedWhereItEnters) {
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
    EXPECT_NE(o.err.find(c.message), std::string::npos)
        << "expected \"" << c.message << "\" in: " << o.err;
  }
  rotor::test::expect_unchanged(before, rotor::test::snapshot(dir.path()), c.writes);
  if (*c.check) {
    EXPECT_EQ(sh(dir.path(), c.check).code, 0) << "check: " << c.check;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, InputChecks, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
