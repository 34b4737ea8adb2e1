#include "eval/text_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/io.h"

namespace rotor::eval {

std::vector<std::string> read_lines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line, '\n')) lines.push_back(line);
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  const bool std_in = path == "-";
  const std::string name = std_in ? "<stdin>" : path;
  int fd = STDIN_FILENO;
  if (!std_in) {
    // stat() first: a device (/dev/zero, /dev/urandom) would be read forever.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) ROTOR_FAIL("{}: no such file", path);
      ROTOR_FAIL("{}: cannot open for reading: {}", path, std::strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) ROTOR_FAIL("{}: is a directory, not a text file", path);
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
      ROTOR_FAIL("{}: is {}, not a text file", path, file_kind(st.st_mode));
    // A FIFO's open() waits for its writer; SIGINT and SIGTERM end the wait.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) ROTOR_FAIL("{}: cannot open for reading: {}", path, std::strerror(errno));
  }
  std::vector<std::string> lines;
  std::string pending;  // the unfinished last line
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      if (!std_in) ::close(fd);
      ROTOR_FAIL("{}: read error: {}", name, std::strerror(err));
    }
    if (n == 0) break;
    size_t from = 0;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      if (buf[i] != '\n') continue;
      pending.append(buf + from, i - from);
      lines.push_back(std::move(pending));
      pending.clear();
      from = i + 1;
    }
    pending.append(buf + from, static_cast<size_t>(n) - from);
    if (pending.size() > kMaxLineBytes) {
      if (!std_in) ::close(fd);
      ROTOR_FAIL("{}:{}: a line longer than {} bytes (the limit of a text line)", name,
                 lines.size() + 1, kMaxLineBytes);
    }
  }
  if (!std_in) ::close(fd);
  if (!pending.empty()) lines.push_back(std::move(pending));
  return lines;
}

}  // namespace rotor::eval
