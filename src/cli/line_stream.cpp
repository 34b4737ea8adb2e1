#include "cli/line_stream.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "eval/text_io.h"

namespace rotor::cli {

LineStream::LineStream(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

bool LineStream::read_some(bool wait) {
  if (!wait) {
    pollfd p{fd_, POLLIN, 0};
    int r;
    while ((r = ::poll(&p, 1, 0)) < 0 && errno == EINTR) {
    }
    // Readable, or hung up (read() then says how: data or the end).
    if (r <= 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) return false;
  }
  char chunk[65536];
  ssize_t n;
  while ((n = ::read(fd_, chunk, sizeof chunk)) < 0 && errno == EINTR) {
  }
  if (n < 0) ROTOR_FAIL("{}: read error ({})", name_, std::strerror(errno));
  if (n == 0)
    eof_ = true;
  else
    buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

std::vector<std::string> LineStream::next_batch(size_t max) {
  std::vector<std::string> out;
  while (out.size() < max) {
    const size_t nl = buffer_.find('\n', pos_);
    if (nl != std::string::npos || (eof_ && pos_ < buffer_.size())) {
      const size_t end = nl == std::string::npos ? buffer_.size() : nl;
      out.emplace_back(buffer_, pos_, end - pos_);
      pos_ = nl == std::string::npos ? end : nl + 1;
      continue;
    }
    if (eof_) break;
    buffer_.erase(0, pos_);  // keep only the unfinished line
    pos_ = 0;
    // A device such as /dev/zero has no line ends: a bound, not the host's memory.
    if (buffer_.size() > eval::kMaxLineBytes)
      ROTOR_FAIL("{}: a line longer than {} bytes (the limit of a text line)", name_,
                 eval::kMaxLineBytes);
    if (!read_some(/*wait=*/out.empty())) break;
  }
  return out;
}

}  // namespace rotor::cli
