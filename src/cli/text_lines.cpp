#include "cli/text_lines.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "cli/args.h"
#include "core/error.h"
#include "eval/text_io.h"

namespace rotor::cli {

namespace fs = std::filesystem;

bool is_std(const std::optional<std::string>& path) {
  return !path || *path == "-";
}

LineSource::LineSource(const std::optional<std::string>& input, std::string cmd) {
  std::error_code ec;
  name_ = is_std(input) ? "<stdin>" : *input;
  if (!is_std(input) && fs::is_regular_file(*input, ec)) {
    lines_ = eval::read_lines(*input);
    check_utf8(lines_, *input);
    return;
  }
  if (!is_std(input)) {  // a FIFO or a device: read as it comes
    fd_ = ::open(input->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) ROTOR_FAIL("{}: --input {}: cannot open: {}", cmd, *input, std::strerror(errno));
  }
  stream_ = std::make_unique<LineStream>(fd_ >= 0 ? fd_ : STDIN_FILENO, name_);
}

LineSource::~LineSource() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> LineSource::next(size_t max) {
  std::vector<std::string> out;
  if (stream_) {
    out = stream_->next_batch(max);
    check_utf8(out, name_, streamed_ + 1);
    streamed_ += static_cast<int64_t>(out.size());
  } else {
    const size_t end = std::min(lines_.size(), next_ + max);
    out.assign(lines_.begin() + static_cast<std::ptrdiff_t>(next_),
               lines_.begin() + static_cast<std::ptrdiff_t>(end));
    next_ = end;
  }
  for (auto& l : out)  // "\r\n" line ends (Windows text) are not part of the line
    if (!l.empty() && l.back() == '\r') l.pop_back();
  return out;
}

TextSink::TextSink(const std::optional<std::string>& path) {
  if (!is_std(path)) file_ = std::make_unique<AtomicFileWriter>(*path);
}

void TextSink::write(const std::string& text) {
  if (file_) return file_->write(text);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    ROTOR_FAIL("cannot write standard output: {}", std::strerror(errno));
}

void TextSink::finish() {
  if (file_) file_->commit();
}

}  // namespace rotor::cli
