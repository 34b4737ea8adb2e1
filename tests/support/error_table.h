// The harness of the tables of hostile cases (tests/cpu/test_bad_inputs.cpp,
// test_input_checks.cpp, test_special_files.cpp, test_fingerprints.cpp): each
// case runs a shell script in a fresh copy of a small world and asserts the
// exit status, rotor's one error line, and that no file changed that should
// not.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "support/run_rotor.h"
#include "support/test_util.h"

namespace rotor::test {

// The configs of the small worlds: a translator of 1 + 1 layers trained for 2
// updates into run/ (data/{train,valid}.*), and a masked LM trained for 2
// updates into mlmrun/ (mlm.txt). Rows edit them as text (sed), so they are
// written out here, not built by tiny_configs.h.
inline constexpr const char* kWorldTranslationYaml = R"(task: translation
output_dir: run
seed: 5
device: cpu
model:
  encoder_layers: 1
  decoder_layers: 1
  d_model: 32
  n_heads: 2
  d_ff: 64
  position: rope
  max_positions: 256
data:
  train: data/train
  valid: data/valid
  vocab_size: 120
  max_tokens: 512
  max_len_ratio: 20
train:
  max_updates: 2
  log_interval: 1
  valid_interval: 2
  save_interval: 2
optim:
  lr: 2.0e-3
  warmup_updates: 2
)";

inline constexpr const char* kWorldMlmYaml = R"(task: mlm
output_dir: mlmrun
device: cpu
model:
  encoder_layers: 1
  d_model: 32
  n_heads: 2
  d_ff: 64
  activation: gelu
  position: rope
  max_positions: 64
data:
  train: mlm.txt
  vocab_size: 150
  seq_len: 32
train:
  max_updates: 2
  batch_size: 4
  valid_interval: 0
optim:
  name: adamw
  lr: 1.0e-3
  warmup_updates: 1
)";

// `script` under sh in `dir`, where R runs the rotor binary (a function) and
// $ROTOR names it; killed after `timeout_s` seconds (then 137: a hang is a
// failure, not a stuck test). The script and its captures are removed again.
inline RunResult run_script(const std::string& dir, const std::string& script,
                            int timeout_s = 120) {
  const std::string body = dir + "/.script.sh", out = dir + "/.stdout", err = dir + "/.stderr";
  std::ofstream(body) << "R() { \"" << ROTOR_BINARY << "\" \"$@\"; }\nROTOR='" << ROTOR_BINARY
                      << "'\nexport ROTOR\n"
                      << script << "\n";
  const std::string cmd = "export OMP_NUM_THREADS=1; cd '" + dir + "' && timeout -s KILL " +
                          std::to_string(timeout_s) +
                          " sh .script.sh >.stdout 2>.stderr </dev/null";
  const int status = std::system(cmd.c_str());
  RunResult r{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out),
              slurp(err)};
  for (const std::string& f : {body, out, err}) std::filesystem::remove(f);
  return r;
}

// A fresh copy of the world `from` (links copied as links).
inline void copy_world(const std::string& from, const TempDir& to) {
  std::filesystem::copy(
      from, to.path(),
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
}

// Every regular file under each of `paths` (space-separated, relative to
// `root`; "" for all of root) with its contents, and "absent" for a named
// path that does not exist. A run's lock file (it holds the description of
// its last holder) and links are left out.
inline std::map<std::string, std::string> snapshot(const std::string& root,
                                                   const std::string& paths = "") {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> files;
  const auto add = [&](const fs::path& p) {
    for (const auto& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file() && !e.is_symlink() && e.path().filename() != ".rotor.lock")
        files[fs::relative(e.path(), root).string()] = slurp(e.path().string());
  };
  if (paths.empty()) {
    add(root);
    return files;
  }
  std::istringstream words(paths);
  for (std::string p; words >> p;) {
    const fs::path path = fs::path(root) / p;
    if (!fs::exists(path))
      files[p] = "absent";
    else if (fs::is_directory(path))
      add(path);
    else
      files[p] = slurp(path.string());
  }
  return files;
}

// Every file of `before` is in `after` with the same contents, except those
// whose path starts with `writable` (when not empty).
inline void expect_unchanged(const std::map<std::string, std::string>& before,
                             const std::map<std::string, std::string>& after,
                             const std::string& writable = "") {
  for (const auto& [path, bytes] : before) {
    if (!writable.empty() && path.rfind(writable, 0) == 0) continue;
    auto it = after.find(path);
    if (it == after.end())
      ADD_FAILURE() << path << " was removed";
    else if (it->second != bytes)
      ADD_FAILURE() << path << " was changed";
  }
}

// stderr ends in rotor's one error line, which holds `message`; progress
// lines of a run that had started may precede it, other errors may not.
inline void expect_error_line(const std::string& err, const std::string& message) {
  ASSERT_FALSE(err.empty());
  ASSERT_EQ(err.back(), '\n') << err;
  const size_t start = err.rfind('\n', err.size() - 2);
  const std::string last = err.substr(start == std::string::npos ? 0 : start + 1);
  EXPECT_EQ(last.rfind("rotor: error: ", 0), 0u) << "not rotor's own message: " << err;
  EXPECT_EQ(err.find("rotor: error:"), err.rfind("rotor: error:")) << err;
  EXPECT_NE(last.find(message), std::string::npos) << "expected \"" << message << "\" in: " << last;
}

// No error line at all.
inline void expect_no_error(const std::string& err) {
  EXPECT_EQ(err.find("rotor: error:"), std::string::npos) << err;
}

}  // namespace rotor::test
