// Lines read from a file descriptor as they arrive, so that a command in a
// pipe (`rotor translate`) answers each line without waiting for the end of
// its input.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rotor::cli {

class LineStream {
 public:
  // Does not own `fd`. `name` names the stream in messages ("<stdin>").
  LineStream(int fd, std::string name);

  // The next lines (split on '\n', without it), at most `max`: waits for the
  // first line (or the end of the input), then takes only the further lines
  // that are already there, so a writer who waits for an answer is never
  // waited for. Empty at the end of the input.
  std::vector<std::string> next_batch(size_t max);

 private:
  // Reads what is there; when `wait` is false and nothing is, returns false.
  bool read_some(bool wait);

  int fd_;
  std::string name_;
  std::string buffer_;
  size_t pos_ = 0;  // start of the unread part of buffer_
  bool eof_ = false;
};

}  // namespace rotor::cli
