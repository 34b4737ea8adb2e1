#include "parallel/file_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "core/error.h"

namespace fs = std::filesystem;

namespace rotor::parallel {

namespace {

using Clock = std::chrono::steady_clock;

// Keys become file names: [A-Za-z0-9_-] and inner dots stay, the rest is %XX.
// A leading dot is escaped too: dot files are this store's temporaries.
std::string escape_key(const std::string& key) {
  ROTOR_CHECK(!key.empty(), "FileStore: empty key");
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '-' || (c == '.' && i > 0);
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// A name no other writer uses, on any node: pid plus 64 random bits.
std::string temp_suffix() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ static_cast<uint64_t>(::getpid())
                                                                << 32};
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%d.%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

bool write_all(int fd, const std::string& bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void PollBackoff::sleep() {
  std::this_thread::sleep_for(std::chrono::microseconds(micros_));
  micros_ = std::min(micros_ * 2, 100000);
}

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec && !fs::is_directory(dir_))
    ROTOR_FAIL("rendezvous directory {}: cannot create it: {}", dir_, ec.message());
}

std::string FileStore::path_of(const std::string& key) const {
  return dir_ + "/" + escape_key(key);
}

void FileStore::set(const std::string& key, const std::string& value) {
  const std::string path = path_of(key);
  std::string error;
  // The directory may vanish between the write and the rename when a stale
  // one is being moved aside: recreate it and try again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    const std::string tmp = dir_ + "/." + escape_key(key) + ".tmp-" + temp_suffix();
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const bool ok = write_all(fd, value);
    const int saved = errno;
    ::close(fd);
    if (!ok) {
      ::unlink(tmp.c_str());
      ROTOR_FAIL("rendezvous store {}: writing {} failed: {}", dir_, tmp, std::strerror(saved));
    }
    if (::rename(tmp.c_str(), path.c_str()) == 0) return;
    error = std::strerror(errno);
    ::unlink(tmp.c_str());
  }
  ROTOR_FAIL("rendezvous store {}: cannot write key {}: {}", dir_, key, error);
}

std::optional<std::string> FileStore::get(const std::string& key) const {
  const std::string path = path_of(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    ROTOR_FAIL("rendezvous store {}: cannot read {}: {}", dir_, path, std::strerror(errno));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      ROTOR_FAIL("rendezvous store {}: cannot read {}: {}", dir_, path, std::strerror(saved));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::vector<std::string> FileStore::wait(const std::vector<std::string>& keys,
                                         double timeout_s) const {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  std::vector<std::string> missing = keys;
  PollBackoff backoff;
  for (;;) {
    std::vector<std::string> still;
    for (const auto& k : missing) {
      std::error_code ec;
      if (!fs::exists(path_of(k), ec)) still.push_back(k);
    }
    missing.swap(still);
    if (missing.empty() || Clock::now() >= deadline) return missing;
    backoff.sleep();
  }
}

std::optional<std::string> FileStore::get_wait(const std::string& key, double timeout_s) const {
  if (!wait({key}, timeout_s).empty()) return std::nullopt;
  return get(key);
}

bool FileStore::remove(const std::string& key) {
  return ::unlink(path_of(key).c_str()) == 0;
}

}  // namespace rotor::parallel
