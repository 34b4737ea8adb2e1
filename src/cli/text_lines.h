// Text in and out of the commands that answer line by line (`rotor
// translate`, `rotor generate`): input lines batch by batch, and the output
// written to standard output as each batch is done or to a file that
// appears whole at the end.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/line_stream.h"
#include "core/io.h"

namespace rotor::cli {

// True for an unset path or "-": standard input / output.
bool is_std(const std::optional<std::string>& path);

// Input lines, batch by batch: a whole regular file read (and checked to be
// UTF-8) up front, or a stream (standard input, a FIFO, a device) whose lines
// are taken as they come. A "\r" before the "\n" is not part of a line. `cmd`
// names the command in messages.
class LineSource {
 public:
  LineSource(const std::optional<std::string>& input, std::string cmd);
  ~LineSource();
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  // The next lines, at most `max`; empty at the end of the input.
  std::vector<std::string> next(size_t max);
  // The input's name in messages: the path, or "<stdin>".
  const std::string& name() const { return name_; }

 private:
  std::vector<std::string> lines_;
  size_t next_ = 0;
  int fd_ = -1;
  std::unique_ptr<LineStream> stream_;
  std::string name_;
  int64_t streamed_ = 0;  // lines read from the stream so far
};

// Where the output goes: standard output (flushed after every write) or a
// file that appears whole when finish() commits it.
class TextSink {
 public:
  explicit TextSink(const std::optional<std::string>& path);
  void write(const std::string& text);
  void finish();

 private:
  std::unique_ptr<AtomicFileWriter> file_;
};

}  // namespace rotor::cli
