// Nothing a user does loses a run: bad configs, data, checkpoints and
// arguments, each a line of one table. Every case runs the rotor binary in a
// fresh copy of a small world (synthetic data, a config, a trained run with
// two checkpoints, a masked-LM text) after the case's own shell set-up, and
// asserts the exit code, ONE line on stderr that starts with "rotor: error:"
// and holds the expected words, and that no file that existed before the
// command changed (checksums of the whole tree). Faults (kill -9 at chosen
// points of a save, a full disk) follow the table.
//
// A new case is one line: {name, set-up (sh), rotor arguments, what the
// message must contain}. In set-up and arguments, paths are relative to the
// case's directory, which holds:
//   data/{train,valid,test}.{en,de}   raw text of the numbers task
//   tiny.yaml                          a translation config (output_dir: run)
//   run/                               a run of it: checkpoints step_2, step_4
//   mlm.yaml, mlm.txt                  a masked-LM config and its text
//   small.model                        a tokenizer of 60 pieces
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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
  const char* setup;    // sh commands run in the case directory first ("" for none)
  const char* args;     // the rotor command line
  const char* message;  // the one error line must contain this
  int code = 1;         // expected exit code
};

// clang-format off
const Case kCases[] = {
  // ---- configs ----
  {"config_missing", "", "train nothere.yaml", "nothere.yaml"},
  {"config_is_a_directory", "mkdir cfgdir", "train cfgdir", "cfgdir"},
  {"config_yaml_syntax", "printf 'model: [1, 2\\n' > bad.yaml", "train bad.yaml", "bad.yaml"},
  {"config_unknown_key", "printf 'modle:\\n  d_model: 3\\n' > bad.yaml", "train bad.yaml",
   "bad.yaml:1: unknown key modle (did you mean model?)"},
  {"config_wrong_type", "", "train tiny.yaml --set model.d_model=abc",
   "model.d_model: expected a positive integer"},
  {"config_heads_do_not_divide", "", "train tiny.yaml --set model.n_heads=5",
   "5 heads do not divide model.d_model = 32"},
  {"config_negative_lr", "", "train tiny.yaml --set optim.lr=-1", "optim.lr"},
  {"config_nan_lr", "", "train tiny.yaml --set optim.lr=.nan", "optim.lr"},
  {"config_dropout_out_of_range", "", "train tiny.yaml --set model.dropout=1.5", "model.dropout"},
  {"config_override_without_value", "", "train tiny.yaml --set model.d_model", "--set"},
  {"config_override_unknown_key", "", "train tiny.yaml --set train.max_update=3",
   "unknown key train.max_update (did you mean train.max_updates?)"},
  {"config_empty_output_dir", "", "train tiny.yaml --set output_dir=''", "output_dir"},
  {"config_rope_odd_head_size", "", "train tiny.yaml --set model.d_model=18 --set model.n_heads=2",
   "rope rotates pairs of features"},
  {"config_huge_model", "", "train tiny.yaml --set model.d_model=2000000000 --set model.n_heads=1",
   "more than rotor can hold"},
  {"config_bleu_for_mlm", "", "train mlm.yaml --set train.valid_metrics=[loss,bleu]",
   "bleu is a score of task translation; task mlm has none"},
  {"config_best_metric_not_computed", "", "train tiny.yaml --set train.best_metric=chrf",
   "chrf is not computed"},
  {"config_metric_twice", "", "train tiny.yaml --set train.valid_metrics=[loss,loss]",
   "listed twice"},
  {"config_bad_rendezvous", "", "train tiny.yaml --set dist.rendezvous=tcp:x", "dist.rendezvous"},
  {"config_no_gpu", "", "train tiny.yaml --set device=cuda:7", "cuda"},
  // ---- data ----
  {"data_train_missing", "", "train tiny.yaml --set data.train=nowhere/train",
   "data.train: found neither prepared data"},
  {"data_one_side_missing", "rm data/train.de", "train tiny.yaml --set output_dir=fresh",
   "data.train: found neither prepared data"},
  {"data_valid_missing", "", "train tiny.yaml --set data.valid=data/nothing --set output_dir=fresh",
   "data.valid"},
  {"data_empty_corpus", ": > data/train.en; : > data/train.de",
   "train tiny.yaml --set output_dir=fresh --set data.spm_model=run/spm.model", "empty"},
  {"data_invalid_utf8", "printf 'ok\\n\\377\\376 bad\\n' > data/bad.en; cp data/train.de data/bad.de",
   "train tiny.yaml --set output_dir=fresh --set data.train=data/bad --set data.spm_model=run/spm.model",
   "data/bad.en:2"},
  {"data_truncated_index",
   "mkdir prep && cp run/data/train.* prep/ && head -c 40 run/data/train.tgt.idx > prep/train.tgt.idx",
   "train tiny.yaml --set output_dir=fresh --set data.train=prep/train --set data.spm_model=run/spm.model",
   "prep/train.tgt"},
  {"data_spm_not_a_model", "printf 'not a model' > fake.model",
   "train tiny.yaml --set output_dir=fresh --set data.spm_model=fake.model", "fake.model"},
  // Without its fingerprint (which names the other tokenizer: test_fingerprints),
  // the ids themselves are checked.
  {"data_ids_outside_the_tokenizer", "rm run/data/train.fingerprint.json",
   "train tiny.yaml --set output_dir=fresh --set data.train=run/data/train --set data.valid='' "
   "--set data.spm_model=small.model",
   "outside the vocabulary"},
  {"data_mlm_text_missing", "", "train mlm.yaml --set data.train=none.txt", "data.train"},
  // ---- checkpoints ----
  {"ckpt_truncated_weights", "head -c 100 run/checkpoints/step_4/model.safetensors > t && "
   "cat t > run/checkpoints/step_4/model.safetensors && rm t",
   "train tiny.yaml --resume --set train.max_updates=6", "model.safetensors"},
  {"ckpt_corrupt_state", "printf '{\"step\": 4,' > run/checkpoints/step_4/trainer_state.json",
   "train tiny.yaml --resume --set train.max_updates=6", "trainer_state.json"},
  {"ckpt_state_wrong_type",
   "sed -i 's/\"loss_scale\": [0-9.e+-]*/\"loss_scale\": \"big\"/' run/checkpoints/step_4/trainer_state.json",
   "train tiny.yaml --resume --set train.max_updates=6", "\"loss_scale\" is a string, expected a number"},
  {"ckpt_state_negative_step",
   "sed -i 's/\"step\": [0-9]*/\"step\": -4/' run/checkpoints/step_4/trainer_state.json",
   "train tiny.yaml --resume --set train.max_updates=6", "\"step\" is -4, outside"},
  {"ckpt_state_of_another_format",
   "sed -i 's/rotor-trainer-state-1/rotor-trainer-state-2/' run/checkpoints/step_4/trainer_state.json",
   "train tiny.yaml --resume --set train.max_updates=6", "this rotor reads rotor-trainer-state-1"},
  {"ckpt_missing_optimizer", "rm run/checkpoints/step_4/optimizer.safetensors",
   "train tiny.yaml --resume --set train.max_updates=6", "optimizer.safetensors"},
  {"ckpt_other_model_shape", "", "train tiny.yaml --resume --set model.d_ff=48 --set train.max_updates=6",
   "was trained with model key \"d_ff: 64\", the config has \"d_ff: 48\""},
  {"ckpt_nan_weights",
   "f=run/checkpoints/step_4/model.safetensors; printf '\\377\\377\\377\\377' | "
   "dd of=$f bs=1 seek=$(( $(stat -c%s $f) - 4 )) conv=notrunc 2>/dev/null",
   "translate --checkpoint run --input data/test.en", "holds a non-finite value"},
  {"ckpt_translate_missing", "", "translate --checkpoint nowhere --input data/test.en",
   "nowhere: no such checkpoint or run directory"},
  {"ckpt_translate_no_best", "", "translate --checkpoint run/checkpoints/step_2:best --input data/test.en",
   "holds no best checkpoint"},
  {"ckpt_average_into_input", "", "average run/checkpoints/step_2 run/checkpoints/step_4 --output run/checkpoints/step_4",
   "overlaps the input"},
  {"ckpt_average_over_training_checkpoint", "",
   "average run/checkpoints/step_2 run/checkpoints/step_4 --output run/checkpoint_last",
   "overlaps the input"},
  {"ckpt_export_translation_model", "", "export --checkpoint run --format hf --output hf",
   "mlm"},
  // ---- outputs over what training owns ----
  {"out_translate_into_other_checkpoint", "",
   "translate --checkpoint run/checkpoints/step_4 --input data/test.en --output run/checkpoints/step_2/model.safetensors",
   "lies in the checkpoint"},
  {"out_translate_over_run_metrics", "",
   "translate --checkpoint run --input data/test.en --output run/metrics.jsonl",
   "(its metrics.jsonl)"},
  {"out_spm_over_run_tokenizer", "",
   "spm-train --input data/train.en --model-prefix run/spm --vocab-size 60", "(its spm.model)"},
  {"out_average_as_a_step", "",
   "average run/checkpoints/step_2 --output run/checkpoints/step_9", "(its checkpoints/step_9)"},
  {"out_prepare_over_another_tools_corpus", "printf 'theirs' > mega.bin && printf 'theirs' > mega.idx",
   "prepare --spm small.model --src data/train.en --output-prefix mega", "is not a rotor corpus index"},
  {"out_spm_over_a_foreign_model", "printf 'theirs' > theirs.model",
   "spm-train --input data/train.en --model-prefix theirs --vocab-size 60", "is not a tokenizer rotor reads"},
  {"out_synth_over_user_data", "mkdir mine && printf 'my own\\n' > mine/train.en",
   "synth numbers-en-de --output mine", "is not an earlier output of rotor synth"},
  {"out_synth_over_edited_output", "printf 'edited\\n' >> data/valid.de",
   "synth numbers-en-de --output data --seed 5", "changed since rotor synth wrote it"},
  // ---- runs ----
  {"run_reused_without_resume", "", "train tiny.yaml", "holds an earlier run"},
  {"run_resume_and_overwrite", "", "train tiny.yaml --resume --overwrite", "exclude each other"},
  {"run_output_dir_is_a_checkpoint", "", "train tiny.yaml --set output_dir=run/checkpoints/step_2",
   "is the checkpoint"},
  {"run_output_dir_in_a_run", "", "train tiny.yaml --set output_dir=run/data", "(its data)"},
  {"run_overwrite_would_move_init_from", "R train mlm.yaml >/dev/null 2>&1",
   "train mlm.yaml --overwrite --set model.init_from=mlmrun/checkpoint_last",
   "which --overwrite moves aside"},
  {"run_overwrite_would_move_spm_model", "",
   "train tiny.yaml --overwrite --set data.spm_model=run/checkpoints/step_4/spm.model",
   "which --overwrite moves aside"},
  {"run_overwrite_from_own_config_edited", "echo '# my note' >> run/config.yaml",
   "train run/config.yaml --overwrite", "not a resolved config that rotor wrote"},
  {"run_fresh_over_a_users_config", "mkdir own && printf 'name: mine\\n' > own/config.yaml",
   "train tiny.yaml --set output_dir=own", "which is not a config that rotor resolved"},
  {"run_fresh_over_a_users_tokenizer", "mkdir own && printf 'theirs' > own/spm.model",
   "train tiny.yaml --set output_dir=own", "a tokenizer that rotor did not train here"},
  {"run_config_in_output_dir", "mkdir own && cp tiny.yaml own/config.yaml && echo '# mine' >> own/config.yaml",
   "train own/config.yaml --set output_dir=own", "would replace the config file"},
  // ---- the command line ----
  {"cli_unknown_command", "", "trian tiny.yaml", "unknown command 'trian'", 2},
  {"cli_train_without_config", "", "train", "config is required", 2},
  {"cli_beam_zero", "", "translate --checkpoint run --input data/test.en --beam 0", "--beam"},
  {"cli_lenpen_nan", "", "translate --checkpoint run --input data/test.en --lenpen nan", "--lenpen"},
  {"cli_input_is_a_directory", "", "translate --checkpoint run --input data", "data"},
  {"cli_bleu_ref_missing", "", "bleu --ref nothere.de data/test.de", "nothere.de"},
};
// clang-format on

// GoogleTest prints a case by its name (not its bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

// Paths (relative to `root`) -> contents, for every regular file below it.
using Outcome = rotor::test::RunResult;

Outcome sh(const std::string& dir, const std::string& command) {
  return rotor::test::run_script(dir, command, 600);
}

class BadInputs : public ::testing::TestWithParam<Case> {
 public:
  // The world every case starts from, made once.
  static void SetUpTestSuite() {
    base_ = new TempDir();
    const std::string b = base_->path();
    const std::string rotor = ROTOR_BINARY;
    ASSERT_EQ(sh(b, rotor + " synth numbers-en-de --output data --train 300 --valid 30 --test 20 "
                            "--test-long 5 --seed 4")
                  .code,
              0);
    rotor::test::tiny_translation().write(b + "/tiny.yaml");
    // 2 updates, never validated.
    rotor::test::tiny_mlm("mlm.txt", "", "mlmrun")
        .erase("seed")
        .erase("data.valid")
        .set("train.max_updates", "2")
        .erase("train.log_interval")
        .set("train.valid_interval", "0")
        .erase("train.save_interval")
        .write(b + "/mlm.yaml");
    rotor::test::write_mlm_text(b + "/data", b + "/mlm.txt");
    ASSERT_EQ(sh(b, rotor + " spm-train --input data/train.en --input data/train.de "
                            "--model-prefix small --vocab-size 60")
                  .code,
              0);
    const Outcome t = sh(b, rotor + " train tiny.yaml");
    ASSERT_EQ(t.code, 0) << t.err;
  }
  static void TearDownTestSuite() {
    delete base_;
    base_ = nullptr;
  }

 protected:
  static TempDir* base_;
};
TempDir* BadInputs::base_ = nullptr;

TEST_P(BadInputs, OneClearLineAndNothingLost) {
  const Case& c = GetParam();
  ASSERT_NE(base_, nullptr);
  TempDir dir;
  rotor::test::copy_world(base_->path(), dir);
  if (*c.setup) {
    ASSERT_EQ(sh(dir.path(), c.setup).code, 0) << "set-up: " << c.setup;
  }
  const auto before = rotor::test::snapshot(dir.path());
  const Outcome o = sh(dir.path(), std::string(ROTOR_BINARY) + " " + c.args);
  EXPECT_EQ(o.code, c.code) << c.args << "\nstderr: " << o.err;
  // The error is the last line, the only one of its kind, and one line
  // (progress lines of a run that had started may precede it).
  rotor::test::expect_error_line(o.err, c.message);
  rotor::test::expect_unchanged(before, rotor::test::snapshot(dir.path()));
}

INSTANTIATE_TEST_SUITE_P(Table, BadInputs, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- faults -------------------------------------------------------------------

class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sh(dir_.path(), std::string(ROTOR_BINARY) +
                                  " synth numbers-en-de --output data --train 300 --valid 30 "
                                  "--test 20 --test-long 5 --seed 4")
                  .code,
              0);
    rotor::test::tiny_translation()
        .set("train.max_updates", "8")
        .set("train.save_interval", "1")
        .set("train.keep_last", "2")
        .write(dir_ / "tiny.yaml");
  }
  Outcome train(const std::string& extra, const std::string& env = "") {
    return sh(dir_.path(), env + " " + ROTOR_BINARY + " train tiny.yaml " + extra);
  }
  // The run's state is consistent: checkpoint_last names a complete
  // checkpoint, every step_N holds all its files, no temporary is left.
  void expect_consistent(const std::string& run) {
    const fs::path last = fs::path(run) / "checkpoint_last";
    if (fs::exists(fs::symlink_status(last))) {
      EXPECT_TRUE(fs::exists(last / "model.safetensors")) << "checkpoint_last dangles";
    }
    for (const auto& e : fs::directory_iterator(run + "/checkpoints")) {
      const std::string name = e.path().filename().string();
      if (name.rfind("step_", 0) != 0 || name.find('.') != std::string::npos) continue;
      for (const char* f : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"}) {
        EXPECT_TRUE(fs::exists(e.path() / f)) << name << " lacks " << f;
      }
    }
  }
  // The last line of stderr (the error of a run that had started logging).
  static std::string last_line(const std::string& err) {
    if (err.empty()) return err;
    const size_t start = err.rfind('\n', err.size() - 2);
    return err.substr(start == std::string::npos ? 0 : start + 1);
  }
  TempDir dir_;
};

std::vector<std::string> temporaries(const std::string& root) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (n.find(".tmp-") != std::string::npos || n.find(".old-") != std::string::npos)
      found.push_back(e.path().string());
  }
  return found;
}

TEST_F(Faults, KillDuringSaveOrPruningLosesNothingAndResumes) {
  for (const char* point : {"published", "pruning"}) {
    SCOPED_TRACE(point);
    const std::string out = dir_ / (std::string("run_") + point);
    const Outcome killed = train("--set output_dir=" + out + " --set train.max_updates=4",
                                 std::string("ROTOR_TEST_KILL_AT=") + point);
    EXPECT_EQ(killed.code, 128 + 9) << killed.err;
    expect_consistent(out);
    const Outcome resumed = train("--set output_dir=" + out + " --resume");
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    expect_consistent(out);
    EXPECT_TRUE(temporaries(out).empty()) << temporaries(out).front();
    EXPECT_TRUE(fs::exists(out + "/checkpoints/step_8/model.safetensors"));
  }
}

// A disk that fills up mid-save: the save fails with one line naming the
// file system's complaint, the last good checkpoint stays whole and current,
// and no temporary file is left behind.
TEST_F(Faults, FullDiskKeepsTheLastGoodCheckpoint) {
  const std::string mnt = dir_ / "small";
  fs::create_directory(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=600k") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount(path.c_str()); }
  } unmount{mnt};
  // The tokenizer and binarized data live outside; checkpoints (~340 KiB each
  // with the optimizer) fit once on the 600 KiB disk but not twice.
  ASSERT_EQ(train("--set output_dir=" + (dir_ / "prep") + " --set train.max_updates=1").code, 0);
  const Outcome o =
      train("--set output_dir=" + mnt + "/run --set data.spm_model=" + (dir_ / "prep/spm.model") +
            " --set data.train=" + (dir_ / "prep/data/train") +
            " --set data.valid=" + (dir_ / "prep/data/valid") + " --set train.keep_last=5");
  EXPECT_NE(o.code, 0);
  EXPECT_EQ(last_line(o.err).rfind("rotor: error: ", 0), 0u) << o.err;
  EXPECT_NE(last_line(o.err).find("No space left on device"), std::string::npos) << o.err;
  expect_consistent(mnt + "/run");
  EXPECT_TRUE(temporaries(mnt + "/run").empty()) << temporaries(mnt + "/run").front();
}

}  // namespace
