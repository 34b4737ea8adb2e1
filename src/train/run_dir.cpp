#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "core/io.h"

namespace fs = std::filesystem;

namespace rotor::train {

namespace {

constexpr const char* kLockName = ".rotor.lock";

// The files of a run, moved together by --overwrite.
// (config.yaml stays: the new run rewrites it, and every checkpoint holds
// the config it was trained with.)
constexpr const char* kRunFiles[] = {"checkpoints", "checkpoint_last", "metrics.jsonl", "train.log",
                                     "tensorboard"};

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string now_text(const char* format) {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string read_holder(int fd) {
  std::string text(512, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "another rotor process" : text;
}

// Files that writers killed mid-write left in `dir` ("NAME.tmp-<pid>..." of
// an atomic write, a binarized corpus or a SentencePiece model being
// trained) whose process is gone.
void remove_stale_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.find(".tmp-");
    if (at == std::string::npos || !e.is_regular_file(ec)) continue;
    const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;
    fs::remove(e.path(), ec);
  }
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

RunDirectory::RunDirectory(const std::string& output_dir, RunStart start) {
  if (output_dir.empty()) ROTOR_FAIL("output_dir is empty: name the run's directory");
  ensure_directory(output_dir);
  std::error_code ec;

  const std::string lock_path = (fs::path(output_dir) / kLockName).string();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) ROTOR_FAIL("cannot open {}: {}", lock_path, std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = read_holder(lock_fd_);
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      ROTOR_FAIL("{} is in use by {}; two runs cannot share an output directory", output_dir,
                 holder);
    ROTOR_FAIL("cannot lock {}: {}", lock_path, std::strerror(err));
  }
  const std::string me = fmt::format("rotor pid {} on host {} (since {})", ::getpid(), host_name(),
                                     now_text("%Y-%m-%d %H:%M:%S"));
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, me.data(), me.size(), 0) < 0) {
    // The lock holds; only the description for a second writer is lost.
  }

  try {
    std::string what;
    if (holds_run(output_dir, &what)) {
      if (start == RunStart::Fresh)
        ROTOR_FAIL(
            "{} holds an earlier run ({}): continue it with --resume, or start afresh with "
            "--overwrite (which moves its files into {}/previous-<date>-<time>/)",
            output_dir, what, output_dir);
      if (start == RunStart::Overwrite) {
        const fs::path aside = fs::path(output_dir) / ("previous-" + now_text("%Y%m%d-%H%M%S"));
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
    remove_stale_files(output_dir);
    remove_stale_files((fs::path(output_dir) / "data").string());
  } catch (...) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

}  // namespace rotor::train
