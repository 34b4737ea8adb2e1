// Runs the rotor binary of the build (test::rotor_binary()) through the shell, for
// tests that drive whole commands: exit code and captured stdout/stderr; and
// the files those commands read (synthetic data, a text corpus). The configs
// they train are tiny_configs.h's.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/test_util.h"

namespace rotor::test {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct RunResult {
  int code;  // the exit code, 128 + signal when killed
  std::string out, err;
};

// `ENV rotor ARGS`, its output captured in files under `dir`. `env` is a
// prefix of VAR=value words ("OMP_NUM_THREADS=1"), or empty; `stdin_text` is
// what the command reads (nothing: /dev/null).
inline RunResult run_rotor(const TempDir& dir, const std::string& args, const std::string& env = "",
                           const std::string& stdin_text = "") {
  const std::string out = dir / "stdout.txt", err = dir / "stderr.txt";
  std::string in = "/dev/null";
  if (!stdin_text.empty()) std::ofstream(in = dir / "stdin.txt", std::ios::binary) << stdin_text;
  const std::string cmd =
      env + " " + rotor_binary() + " " + args + " <" + in + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out), slurp(err)};
}

// `command` (a shell command line) run in directory `dir` with
// OMP_NUM_THREADS=1 and no input; the captures are removed again, so that
// the directory holds only what the command wrote.
inline RunResult run_in(const std::string& dir, const std::string& command) {
  const std::string out = dir + "/.stdout", err = dir + "/.stderr";
  const std::string cmd = "export OMP_NUM_THREADS=1; cd '" + dir + "' && ( " + command + " ) >'" +
                          out + "' 2>'" + err + "' </dev/null";
  const int status = std::system(cmd.c_str());
  RunResult r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out),
              slurp(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// The arguments of `rotor synth numbers-en-de` writing OUTPUT (the corpus of
// the tiny translation configs): sentence pairs per split, and the seed.
struct SynthSizes {
  int train = 300, valid = 50, test = 50, test_long = 20;
  int seed = -1;  // -1: synth's default
};
inline std::string synth_args(const std::string& output, const SynthSizes& s = {}) {
  std::string a = "synth numbers-en-de --output " + output + " --train " + std::to_string(s.train) +
                  " --valid " + std::to_string(s.valid) + " --test " + std::to_string(s.test) +
                  " --test-long " + std::to_string(s.test_long);
  return s.seed < 0 ? a : a + " --seed " + std::to_string(s.seed);
}

// A text corpus for the masked-LM configs from the synthetic pairs in
// DATA: one line "english and german" a pair of DATA/train.{en,de}, every
// `valid_every`-th line into VALID instead of TRAIN (0: none).
inline void write_mlm_text(const std::string& data, const std::string& train,
                           const std::string& valid = "", int valid_every = 0) {
  std::ofstream text(train), held_out;
  if (valid_every > 0) held_out.open(valid);
  std::ifstream en(data + "/train.en"), de(data + "/train.de");
  int i = 0;
  for (std::string l1, l2; std::getline(en, l1) && std::getline(de, l2); ++i)
    (valid_every > 0 && i % valid_every == 0 ? held_out : text) << l1 << " and " << l2 << "\n";
}

}  // namespace rotor::test
