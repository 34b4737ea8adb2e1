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

#include "checkpoint/checkpoint.h"
#include "core/dir_lock.h"
#include "core/error.h"
#include "core/io.h"

namespace fs = std::filesystem;

namespace rotor::train {

namespace {

// The files of a run, moved together by --overwrite.
// (config.yaml stays: the new run rewrites it, and every checkpoint holds
// the config it was trained with.)
constexpr const char* kRunFiles[] = {"checkpoints", "checkpoint_last", "metrics.jsonl", "train.log",
                                     "tensorboard"};

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

RunDirectory::RunDirectory(const std::string& output_dir, RunStart start) {
  if (output_dir.empty()) ROTOR_FAIL("output_dir is empty: name the run's directory");
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
