// Reading the line-per-segment text files that BLEU and chrF score.
#pragma once

#include <cstddef>
#include <istream>
#include <string>
#include <vector>

namespace rotor::eval {

// The longest line a text input may hold: a bound on what one line takes in
// memory, so that an input without newlines (a binary file) is an error, not
// an exhausted host.
inline constexpr size_t kMaxLineBytes = size_t{16} << 20;

// Lines of a UTF-8 file split on '\n' only (as sacreBLEU opens files, with
// newline='\n'); a final newline does not start another line. "-" is stdin;
// a FIFO (`<(command)`) is read to its end like stdin. A missing or unreadable
// file, a device, a directory or a line longer than kMaxLineBytes is a user
// error naming the file.
std::vector<std::string> read_lines(const std::string& path);
std::vector<std::string> read_lines(std::istream& in);

}  // namespace rotor::eval
