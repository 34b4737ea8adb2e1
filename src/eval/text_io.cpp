#include "eval/text_io.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "core/error.h"

namespace rotor::eval {

std::vector<std::string> read_lines(std::istream& in) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line, '\n')) lines.push_back(line);
  return lines;
}

std::vector<std::string> read_lines(const std::string& path) {
  if (path == "-") return read_lines(std::cin);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) ROTOR_FAIL("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) ROTOR_FAIL("{}: is a directory, not a text file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) ROTOR_FAIL("{}: cannot open for reading", path);
  auto lines = read_lines(in);
  if (in.bad()) ROTOR_FAIL("{}: read error", path);
  return lines;
}

}  // namespace rotor::eval
