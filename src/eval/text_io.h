// Reading the line-per-segment text files that BLEU and chrF score.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace rotor::eval {

// Lines of a UTF-8 file split on '\n' only (as sacreBLEU opens files, with
// newline='\n'); a final newline does not start another line. "-" is stdin.
// A missing or unreadable file is a user error naming it.
std::vector<std::string> read_lines(const std::string& path);
std::vector<std::string> read_lines(std::istream& in);

}  // namespace rotor::eval
