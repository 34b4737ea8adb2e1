#include "core/io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/dir_lock.h"
#include "core/error.h"

namespace rotor {
namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string parent_dir(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

std::string temp_name(const std::string& path) {
  return path + ".tmp-" + std::to_string(static_cast<long>(::getpid()));
}

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) ROTOR_FAIL("cannot open {} to sync it: {}", path, errno_text(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot fsync directories (EINVAL); the data is then as
  // durable as they allow.
  if (rc != 0 && !(directory && (err == EINVAL || err == ENOTSUP)))
    ROTOR_FAIL("cannot sync {}: {}", path, errno_text(err));
}

// Where a write to `path` lands once symbolic links are followed: the final
// path and its st_mode (0 when nothing exists there yet). Relative link
// targets are taken from the link's directory, as the kernel does.
struct Resolved {
  std::string path;
  unsigned mode = 0;
};

Resolved follow_links(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return {p, 0};
      ROTOR_FAIL("cannot write {}: {}", path, errno_text(errno));
    }
    if (!S_ISLNK(st.st_mode)) return {p, static_cast<unsigned>(st.st_mode)};
    std::string target(4096, '\0');
    const ssize_t n = ::readlink(p.c_str(), target.data(), target.size());
    if (n < 0)
      ROTOR_FAIL("cannot write {}: cannot read the link {}: {}", path, p, errno_text(errno));
    target.resize(static_cast<size_t>(n));
    p = fs::path(target).is_absolute() ? target : (fs::path(parent_dir(p)) / target).string();
  }
  ROTOR_FAIL("cannot write {}: {}", path, errno_text(ELOOP));
}

// A FIFO or a character device is written in place; a regular file or a new
// path through a temporary file; anything else is refused.
bool written_directly(const std::string& path, unsigned mode) {
  if (mode == 0 || S_ISREG(mode)) return false;
  if (S_ISFIFO(mode) || S_ISCHR(mode)) return true;
  ROTOR_FAIL("cannot write {}: it is {}; give a regular file, a FIFO or a character device", path,
             file_kind(mode));
}

}  // namespace

const char* file_kind(unsigned st_mode) {
  if (S_ISREG(st_mode)) return "a regular file";
  if (S_ISDIR(st_mode)) return "a directory";
  if (S_ISFIFO(st_mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(st_mode)) return "a character device";
  if (S_ISBLK(st_mode)) return "a block device";
  if (S_ISSOCK(st_mode)) return "a socket";
  if (S_ISLNK(st_mode)) return "a symbolic link";
  return "not a regular file";
}

std::string read_file(const std::string& path, uint64_t max_bytes) {
  // stat() before open(): opening a FIFO for reading blocks until a writer
  // comes, and a device such as /dev/zero never ends.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ROTOR_FAIL("cannot open {}: {}", path, errno_text(errno));
  if (S_ISDIR(st.st_mode)) ROTOR_FAIL("cannot read {}: it is a directory", path);
  if (!S_ISREG(st.st_mode))
    ROTOR_FAIL("cannot read {}: it is {}, not a regular file", path, file_kind(st.st_mode));
  // O_NONBLOCK: should the path have become a FIFO since stat(), open() still
  // returns at once and fstat() below refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) ROTOR_FAIL("cannot open {}: {}", path, errno_text(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    ROTOR_FAIL("cannot read {}: it is {}, not a regular file", path, file_kind(st.st_mode));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const auto too_large = [&](uint64_t bytes) {
    ::close(fd);
    ROTOR_FAIL("cannot read {}: {} bytes or more, beyond the limit of {} bytes for this file", path,
               bytes, max_bytes);
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) too_large(static_cast<uint64_t>(st.st_size));
  std::string out;
  if (st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ROTOR_FAIL("cannot read {}: {}", path, errno_text(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    // A file that grows while it is read (or a /proc file of size 0).
    if (out.size() > max_bytes) too_large(out.size());
  }
  ::close(fd);
  return out;
}

// ---- AtomicFileWriter -------------------------------------------------------

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  const Resolved r = follow_links(path_);
  target_ = r.path;
  if (written_directly(path_, r.mode)) {
    // No O_TRUNC and no rename: a FIFO or a device is used as it is. open()
    // of a FIFO waits for a reader; SIGINT and SIGTERM end that wait.
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) ROTOR_FAIL("cannot write {}: {}", path_, errno_text(errno));
    return;
  }
  temp_path_ = temp_name(target_);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) ROTOR_FAIL("cannot write {}: {}", path_, errno_text(errno));
  // A replaced file keeps its permissions.
  if (r.mode != 0) ::fchmod(fd_, r.mode & 07777);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) abort();
}

void AtomicFileWriter::abort() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t bytes) {
  ROTOR_CHECK(fd_ >= 0 && !committed_, "write to a closed AtomicFileWriter for {}", path_);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      abort();
      ROTOR_FAIL("cannot write {}: {}", path_, errno_text(err));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  ROTOR_CHECK(fd_ >= 0 && !committed_, "commit of a closed AtomicFileWriter for {}", path_);
  if (direct()) {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0 && errno != EINTR) ROTOR_FAIL("cannot write {}: {}", path_, errno_text(errno));
    committed_ = true;
    return;
  }
  if (::fsync(fd_) != 0) {
    int err = errno;
    abort();
    ROTOR_FAIL("cannot sync {}: {}", path_, errno_text(err));
  }
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    int err = errno;
    abort();
    ROTOR_FAIL("cannot write {}: {}", path_, errno_text(err));
  }
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) {
    int err = errno;
    abort();
    ROTOR_FAIL("cannot move {} into place: {}", path_, errno_text(err));
  }
  committed_ = true;
  fsync_path(parent_dir(target_), /*directory=*/true);
}

void atomic_write_file(const std::string& path, std::string_view bytes) {
  AtomicFileWriter w(path);
  w.write(bytes);
  w.commit();
}

void move_into_place(const std::string& temp, const std::string& path) {
  std::error_code ec;
  try {
    const Resolved r = follow_links(path);
    if (!written_directly(path, r.mode) && ::rename(temp.c_str(), r.path.c_str()) == 0) {
      fsync_path(parent_dir(r.path), /*directory=*/true);
      return;
    }
    // A FIFO or a device, or a link whose target lies on another file system
    // (EXDEV): copy the bytes through AtomicFileWriter, which handles both.
    int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) ROTOR_FAIL("cannot read {}: {}", temp, errno_text(errno));
    AtomicFileWriter out(path);
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::close(fd);
        ROTOR_FAIL("cannot read {}: {}", temp, errno_text(err));
      }
      if (n == 0) break;
      try {
        out.write(buf, static_cast<size_t>(n));
      } catch (...) {
        ::close(fd);
        throw;
      }
    }
    ::close(fd);
    out.commit();
  } catch (...) {
    fs::remove(temp, ec);
    throw;
  }
  fs::remove(temp, ec);
}

// ---- directories ------------------------------------------------------------

void fsync_file(const std::string& path) {
  fsync_path(path, /*directory=*/false);
}

void fsync_directory(const std::string& dir) {
  fsync_path(dir, /*directory=*/true);
}

void ensure_directory(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) ROTOR_FAIL("cannot create directory {}: {}", dir, ec.message());
  if (!fs::is_directory(dir))
    ROTOR_FAIL("cannot create directory {}: a file of that name exists", dir);
}

bool path_inside(const std::string& path, const std::string& dir) {
  auto resolved = [](const std::string& x) {
    std::error_code ec;
    fs::path r = fs::weakly_canonical(fs::absolute(x, ec), ec);
    return ec ? fs::absolute(x, ec).lexically_normal() : r;
  };
  const fs::path p = resolved(path), d = resolved(dir);
  auto pi = p.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++pi) {
    if (di->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *di) return false;
  }
  return true;
}

void remove_stale_temporaries_in(const std::string& dir, const std::string& only, bool files_only) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool is_dir = e.is_directory(ec) && !e.is_symlink(ec);
    const bool is_file = e.is_regular_file(ec) && !e.is_symlink(ec);
    if (!is_file && (files_only || !is_dir)) continue;
    // NAME.tmp-<pid>..., or a directory NAME.old-<pid> (publish_directory's
    // old contents moved aside).
    size_t at = name.rfind(".tmp-"), skip = 5;
    if (is_dir && (at == std::string::npos || name.rfind(".old-") > at) &&
        name.rfind(".old-") != std::string::npos)
      at = name.rfind(".old-");
    if (at == std::string::npos || (!only.empty() && name.substr(0, at) != only)) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + at + skip, &end, 10);
    if (end == name.c_str() + at + skip) continue;  // not a pid: someone else's name
    if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) == 0) continue;
    if (pid == ::getpid()) continue;  // this process's own, in use
    fs::remove_all(e.path(), ec);
  }
}

void publish_directory(const std::string& given,
                       const std::function<void(const std::string& temp_dir)>& fill) {
  // A link to a directory stays a link: the directory it names is replaced.
  const std::string path = follow_links(given).path;
  std::string temp = temp_name(path);
  std::error_code ec;
  // What killed writers of PATH left beside it, and a leftover of an earlier
  // crash of this pid.
  remove_stale_temporaries_in(parent_dir(path), fs::path(path).filename().string());
  fs::remove_all(temp, ec);
  if (!fs::create_directory(temp, ec) || ec)
    ROTOR_FAIL("cannot create directory {}: {}", temp, ec ? ec.message() : "it exists");
  try {
    fill(temp);
    // Every file (and subdirectory) first, then the directory itself.
    for (const auto& entry : fs::recursive_directory_iterator(temp)) {
      if (entry.is_regular_file())
        fsync_path(entry.path().string(), false);
      else if (entry.is_directory())
        fsync_path(entry.path().string(), true);
    }
    fsync_path(temp, true);
    // A new PATH; if another writer put one there meanwhile, it is replaced
    // as an earlier one is, below.
    if (!fs::exists(path)) {
      if (::rename(temp.c_str(), path.c_str()) == 0) {
        fsync_path(parent_dir(path), true);
        return;
      }
      if (errno != ENOTEMPTY && errno != EEXIST)
        ROTOR_FAIL("cannot move {} into place: {}", path, errno_text(errno));
    }
    // Swap old and new in one step, then remove the old one.
    if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
      fsync_path(parent_dir(path), true);
      fs::remove_all(temp, ec);  // now the old contents
      return;
    }
    // No RENAME_EXCHANGE here: move the old one aside, then the new one in.
    std::string aside = path + ".old-" + std::to_string(static_cast<long>(::getpid()));
    fs::remove_all(aside, ec);
    if (::rename(path.c_str(), aside.c_str()) != 0)
      ROTOR_FAIL("cannot replace {}: {}", path, errno_text(errno));
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::rename(aside.c_str(), path.c_str());
      ROTOR_FAIL("cannot move {} into place: {}", path, errno_text(err));
    }
    fsync_path(parent_dir(path), true);
    fs::remove_all(aside, ec);
  } catch (...) {
    fs::remove_all(temp, ec);
    throw;
  }
}

void write_directory(const std::string& given, const DirectoryWriter& writer,
                     const std::function<void(const std::string& temp_dir)>& fill) {
  const std::string path = follow_links(given).path;
  std::error_code ec;
  std::unique_ptr<DirectoryLock> lock;
  const auto status = fs::status(path, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status))
      ROTOR_FAIL("{}: {} exists and is not a directory", writer.command, given);
    lock = std::make_unique<DirectoryLock>(
        path, fmt::format("{} does not write into a directory another rotor process writes",
                          writer.command));
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string name = e.path().filename().string();
      if (name == kLockName || writer.owns(name)) continue;
      ROTOR_FAIL(
          "{}: {} holds {}, which {} does not write; the directory is replaced whole: give a new "
          "or empty directory (nothing was written)",
          writer.command, given, name, writer.command);
    }
  }
  publish_directory(path, [&](const std::string& temp) {
    fill(temp);
    if (!lock) return;
    // The old directory's links to files stay links, written through.
    for (const auto& e : fs::directory_iterator(temp)) {
      const fs::path old = fs::path(path) / e.path().filename();
      if (!fs::is_symlink(old, ec) || !e.is_regular_file()) continue;
      atomic_write_file(old.string(), read_file(e.path().string()));
      fs::remove(e.path());
      fs::copy_symlink(old, e.path());
    }
  });
}

// ---- JSON strings -------------------------------------------------------------

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace rotor
