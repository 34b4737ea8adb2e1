// Runs the rotor binary of the build (test::rotor_binary()) through the shell, for
// tests that drive whole commands: exit code and captured stdout/stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
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
// prefix of VAR=value words ("OMP_NUM_THREADS=1"), or empty.
inline RunResult run_rotor(const TempDir& dir, const std::string& args,
                           const std::string& env = "") {
  const std::string out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd = env + " " + rotor_binary() + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out), slurp(err)};
}

}  // namespace rotor::test
