// Command-line arguments through the rotor binary: every bad argument is one
// line "rotor: error: ..." in rotor's words (no CLI11, SentencePiece or
// std::filesystem text), exits 1 (2 for a command line that does not parse),
// and creates or changes no file. Also `translate --nbest` and `translate` in
// a pipe, answering each line before the next is written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/run_rotor.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace {

namespace fs = std::filesystem;
using rotor::test::slurp;
using rotor::test::TempDir;

// One bad command line: its arguments ({D} the fixture's directory, {RUN} a
// trained run in it, {CKPT} that run's checkpoint), the exit code, a part of
// the message, and what standard input holds.
struct Case {
  std::string args;
  int code;
  std::string message;
  std::string stdin_text = "";
};

// clang-format off
const std::vector<Case> kCases = {
  // translate: ranges and finiteness
  {"translate --checkpoint {RUN} --beam 0", 1, "translate: --beam must be an integer from 1 to 1024, got 0"},
  {"translate --checkpoint {RUN} --beam -3 --input {D}/src.txt", 1, "--beam must be an integer from 1 to 1024, got -3"},
  {"translate --checkpoint {RUN} --beam abc", 2, "translate: --beam must be an integer, got 'abc'"},
  {"translate --checkpoint {RUN} --beam", 2, "translate: --beam needs a value"},
  {"translate --checkpoint {RUN} --lenpen nan", 1, "translate: --lenpen must be a finite number from -10 to 10, got nan"},
  {"translate --checkpoint {RUN} --lenpen inf", 1, "--lenpen must be a finite number"},
  {"translate --checkpoint {RUN} --max-len-a 1e30", 1, "--max-len-a must be a finite number from 0 to 1000, got 1e+30"},
  {"translate --checkpoint {RUN} --max-len-b -1", 1, "--max-len-b must be an integer from 0 to 1000000, got -1"},
  {"translate --checkpoint {RUN} --nbest 0", 1, "--nbest must be an integer from 1 to 1024, got 0"},
  {"translate --checkpoint {RUN} --nbest 5", 1, "--nbest 5 exceeds the beam size 4 (decode.beam of the checkpoint)"},
  {"translate --checkpoint {RUN} --nbest 3 --beam 2", 1, "--nbest 3 exceeds the beam size 2;"},
  {"translate --checkpoint {RUN} --batch-size 0", 1, "translate: --batch-size must be an integer from 1 to 100000, got 0"},
  {"translate --checkpoint {RUN} --device tpu", 1, "unknown device 'tpu'"},
  // translate: paths and text
  {"translate --checkpoint ''", 1, "translate: --checkpoint is an empty path"},
  {"translate --checkpoint {D}/nothing", 1, "{D}/nothing: no such checkpoint"},
  {"translate --checkpoint {RUN} --input {D}/data", 1, "translate: --input {D}/data: is a directory, not a file"},
  {"translate --checkpoint {RUN} --input {D}/missing.txt", 1, "translate: --input {D}/missing.txt: no such file"},
  {"translate --checkpoint {RUN} --input ''", 1, "translate: --input is an empty path"},
  {"translate --checkpoint {RUN} --input {D}/src.txt --output {D}/src.txt", 1, "--output {D}/src.txt is also an input"},
  {"translate --checkpoint {RUN} --input {D}/src.txt --output {D}/nodir/out.txt", 1, "directory {D}/nodir does not exist"},
  {"translate --checkpoint {RUN} --input {D}/src.txt --output {D}/data", 1, "--output {D}/data: is a directory"},
  {"translate --checkpoint {RUN} --input {D}/src.txt --output ''", 1, "translate: --output is an empty path"},
  {"translate --checkpoint {RUN} --input {D}/src.txt --output {CKPT}/config.yaml", 1, "lies in the checkpoint"},
  {"translate --checkpoint {RUN} --input {D}/bad.txt --output {D}/out.txt", 1, "{D}/bad.txt:2: invalid UTF-8 at byte 5 of the line"},
  {"translate --checkpoint {RUN} --output {D}/out.txt", 1, "<stdin>:2: invalid UTF-8 at byte 1", "ok\n\xC3(\n"},
  // translate: the command line itself
  {"translate --checkpoint {RUN} --bogus", 2, "translate: unexpected argument --bogus"},
  {"translate", 2, "translate: --checkpoint is required"},
  // bleu and chrf
  {"bleu --ref {D}/data {D}/src.txt", 1, "bleu: --ref {D}/data: is a directory"},
  {"bleu --ref {D}/missing.txt {D}/src.txt", 1, "bleu: --ref {D}/missing.txt: no such file"},
  {"bleu --ref {D}/ref.txt {D}/missing.txt", 1, "bleu: hypothesis {D}/missing.txt: no such file"},
  {"bleu --ref '' {D}/src.txt", 1, "bleu: --ref is an empty path"},
  {"bleu --ref {D}/ref.txt {D}/bad.txt", 1, "{D}/bad.txt:2: invalid UTF-8 at byte 5"},
  {"bleu --ref {D}/bad.txt {D}/ref.txt", 1, "{D}/bad.txt:2: invalid UTF-8"},
  {"bleu --ref {D}/ref.txt", 1, "<stdin>:1: invalid UTF-8 at byte 3", "ab\xff\n"},
  {"bleu --ref {D}/ref.txt {D}/src.txt --width 11", 1, "bleu: --width must be an integer from 0 to 10, got 11"},
  {"bleu --ref {D}/ref.txt {D}/src.txt --smooth-value nan", 1, "bleu: --smooth-value must be a finite number"},
  {"bleu --ref {D}/ref.txt {D}/src.txt --tokenize xyz", 1, "unknown tokenizer 'xyz'"},
  {"chrf --ref {D}/ref.txt {D}/src.txt --char-order 99", 1, "chrf: --char-order must be an integer from 0 to 32, got 99"},
  {"chrf --ref {D}/ref.txt {D}/src.txt --beta 0", 1, "chrf: --beta must be an integer from 1 to 100, got 0"},
  {"chrf --ref {D}/ref.txt {D}/src.txt --word-order x", 2, "chrf: --word-order must be an integer, got 'x'"},
  {"chrf --ref {D}/ref.txt {D}/bad.txt", 1, "{D}/bad.txt:2: invalid UTF-8"},
  {"chrf --ref {D}/data {D}/src.txt", 1, "chrf: --ref {D}/data: is a directory"},
  // spm-train
  {"spm-train --input {D}/src.txt --model-prefix {D}/m --vocab-size 0", 1, "spm-train: --vocab-size must be an integer from 1 to 1000000, got 0"},
  {"spm-train --input {D}/src.txt --model-prefix {D}/m --vocab-size abc", 2, "spm-train: --vocab-size must be an integer, got 'abc'"},
  {"spm-train --input {D}/data/train.en --model-prefix {D}/m --vocab-size 100000", 1, "vocabulary size 100000 is too large for the text of {D}/data/train.en"},
  {"spm-train --input {D}/bad.txt --model-prefix {D}/m --vocab-size 50", 1, "{D}/bad.txt:2: invalid UTF-8 at byte 5"},
  {"spm-train --input {D}/data --model-prefix {D}/m --vocab-size 50", 1, "spm-train: --input {D}/data: is a directory"},
  {"spm-train --input {D}/src.txt --model-prefix '' --vocab-size 50", 1, "spm-train: --model-prefix is an empty path"},
  {"spm-train --input {D}/src.txt --model-prefix {D}/nodir/m --vocab-size 50", 1, "directory {D}/nodir does not exist"},
  {"spm-train --input {D}/corpus.model --model-prefix {D}/corpus --vocab-size 50", 1, "is also an input ({D}/corpus.model)"},
  {"spm-train --input {D}/src.txt --model-prefix {D}/m --vocab-size 50 --threads -1", 1, "spm-train: --threads must be an integer from 0 to 1024, got -1"},
  {"spm-train --input {D}/empty_lines.txt --model-prefix {D}/m --vocab-size 50", 1, "spm-train: no text to learn from in {D}/empty_lines.txt"},
  {"spm-train --input {D}/data/train.en --model-prefix {D}/m --vocab-size 100 --character-coverage 0.9", 1, "it requires character_coverage >= 0.98 && character_coverage <= 1.0"},
  {"spm-train --input {D}/src.txt --model-prefix {D}/m --vocab-size 50 --character-coverage nan", 1, "character coverage nan"},
  // prepare
  {"prepare --spm {RUN}/spm.model --src {D}/src.txt --output-prefix {D}/p --max-len-ratio nan", 1, "prepare: --max-len-ratio must be a finite number"},
  {"prepare --spm {RUN}/spm.model --src {D}/src.txt --output-prefix {D}/p --threads -3", 1, "prepare: --threads must be an integer from 0 to 1024, got -3"},
  {"prepare --spm {RUN}/spm.model --src {D}/src.txt --output-prefix {D}/p --min-len 10 --max-len 5", 1, "prepare: --min-len 10 exceeds --max-len 5"},
  {"prepare --spm {RUN}/spm.model --src {D}/missing.txt --output-prefix {D}/p", 1, "prepare: --src {D}/missing.txt: no such file"},
  {"prepare --spm {RUN}/spm.model --src {D}/src.txt --output-prefix ''", 1, "prepare: --output-prefix is an empty path"},
  {"prepare --spm {RUN}/spm.model --src {D}/src.txt --tgt '' --output-prefix {D}/p", 1, "prepare: --tgt is empty; leave it out for a monolingual corpus"},
  {"prepare --spm {D}/data --src {D}/src.txt --output-prefix {D}/p", 1, "prepare: --spm {D}/data: is a directory"},
  {"prepare --spm {D}/fake.model --src {D}/src.txt --output-prefix {D}/p", 1, "{D}/fake.model: cannot load it, not a valid model"},
  {"prepare --spm {RUN}/spm.model --src {D}/bad.txt --output-prefix {D}/p", 1, "{D}/bad.txt:2: invalid UTF-8"},
  {"prepare --spm {RUN}/spm.model --src {D}/corpus.bin --output-prefix {D}/corpus", 1, "is also an input ({D}/corpus.bin)"},
  // average and export
  {"average --last 0 --run {RUN} --output {D}/avg", 1, "average: --last must be an integer from 1 to 100000, got 0"},
  {"average --last 1 --output {D}/avg", 1, "average: --last N and --run RUN_DIR go together"},
  {"average {RUN} --output {RUN}", 1, "average: --output {RUN} overlaps the input"},
  {"average {RUN} --output ''", 1, "average: --output is an empty path"},
  {"average {RUN} --output {D}/nodir/avg", 1, "does not exist"},
  {"average {RUN} --output {D}/src.txt", 1, "average: --output {D}/src.txt: exists and is not a directory"},
  {"average '' --output {D}/avg", 1, "average: checkpoint is an empty path"},
  {"export --checkpoint {RUN} --output {RUN}", 1, "export: --output {RUN} overlaps the input"},
  {"export --checkpoint {RUN} --output {CKPT}/hf", 1, "export: --output {CKPT}/hf overlaps the input"},
  {"export --checkpoint {RUN} --format onnx --output {D}/hf", 1, "export: unknown --format 'onnx'"},
  {"export --checkpoint {RUN} --output ''", 1, "export: --output is an empty path"},
  // synth, bench, info, the command itself
  {"synth numbers-en-de --output ''", 1, "synth: --output is an empty path"},
  {"synth numbers-en-de --output {D}/s --train 99999999999999", 1, "synth: --train must be an integer from 1 to 90000"},
  {"synth numbers-en-de --output {D}/s --test -5", 1, "synth: --test must be an integer from 0 to 90000, got -5"},
  {"synth numbers-en-de --output {D}/src.txt", 1, "synth: --output {D}/src.txt: exists and is not a directory"},
  {"synth numbers-en-de --output {D}/s --seed -1", 1, "synth: --seed must be an integer from 0 to 9223372036854775807, got -1"},
  {"synth numbers-en-de --output {D}/s --seed 1.5", 2, "synth: --seed must be an integer, got '1.5'"},
  {"bench train {D}/good.yaml --steps 0", 1, "--steps must be at least 1, got 0"},
  {"bench train {D}/good.yaml --json {D}/good.yaml", 1, "bench train: --json {D}/good.yaml is also an input"},
  {"bench train {D}/good.yaml --json {D}/nodir/b.json", 1, "directory {D}/nodir does not exist"},
  {"bench train {D}/missing.yaml", 1, "bench train: config {D}/missing.yaml: no such file"},
  {"info extra", 2, "info: unexpected argument extra"},
  {"nosuch", 2, "unknown command 'nosuch' (commands: "},
  {"", 2, "no command given"},
  // A token id outside the vocabulary names the data file and the sentence.
  {"bench train {D}/corrupt.yaml --steps 1 --warmup 0", 1, "corpus data {D}/prep/train.tgt.bin: sentence index 7 holds token id 5000, outside the vocabulary [0, 120)"},
};
// clang-format on

// Texts of other libraries that must never reach the user.
const char* kLibraryTexts[] = {"Run with --help",   "not in range", ".cc(",  "filesystem error",
                               "Could not convert", "required INT", "std::", "basic_string"};

using rotor::test::replace_all;

// path -> FNV-1a of the contents, of every file under `root`.
std::map<std::string, uint64_t> snapshot(const std::string& root) {
  std::map<std::string, uint64_t> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_directory()) {
      out[e.path().string() + "/"] = 0;
      continue;
    }
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : slurp(e.path().string())) h = (h ^ c) * 1099511628211ull;
    out[e.path().string()] = h;
  }
  return out;
}

using Result = rotor::test::RunResult;

// rotor ARGS < stdin_text; captures live outside the fixture directory.
Result run(const TempDir& capture, const std::string& args, const std::string& stdin_text = "") {
  return rotor::test::run_rotor(capture, args, "", stdin_text);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

class CliArgs : public ::testing::Test {
 protected:
  // One tiny trained run and the files the cases name, shared by the tests.
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    const TempDir& d = *dir_;
    TempDir capture;
    auto r = run(capture, rotor::test::synth_args(d / "data"));
    ASSERT_EQ(r.code, 0) << r.err;
    rotor::test::tiny_translation_2_updates(d / "data", d / "run").write(d / "good.yaml");
    r = run(capture, "train " + (d / "good.yaml"));
    ASSERT_EQ(r.code, 0) << r.err;
    std::ofstream(d / "src.txt") << "one\ntwo hundred\nthree thousand four\n";
    std::ofstream(d / "ref.txt") << "eins\nzweihundert\ndreitausendvier\n";
    std::ofstream(d / "bad.txt", std::ios::binary) << "gut\nbad \xff here\n";
    std::ofstream(d / "corpus.model") << "text that looks like a model name\n";
    std::ofstream(d / "corpus.bin") << "text that looks like a corpus name\n";
    std::ofstream(d / "fake.model") << "not a SentencePiece model";
    std::ofstream(d / "empty_lines.txt") << "\n\n\n";
    // A prepared corpus with one token id past the vocabulary.
    fs::create_directories(d / "prep");
    r = run(capture, "prepare --spm " + (d / "run/spm.model") + " --src " + (d / "data/train.en") +
                         " --tgt " + (d / "data/train.de") + " --output-prefix " +
                         (d / "prep/train"));
    ASSERT_EQ(r.code, 0) << r.err;
    {
      std::fstream bin(d / "prep/train.tgt.bin", std::ios::in | std::ios::out | std::ios::binary);
      const int32_t bad = 5000;
      bin.seekp(4 * 57);
      bin.write(reinterpret_cast<const char*>(&bad), 4);
    }
    rotor::test::tiny_translation_2_updates(d / "data", d / "bench_out")
        .set("data.train", d / "prep/train")
        .set("data.spm_model", d / "run/spm.model")
        .write(d / "corrupt.yaml");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  std::string expand(const std::string& s) const {
    return replace_all(replace_all(replace_all(s, "{CKPT}", *dir_ / "run/checkpoints/step_2"),
                                   "{RUN}", *dir_ / "run"),
                       "{D}", dir_->path());
  }
  static TempDir* dir_;
};

TempDir* CliArgs::dir_ = nullptr;

TEST_F(CliArgs, EveryBadArgumentIsOneLineAndWritesNothing) {
  ASSERT_GE(kCases.size(), 25u);
  TempDir capture;
  for (const Case& c : kCases) {
    const std::string args = expand(c.args), message = expand(c.message);
    SCOPED_TRACE("rotor " + args);
    const auto before = snapshot(dir_->path());
    const Result r = run(capture, args, c.stdin_text);
    EXPECT_EQ(r.code, c.code) << r.err;
    EXPECT_EQ(r.err.rfind("rotor: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos)
        << "expected '" << message << "' in " << r.err;
    for (const char* text : kLibraryTexts)
      EXPECT_EQ(r.err.find(text), std::string::npos)
          << "library text '" << text << "' in " << r.err;
    EXPECT_EQ(snapshot(dir_->path()), before) << "a file was created, changed or removed";
  }
}

// An allocation that cannot succeed says what rotor was doing. The address
// space is capped so that the failure is the same on any machine.
TEST_F(CliArgs, OutOfMemoryNamesTheWork) {
  TempDir capture;
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "one two three\n";
  std::ofstream(capture / "many.txt") << many;
  const auto before = snapshot(dir_->path());
  // The search for 2000 sentences x 1024 beams asks for about 250 GiB.
  const std::string cmd = "ulimit -v 8000000; " + std::string(ROTOR_BINARY) +
                          " translate --device cpu --checkpoint " + (*dir_ / "run") + " --input " +
                          (capture / "many.txt") +
                          " --beam 1024 --batch-size 2000 --max-len-b 1000 --output " +
                          (*dir_ / "out.txt") + " 2>" + (capture / "err.txt");
  const int status = std::system(cmd.c_str());
  const std::string err = slurp(capture / "err.txt");
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 1) << err;
  EXPECT_EQ(err.rfind("rotor: error: out of host memory", 0), 0u) << err;
  EXPECT_NE(err.find("(translate: translating lines 1-2000 of " + (capture / "many.txt") + ")"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(snapshot(dir_->path()), before);
}

// --nbest N: N lines "index<TAB>rank<TAB>score<TAB>hypothesis" per input line,
// ranks 1..N, scores not increasing, rank 1 the plain translation.
TEST_F(CliArgs, NbestWritesRankedHypotheses) {
  TempDir capture;
  const std::string base = "translate --device cpu --checkpoint " + (*dir_ / "run") +
                           " --beam 3 --input " + (*dir_ / "src.txt");
  const Result plain = run(capture, base);
  ASSERT_EQ(plain.code, 0) << plain.err;
  const std::vector<std::string> best = split_lines(plain.out);
  ASSERT_EQ(best.size(), 3u);
  const Result r = run(capture, base + " --nbest 3 --output " + (capture / "nbest.tsv"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.empty()) << "the output went to --output";
  const std::vector<std::string> lines = split_lines(slurp(capture / "nbest.tsv"));
  ASSERT_EQ(lines.size(), 9u) << slurp(capture / "nbest.tsv");
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> cols;
    std::istringstream in(lines[i]);
    for (std::string col; std::getline(in, col, '\t');) cols.push_back(col);
    ASSERT_EQ(cols.size(), 4u) << lines[i];
    EXPECT_EQ(cols[0], std::to_string(i / 3)) << lines[i];
    EXPECT_EQ(cols[1], std::to_string(i % 3 + 1)) << lines[i];
    const double score = std::stod(cols[2]);
    EXPECT_TRUE(std::isfinite(score) && score <= 0) << lines[i];
    if (i % 3 == 0) {
      EXPECT_EQ(cols[3], best[i / 3]) << "rank 1 is the translation without --nbest";
    } else {
      std::istringstream prev(lines[i - 1]);
      std::string c0, c1, c2;
      std::getline(prev, c0, '\t');
      std::getline(prev, c1, '\t');
      std::getline(prev, c2, '\t');
      EXPECT_LE(score, std::stod(c2)) << "ranked by score: " << lines[i];
    }
  }
  // The same from standard input, all lines there at once.
  const Result piped =
      run(capture, "translate --device cpu --checkpoint " + (*dir_ / "run") + " --beam 3 --nbest 3",
          slurp(*dir_ / "src.txt"));
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(piped.out, slurp(capture / "nbest.tsv"));
}

// A child process with its standard input and output on pipes.
struct Child {
  pid_t pid = -1;
  int in = -1, out = -1;
};

Child spawn(const std::vector<std::string>& args, const std::string& err_path) {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1], err}) close(fd);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  return {pid, to_child[1], from_child[0]};
}

// The next line from `fd`, or "<timeout>" when none comes within `ms`.
std::string read_line(int fd, std::string& buffer, int ms) {
  for (;;) {
    const size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return line;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return "<timeout>";
    char chunk[4096];
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return "<end>";
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

// A writer that waits for each translation before it writes the next line:
// translate must answer every line as it comes (no deadlock), and give what
// it gives for the whole file.
TEST_F(CliArgs, TranslateAnswersLineByLineInAPipe) {
  TempDir capture;
  const Result whole = run(capture, "translate --device cpu --checkpoint " + (*dir_ / "run") +
                                        " --input " + (*dir_ / "src.txt"));
  ASSERT_EQ(whole.code, 0) << whole.err;
  const std::vector<std::string> expected = split_lines(whole.out);
  ASSERT_EQ(expected.size(), 3u);
  const std::vector<std::string> sources = split_lines(slurp(*dir_ / "src.txt"));
  signal(SIGPIPE, SIG_IGN);  // a child that died must fail the test, not kill it
  Child child = spawn({ROTOR_BINARY, "translate", "--device", "cpu", "--checkpoint", *dir_ / "run"},
                      capture / "err.txt");
  ASSERT_GT(child.pid, 0);
  std::string buffer;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string line = sources[i] + "\n";
    ASSERT_EQ(write(child.in, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    const std::string answer = read_line(child.out, buffer, 120000);
    if (answer == "<timeout>") kill(child.pid, SIGKILL);
    ASSERT_EQ(answer, expected[i]) << "line " << i << "; stderr: " << slurp(capture / "err.txt");
  }
  close(child.in);
  EXPECT_EQ(read_line(child.out, buffer, 120000), "<end>");
  close(child.out);
  int status = 0;
  waitpid(child.pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(capture / "err.txt");
}

}  // namespace
