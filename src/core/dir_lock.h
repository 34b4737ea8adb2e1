// The lock of a directory rotor writes: an exclusive flock on DIR/.rotor.lock
// (the kernel releases it when the process dies, so a lock is never stale),
// with its holder's pid, host and start time written in the file. Every
// writer of a directory that rotor owns takes it: a run (train/run_dir.h),
// an export, prepared EHR data (core/io.h, publish_directory); a second
// writer fails at once with one line naming the holder.
#pragma once

#include <string>
#include <string_view>

namespace rotor {

inline constexpr const char* kLockName = ".rotor.lock";

class DirectoryLock {
 public:
  // Locks the existing directory DIR for `what` (a command: "export", ...);
  // rotor::Error "DIR is in use by rotor pid ... on host ... (since ...);
  // WHY" when another process holds it (`why`: what the two cannot share).
  DirectoryLock(const std::string& dir, std::string_view why);
  ~DirectoryLock();  // releases the lock
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  DirectoryLock(DirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

 private:
  int fd_ = -1;
};

// The local time in strftime's `format`, and this machine's host name: the
// lock's holder line, and the names of moved-aside runs.
std::string local_time_text(const char* format);
std::string host_name();

}  // namespace rotor
