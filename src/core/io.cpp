#include "core/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

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

}  // namespace

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ROTOR_FAIL("cannot open {}: {}", path, errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    ROTOR_FAIL("cannot read {}: it is a directory", path);
  }
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
  }
  ::close(fd);
  return out;
}

// ---- AtomicFileWriter -------------------------------------------------------

AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), temp_path_(temp_name(path_)) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) ROTOR_FAIL("cannot write {}: {}", path_, errno_text(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_) abort();
}

void AtomicFileWriter::abort() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
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
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    abort();
    ROTOR_FAIL("cannot move {} into place: {}", path_, errno_text(err));
  }
  committed_ = true;
  fsync_path(parent_dir(path_), /*directory=*/true);
}

void atomic_write_file(const std::string& path, std::string_view bytes) {
  AtomicFileWriter w(path);
  w.write(bytes);
  w.commit();
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

void publish_directory(const std::string& path,
                       const std::function<void(const std::string& temp_dir)>& fill) {
  std::string temp = temp_name(path);
  std::error_code ec;
  fs::remove_all(temp, ec);  // a leftover of an earlier crash of this pid
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
    if (fs::exists(path)) {
      // Swap old and new in one step, then remove the old one.
      if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) != 0) {
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
        return;
      }
      fsync_path(parent_dir(path), true);
      fs::remove_all(temp, ec);  // now the old contents
      return;
    }
    if (::rename(temp.c_str(), path.c_str()) != 0)
      ROTOR_FAIL("cannot move {} into place: {}", path, errno_text(errno));
    fsync_path(parent_dir(path), true);
  } catch (...) {
    fs::remove_all(temp, ec);
    throw;
  }
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
