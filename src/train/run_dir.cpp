#include "train/run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <span>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "core/dir_lock.h"
#include "core/error.h"
#include "core/io.h"
#include "data/fingerprint.h"
#include "data/sentencepiece.h"

namespace fs = std::filesystem;

namespace rotor::train {

namespace {

// The files of a run, moved together by --overwrite.
// (config.yaml stays: the new run rewrites it, and every checkpoint holds
// the config it was trained with.)
constexpr const char* kRunFiles[] = {"checkpoints", "checkpoint_last", "metrics.jsonl", "train.log",
                                     "tensorboard"};

// The rest of what a run writes at the top of its directory (owner_of_path):
// --overwrite leaves these in place.
constexpr const char* kRunKept[] = {
    "config.yaml",     "data",        "spm.model",  "spm.vocab", "spm.fingerprint.json",
    "tokenizer.bytes", ".rotor.lock", ".rendezvous"};

// The first line of a text file ("" when it cannot be read).
std::string first_line(const fs::path& p) {
  std::ifstream f(p);
  std::string line;
  std::getline(f, line);
  return line;
}

// A fresh run writes config.yaml and its tokenizer at the top of OUTPUT_DIR
// (--overwrite leaves them there): one that rotor did not write (a user's
// config.yaml or tokenizer in the directory named as output_dir) stops the
// run before it would be replaced. A path among `inputs` (data.spm_model
// naming OUTPUT_DIR/spm.model) is read, not written, and is left to the
// config's checks.
void check_no_foreign_files(const std::string& output_dir,
                            const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::error_code ec;
  const fs::path dir(output_dir);
  auto is_input = [&](const fs::path& p) {
    for (const auto& [key, path] : inputs)
      if (!path.empty() && fs::exists(path, ec) && fs::equivalent(path, p, ec)) return true;
    return false;
  };
  auto refuse = [&](const fs::path& p, const char* what) {
    ROTOR_FAIL(
        "output_dir {} holds {}, {}: a run there would replace it; give the run a directory of "
        "its own",
        output_dir, p.string(), what);
  };
  const fs::path config = dir / "config.yaml";
  if (fs::is_regular_file(config, ec) && !is_input(config) &&
      first_line(config) != kResolvedConfigHeader)
    refuse(config, "which is not a config that rotor resolved");
  // The tokenizer, unless the config names OUTPUT_DIR/spm.model as its own.
  if (!is_input(dir / "spm.model")) {
    const fs::path fingerprint = dir / "spm.fingerprint.json";
    const bool rotor_tokenizer =
        fs::is_regular_file(fingerprint, ec) && data::Fingerprint::readable(fingerprint.string());
    if (fs::exists(fingerprint, ec) && !rotor_tokenizer)
      refuse(fingerprint, "which is not a rotor fingerprint");
    for (const char* name : {"spm.model", "spm.vocab"}) {
      const fs::path p = dir / name;
      if (fs::exists(p, ec) && !rotor_tokenizer)
        refuse(p, "a tokenizer that rotor did not train here (no spm.fingerprint.json beside it)");
    }
  }
  const fs::path bytes = dir / "tokenizer.bytes";
  if (fs::is_regular_file(bytes, ec) && !is_input(bytes) &&
      data::Tokenizer::kind_of_file(bytes.string()) != data::TokenizerKind::Bytes)
    refuse(bytes, "which is not a rotor byte tokenizer");
}

bool is_checkpoint_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "model.safetensors", ec) &&
         fs::is_regular_file(dir / "config.yaml", ec);
}

}  // namespace

bool holds_run(const std::string& dir, std::string* what) {
  std::error_code ec;
  const auto checkpoints = checkpoint::list_checkpoints(dir);
  if (!checkpoints.empty()) {
    if (what)
      *what = fmt::format("{} checkpoint(s), the newest at update {}", checkpoints.size(),
                          checkpoints.back().first);
    return true;
  }
  const fs::path d(dir);
  if (fs::is_symlink(d / "checkpoint_last", ec) || fs::exists(d / "metrics.jsonl", ec)) {
    if (what) *what = "the metrics of an earlier run";
    return true;
  }
  return false;
}

std::string owner_of_path(const std::string& path, bool may_be_checkpoint) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // a trailing separator
  if (!may_be_checkpoint && fs::is_directory(p, ec) && is_checkpoint_dir(p))
    return "is the checkpoint " + p.string();
  fs::path rel = p.filename();  // p below `dir`
  for (fs::path dir = p.parent_path();; dir = dir.parent_path()) {
    if (is_checkpoint_dir(dir)) return "lies in the checkpoint " + dir.string();
    if (holds_run(dir.string())) {
      auto part = rel.begin();
      const std::string top = part->string();
      // checkpoints/ holds the run's step_N and best, which it lists,
      // prunes and resumes from; anything else there is left alone.
      if (top == "checkpoints" && ++part != rel.end()) {
        const std::string name = part->string();
        if (name == "best" || checkpoint::checkpoint_step(name) >= 0)
          return fmt::format("is part of the run in {} (its checkpoints/{})", dir.string(), name);
        return "";
      }
      for (const auto& names :
           {std::span<const char* const>(kRunFiles), std::span<const char* const>(kRunKept)})
        for (const char* own : names)
          if (top == own)
            return fmt::format("is part of the run in {} (its {})", dir.string(), top);
      return "";
    }
    if (!dir.has_relative_path()) return "";  // the root
    rel = dir.filename() / rel;
  }
}

RunDirectory::RunDirectory(const std::string& output_dir, RunStart start,
                           const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (output_dir.empty()) ROTOR_FAIL("output_dir is empty: name the run's directory");
  // A run's files in a checkpoint (or in another run's own files) would mix
  // with them, and replace its config.yaml and tokenizer.
  if (const std::string owner = owner_of_path(output_dir); !owner.empty())
    ROTOR_FAIL(
        "output_dir {} {}: a run there would mix its files with those; give the run a "
        "directory of its own",
        output_dir, owner);
  ensure_directory(output_dir);
  std::error_code ec;

  lock_ = std::make_unique<DirectoryLock>(output_dir, "two runs cannot share an output directory");

  try {
    std::string what;
    if (holds_run(output_dir, &what)) {
      if (start == RunStart::Fresh)
        ROTOR_FAIL(
            "{} holds an earlier run ({}): continue it with --resume, or start afresh with "
            "--overwrite (which moves its files into {}/previous-<date>-<time>/)",
            output_dir, what, output_dir);
      if (start == RunStart::Overwrite) {
        // An input among the files moved aside would vanish under the run
        // (model.init_from: RUN/checkpoint_last, say).
        for (const auto& [key, path] : inputs) {
          if (path.empty()) continue;
          for (const char* name : kRunFiles) {
            if (path_inside(path, (fs::path(output_dir) / name).string()))
              ROTOR_FAIL(
                  "{} {} lies in {}, which --overwrite moves aside with the earlier run; copy it "
                  "elsewhere first, or give the new run another output_dir",
                  key, path, (fs::path(output_dir) / name).string());
          }
        }
        const fs::path aside =
            fs::path(output_dir) / ("previous-" + local_time_text("%Y%m%d-%H%M%S"));
        fs::path target = aside;
        for (int i = 2; fs::exists(target, ec); ++i)
          target = aside.string() + "-" + std::to_string(i);
        fs::create_directory(target);
        for (const char* name : kRunFiles) {
          const fs::path from = fs::path(output_dir) / name;
          if (!fs::exists(fs::symlink_status(from, ec))) continue;
          fs::rename(from, target / name, ec);
          if (ec)
            ROTOR_FAIL("--overwrite: cannot move {} into {}: {}", from.string(), target.string(),
                       ec.message());
        }
        fsync_directory(output_dir);
        moved_to_ = target.string();
      }
    }
    if (start != RunStart::Resume) check_no_foreign_files(output_dir, inputs);
    checkpoint::remove_stale_temporaries(output_dir);
    remove_stale_temporaries_in(output_dir, "", /*files_only=*/true);
    remove_stale_temporaries_in((fs::path(output_dir) / "data").string(), "", true);
  } catch (...) {
    lock_.reset();
    throw;
  }
}

RunDirectory::~RunDirectory() = default;

}  // namespace rotor::train
