// Nothing a user points rotor at is destroyed: outputs that are FIFOs,
// character devices or symbolic links, inputs that are not regular files, and
// the operating system's limits (a full device, a closed pipe, `ulimit -f`).
// Each case is one line of a table, run as a shell script in a fresh copy of a
// small world, under a timeout (a hang is a failure, not a stuck test).
//
// A case: {name, script, expected exit code, what stderr's last line must
// contain ("" when the command must succeed and print no error), a check}.
// In the script and the check, R is the rotor binary, NUL a character device
// that discards what it is given (a node made with mknod here when the system
// allows it, else /dev/null), and paths are relative to the case's directory:
//   data/{train,valid,test}.{en,de}   raw text of the numbers task (test: 20 lines)
//   tiny.yaml, run/                   a translation config and its trained run
//   mlm.yaml, mlm.txt, mlmrun/        a masked-LM config, its text and its run
//   hf/                               mlmrun exported as a Hugging Face directory
//   small.model                       a tokenizer of 60 pieces
// The check is a shell test of what must hold afterwards (a FIFO still a
// FIFO, a link still pointing where it did and its target holding the
// output). NUL's inode, type and device numbers are compared before and
// after every case, no file of the world may change or go, and no temporary
// file may be left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/error_table.h"
#include "support/run_rotor.h"
#include "support/test_util.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::slurp;
using rotor::test::TempDir;

struct Case {
  const char* name;
  const char* script;   // sh, run in the case directory; its exit status is the case's
  int code;             // expected exit status
  const char* message;  // stderr's last line holds it ("" : no error line at all)
  const char* check;    // sh test that must succeed afterwards ("" for none)
};

// A translation into a file: 20 lines of data/test.en.
#define TRANSLATE "R translate --checkpoint run --input data/test.en --beam 1 --device cpu"

// clang-format off
const Case kCases[] = {
  // ---- outputs that are not regular files are written into, not replaced ----
  {"translate_to_fifo", "mkfifo out; cat out > got & " TRANSLATE " --output out; s=$?; wait; exit $s",
   0, "", "test -p out && [ $(wc -l < got) -eq 20 ]"},
  {"translate_to_char_device", TRANSLATE " --output NUL", 0, "", "test -c NUL"},
  {"translate_to_symlink", "mkdir sub && ln -s sub/t.txt out.txt && echo old > sub/t.txt && "
   TRANSLATE " --output out.txt", 0, "",
   "test -L out.txt && [ $(readlink out.txt) = sub/t.txt ] && [ $(wc -l < sub/t.txt) -eq 20 ]"},
  {"translate_to_dangling_symlink", "mkdir sub && ln -s sub/new.txt out.txt && "
   TRANSLATE " --output out.txt", 0, "",
   "test -L out.txt && [ $(wc -l < sub/new.txt) -eq 20 ]"},
  {"translate_to_symlink_to_device", "ln -s NUL out.txt && " TRANSLATE " --output out.txt", 0, "",
   "test -L out.txt && [ $(readlink out.txt) = NUL ]"},
  {"translate_keeps_file_mode", "echo old > out.txt && chmod 600 out.txt && "
   TRANSLATE " --output out.txt", 0, "", "[ $(stat -c %a out.txt) = 600 ] && [ $(wc -l < out.txt) -eq 20 ]"},
  {"translate_to_socket_refused",
   "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" && "
   TRANSLATE " --output sock", 1, "sock: is a socket", "test -S sock"},
  {"translate_to_full_device", TRANSLATE " --output /dev/full", 1,
   "cannot write /dev/full: No space left on device", ""},
  {"average_to_new_symlinked_dir", "ln -s avgdir avg && "
   "R average run/checkpoints/step_2 --output avg", 0, "",
   "test -L avg && [ $(readlink avg) = avgdir ] && test -f avgdir/model.safetensors"},
  {"average_to_symlink_refused", "mkdir avgdir && ln -s avgdir avg && "
   "R average run/checkpoints/step_2 --output avg", 1, "avg: is a symbolic link", 
   "test -L avg && [ $(readlink avg) = avgdir ] && ! test -e avgdir/model.safetensors"},
  {"average_to_fifo_refused", "mkfifo avg && R average run/checkpoints/step_2 --output avg", 1,
   "avg: exists and is not a directory", "test -p avg"},
  {"export_to_symlinked_dir", "mkdir exp && ln -s exp hfout && "
   "R export --checkpoint mlmrun --output hfout", 0, "",
   "test -L hfout && test -f exp/config.json && test -f exp/model.safetensors"},
  {"export_file_is_symlink", "mkdir -p out sub && ln -s ../sub/c.json out/config.json && "
   "R export --checkpoint mlmrun --output out", 0, "",
   "test -L out/config.json && grep -q model_type sub/c.json"},
  {"mlm_logits_to_fifo", "mkfifo out.npy; cat out.npy > got & R mlm-logits --checkpoint mlmrun "
   "--input mlm.txt --output out.npy --device cpu; s=$?; wait; exit $s", 0, "",
   "test -p out.npy && head -c 6 got | grep -q NUMPY"},
  {"mlm_logits_to_symlink", "mkdir sub && ln -s sub/l.safetensors out.safetensors && "
   "R mlm-logits --checkpoint mlmrun --input mlm.txt --output out.safetensors --device cpu", 0, "",
   "test -L out.safetensors && test -s sub/l.safetensors"},
  {"spm_train_to_fifo_and_device", "mkfifo p.model; ln -s NUL p.vocab; cat p.model > got & "
   "R spm-train --input data/train.en --input data/train.de --model-prefix p --vocab-size 60; "
   "s=$?; wait; exit $s", 0, "",
   "test -p p.model && test -s got && test -L p.vocab && [ $(readlink p.vocab) = NUL ]"},
  {"prepare_to_symlink_and_fifo", "mkdir sub && ln -s sub/o.bin o.bin && mkfifo o.idx && "
   "(cat o.idx > got &) && R prepare --spm small.model --src data/test.en --output-prefix o; "
   "s=$?; sleep 0.2; exit $s", 0, "",
   "test -L o.bin && test -s sub/o.bin && test -p o.idx && test -s got"},
  {"synth_file_is_symlink", "mkdir -p d sub && ln -s ../sub/t.en d/train.en && mkfifo d/valid.de && "
   "(cat d/valid.de > got &) && R synth numbers-en-de --output d --train 30 --valid 5 --test 5 "
   "--test-long 2; s=$?; sleep 0.2; exit $s", 0, "",
   "test -L d/train.en && [ $(wc -l < sub/t.en) -eq 30 ] && test -p d/valid.de && "
   "[ $(wc -l < got) -eq 5 ]"},
  {"bench_json_to_device", "R bench train tiny.yaml --steps 1 --warmup 0 --json NUL >/dev/null", 0,
   "", "test -c NUL"},

  // ---- inputs that are not regular files: refused at once, never waited on ----
  {"train_config_fifo", "mkfifo cfg.yaml && R train cfg.yaml", 1,
   "cannot read cfg.yaml: it is a FIFO", "test -p cfg.yaml"},
  {"train_config_dev_zero", "ln -s /dev/zero cfg.yaml && R train cfg.yaml", 1,
   "cannot read cfg.yaml: it is a character device", "test -L cfg.yaml"},
  {"train_config_over_the_limit", "head -c 17000000 /dev/zero | tr '\\0' '#' > cfg.yaml && "
   "R train cfg.yaml --set output_dir=big", 1,
   "cannot read cfg.yaml: 17000000 bytes or more, beyond the limit of 16777216 bytes", "! test -e big"},
  {"init_from_config_json_dev_zero", "cp -r hf hf2 && rm hf2/config.json && "
   "ln -s /dev/zero hf2/config.json && "
   "R train mlm.yaml --set output_dir=r2 --set model.init_from=hf2", 1,
   "hf2/config.json: it is a character device", ""},
  {"init_from_safetensors_fifo", "cp -r hf hf2 && rm hf2/model.safetensors && "
   "mkfifo hf2/model.safetensors && "
   "R train mlm.yaml --set output_dir=r2 --set model.init_from=hf2", 1,
   "hf2/model.safetensors", "test -p hf2/model.safetensors"},
  {"bench_config_fifo", "mkfifo cfg.yaml && R bench train cfg.yaml", 1,
   "cfg.yaml: is a FIFO", "test -p cfg.yaml"},
  {"bleu_ref_dev_zero", "R bleu -r /dev/zero data/test.de", 1,
   "/dev/zero: is a character device", ""},
  {"chrf_ref_from_fifo", "mkfifo ref; cat data/test.de > ref & R chrf -r ref data/test.de -b > score; "
   "s=$?; wait; exit $s", 0, "", "test -p ref && grep -q 100.00 score"},
  {"chrf_hyp_no_newline", "head -c 17000000 /dev/zero | R chrf -r data/test.de", 1,
   "<stdin>:1: a line longer than 16777216 bytes", ""},
  {"translate_input_dev_zero", "R translate --checkpoint run --input /dev/zero --device cpu", 1,
   "/dev/zero: a line longer than 16777216 bytes", ""},
  {"predict_input_fifo", "mkfifo in.tsv && R predict --checkpoint run --input in.tsv", 1,
   "in.tsv: is a FIFO", "test -p in.tsv"},
  {"eval_input_fifo", "mkfifo in.txt && R eval --checkpoint mlmrun --input in.txt", 1,
   "in.txt: is a FIFO", "test -p in.txt"},
  {"eval_input_dev_zero", "R eval --checkpoint mlmrun --input /dev/zero", 1,
   "/dev/zero: is a character device", ""},
  // eval binarizes its input under TMPDIR and removes what it wrote there.
  {"eval_leaves_no_scratch", "mkdir tmp && TMPDIR=$PWD/tmp R eval --checkpoint mlmrun "
   "--input mlm.txt --json --device cpu > out.json", 0, "",
   "test -z \"$(ls -A tmp)\" && grep -q masked_tokens out.json"},
  {"prepare_src_dev_zero", "R prepare --spm small.model --src /dev/zero --output-prefix o", 1,
   "/dev/zero: is a character device", "! test -e o.bin"},
  {"spm_train_input_fifo", "mkfifo in.txt && R spm-train --input in.txt --model-prefix p "
   "--vocab-size 40", 1, "in.txt: is a FIFO", "test -p in.txt && ! test -e p.model"},
  // $ROTOR, not R: `R ... &` is a subshell, and the signal would end it
  // and leave rotor waiting on the FIFO for ever.
  {"fifo_input_ends_on_sigterm", "mkfifo in.txt; \"$ROTOR\" translate --checkpoint run --input "
   "in.txt & p=$!; sleep 1; kill -TERM $p; wait $p", 143, "", "test -p in.txt"},

  // ---- the operating system's limits: an error naming the file, never a signal ----
  {"info_to_full_device", "R info > /dev/full", 1,
   "rotor: error: cannot write standard output: No space left on device", ""},
  {"bleu_to_full_device", "R bleu -r data/test.de data/test.de > /dev/full", 1,
   "cannot write standard output: No space left on device", ""},
  {"chrf_to_full_device", "R chrf -r data/test.de data/test.de > /dev/full", 1,
   "cannot write standard output: No space left on device", ""},
  {"translate_stdout_full", TRANSLATE " > /dev/full", 1, "cannot write standard output", ""},
  {"help_to_full_device", "R --help > /dev/full", 1, "cannot write standard output", ""},
  {"info_to_closed_pipe", "( (sleep 0.5; R info; echo $? > rc) | (exec <&-; sleep 2) ); exit $(cat rc)",
   1, "cannot write standard output: Broken pipe", ""},
  {"spm_train_past_file_size_limit", "ulimit -f 8 && R spm-train --input data/train.en "
   "--input data/train.de --model-prefix p --vocab-size 60", 1, "cannot write p.model", ""},
  {"train_past_file_size_limit", "ulimit -f 40 && R train tiny.yaml --set output_dir=r2 "
   "--set data.spm_model=run/spm.model", 1, "File too large", ""},
};
// clang-format on

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

using Outcome = rotor::test::RunResult;

Outcome sh(const std::string& dir, const std::string& script, int timeout_s = 120) {
  return rotor::test::run_script(dir, script, timeout_s);
}

using rotor::test::replace_all;

class SpecialFiles : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    base_ = new TempDir();
    const std::string b = base_->path();
    ASSERT_EQ(sh(b,
                 "R synth numbers-en-de --output data --train 300 --valid 30 --test 20 "
                 "--test-long 5 --seed 4")
                  .code,
              0);
    std::ofstream(b + "/tiny.yaml") << rotor::test::kWorldTranslationYaml;
    std::ofstream(b + "/mlm.yaml") << rotor::test::kWorldMlmYaml;
    const Outcome setup = sh(b,
                             "paste -d' ' data/train.en data/train.de > mlm.txt && "
                             "R spm-train --input data/train.en --input data/train.de "
                             "--model-prefix small --vocab-size 60 && R train tiny.yaml && "
                             "R train mlm.yaml && R export --checkpoint mlmrun --output hf",
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
TempDir* SpecialFiles::base_ = nullptr;

// The identity of a device node: inode, type and device numbers.
std::string node_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return std::to_string(st.st_ino) + ":" + std::to_string(st.st_mode) + ":" +
         std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
}

TEST_P(SpecialFiles, WrittenOrRefusedNeverReplaced) {
  const Case& c = GetParam();
  ASSERT_NE(base_, nullptr);
  TempDir dir;
  rotor::test::copy_world(base_->path(), dir);
  // NUL: a node like /dev/null made here (root), else /dev/null itself.
  std::string nul = dir / "NUL";
  if (::mknod(nul.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) nul = "/dev/null";
  const std::string before = node_identity(nul);
  const auto world = rotor::test::snapshot(dir.path());
  const Outcome o = sh(dir.path(), replace_all(c.script, "NUL", nul));
  // The world's files are inputs of every row: none is changed or removed.
  rotor::test::expect_unchanged(world, rotor::test::snapshot(dir.path()));
  EXPECT_EQ(o.code, c.code) << c.script << "\nstderr: " << o.err;
  if (*c.message)
    rotor::test::expect_error_line(o.err, c.message);
  else
    rotor::test::expect_no_error(o.err);
  if (*c.check) {
    const Outcome k = sh(dir.path(), replace_all(c.check, "NUL", nul));
    EXPECT_EQ(k.code, 0) << "check failed: " << c.check << "\nafter: " << o.err;
  }
  EXPECT_EQ(node_identity(nul), before) << nul << " was replaced";
  for (const auto& e : fs::recursive_directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos)
        << "temporary left behind: " << e.path();
}

INSTANTIATE_TEST_SUITE_P(Table, SpecialFiles, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
