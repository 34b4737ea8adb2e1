#include "cli/args.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"
#include "data/prepare.h"
#include "train/run_dir.h"

namespace fs = std::filesystem;

namespace rotor::cli {

namespace {

// The absolute form of `p` with its existing part resolved (links, "..").
fs::path resolved(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p, ec).lexically_normal() : r;
}

// The directory a file path writes into ("." for a bare name).
fs::path parent_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

}  // namespace

void check_int(std::string_view cmd, std::string_view option, int64_t value, int64_t lo,
               int64_t hi) {
  if (value < lo || value > hi)
    ROTOR_FAIL("{}: {} must be an integer from {} to {}, got {}", cmd, option, lo, hi, value);
}

void check_real(std::string_view cmd, std::string_view option, double value, double lo, double hi) {
  if (!std::isfinite(value) || value < lo || value > hi)
    ROTOR_FAIL("{}: {} must be a finite number from {} to {}, got {}", cmd, option, lo, hi, value);
}

void check_nonempty(std::string_view cmd, std::string_view option, const std::string& path) {
  if (path.empty()) ROTOR_FAIL("{}: {} is an empty path", cmd, option);
}

void check_json_name(std::string_view cmd, std::string_view option, const std::string& name) {
  if (!json_io::is_valid_utf8(name))
    ROTOR_FAIL(
        "{}: {} {} is not valid UTF-8, which the JSON output cannot hold: rename it, or leave out "
        "--json",
        cmd, option, name);
}

void check_input_file(std::string_view cmd, std::string_view option, const std::string& path,
                      bool allow_stdin, bool allow_fifo) {
  check_nonempty(cmd, option, path);
  if (allow_stdin && path == "-") return;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) ROTOR_FAIL("{}: {} {}: no such file", cmd, option, path);
  if (fs::is_directory(st)) ROTOR_FAIL("{}: {} {}: is a directory, not a file", cmd, option, path);
  if (fs::is_regular_file(st)) return;
  // A FIFO would block the command in open() and a device such as /dev/zero
  // never ends: only inputs read as streams take them (docs/design.md, "Errors").
  if (fs::is_fifo(st) && (allow_stdin || allow_fifo)) return;
  if (fs::is_character_file(st) && allow_stdin) return;
  struct stat raw {};
  ::stat(path.c_str(), &raw);
  ROTOR_FAIL("{}: {} {}: is {}, not a regular file", cmd, option, path,
             file_kind(static_cast<unsigned>(raw.st_mode)));
}

void check_output_file(std::string_view cmd, std::string_view option, const std::string& path,
                       const std::vector<std::string>& inputs) {
  check_nonempty(cmd, option, path);
  std::error_code ec;
  if (fs::is_directory(path, ec))
    ROTOR_FAIL("{}: {} {}: is a directory; give a file name", cmd, option, path);
  // A FIFO or a character device is written into (core/io.h); a block device
  // or a socket is refused before any work.
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_block_file(st) || fs::is_socket(st))
    ROTOR_FAIL("{}: {} {}: is {}; give a regular file, a FIFO or a character device", cmd, option,
               path, fs::is_block_file(st) ? "a block device" : "a socket");
  const fs::path parent = parent_of(path);
  if (!fs::is_directory(parent, ec))
    ROTOR_FAIL("{}: {} {}: directory {} does not exist", cmd, option, path, parent.string());
  for (const auto& in : inputs)
    if (!in.empty() && in != "-" && same_path(path, in))
      ROTOR_FAIL("{}: {} {} is also an input ({}); write elsewhere", cmd, option, path, in);
  // A FIFO or a terminal replaces nothing.
  if (fs::is_fifo(st) || fs::is_character_file(st)) return;
  if (const std::string owner = train::owner_of_path(path); !owner.empty())
    ROTOR_FAIL("{}: {} {} {}, which rotor replaces or prunes; write elsewhere", cmd, option, path,
               owner);
}

void check_output_dir(std::string_view cmd, std::string_view option, const std::string& path,
                      const std::vector<std::string>& inputs, bool may_be_checkpoint) {
  check_nonempty(cmd, option, path);
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    ROTOR_FAIL("{}: {} {}: exists and is not a directory", cmd, option, path);
  const fs::path parent = parent_of(resolved(path).string());
  if (!fs::is_directory(parent, ec))
    ROTOR_FAIL("{}: {} {}: directory {} does not exist", cmd, option, path, parent.string());
  for (const auto& in : inputs)
    if (!in.empty() && (inside(path, in) || inside(in, path)))
      ROTOR_FAIL("{}: {} {} overlaps the input {}; write elsewhere", cmd, option, path, in);
  if (const std::string owner = train::owner_of_path(path, may_be_checkpoint); !owner.empty())
    ROTOR_FAIL("{}: {} {} {}, which rotor replaces or prunes; write elsewhere", cmd, option, path,
               owner);
}

void check_utf8(std::string_view line, const std::string& name, int64_t line_no) {
  const size_t bad = data::find_invalid_utf8(line);
  if (bad != std::string_view::npos)
    ROTOR_FAIL("{}:{}: invalid UTF-8 at byte {} of the line", name, line_no, bad + 1);
}

void check_utf8(const std::vector<std::string>& lines, const std::string& name,
                int64_t first_line) {
  for (size_t i = 0; i < lines.size(); ++i)
    check_utf8(lines[i], name, first_line + static_cast<int64_t>(i));
}

bool same_path(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return resolved(a) == resolved(b);
}

bool inside(const std::string& path, const std::string& dir) {
  return path_inside(path, dir);
}

}  // namespace rotor::cli
