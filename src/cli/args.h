// Checks on command-line values, made by each command before it does any work,
// so that a bad argument is one line in rotor's words ("translate: --beam must
// be an integer from 1 to 1024, got 0") and never a library's text. CLI11 only
// splits the command line; ranges, finiteness and paths are checked here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rotor::cli {

// `value` within [lo, hi]; else a rotor::Error "CMD: OPTION must be ..., got VALUE".
void check_int(std::string_view cmd, std::string_view option, int64_t value, int64_t lo,
               int64_t hi);
// `value` finite and within [lo, hi] (NaN and infinities are refused).
void check_real(std::string_view cmd, std::string_view option, double value, double lo, double hi);

// A path option that was given must not be empty ("" names no file).
void check_nonempty(std::string_view cmd, std::string_view option, const std::string& path);

// A name that a JSON output carries (--json): JSON strings are UTF-8, so a
// name that is not is refused before any work, rather than failing once the
// work is done.
void check_json_name(std::string_view cmd, std::string_view option, const std::string& name);

// A file to read: exists and, once links are followed, is a regular file.
// "-" (standard input), a FIFO and a character device are accepted when
// `allow_stdin` (an input read as a stream); a FIFO also when `allow_fifo`
// (text read to its end: `--ref <(command)`).
void check_input_file(std::string_view cmd, std::string_view option, const std::string& path,
                      bool allow_stdin = false, bool allow_fifo = false);

// A file to write: a non-empty path that is not a directory, whose directory
// exists, that is not the same file as any of `inputs`, and that lies neither
// in a checkpoint nor over a run directory's own files
// (train::owner_of_path).
void check_output_file(std::string_view cmd, std::string_view option, const std::string& path,
                       const std::vector<std::string>& inputs);

// A directory to write (made when missing): a non-empty path that is not an
// existing file, whose parent directory exists, that is neither one of
// `inputs` nor inside one of them, and that lies neither in a checkpoint nor
// over a run directory's own files (it may be a checkpoint itself only when
// `may_be_checkpoint`: an earlier average that `rotor average` replaces).
void check_output_dir(std::string_view cmd, std::string_view option, const std::string& path,
                      const std::vector<std::string>& inputs, bool may_be_checkpoint = false);

// Text inputs must be UTF-8 (as `rotor prepare` requires): a rotor::Error
// "NAME:LINE: invalid UTF-8 at byte K of the line" otherwise. `first_line` is
// the number of lines[0] (from 1).
void check_utf8(std::string_view line, const std::string& name, int64_t line_no);
void check_utf8(const std::vector<std::string>& lines, const std::string& name,
                int64_t first_line = 1);

// True when `a` and `b` name the same file or directory (hard links and
// symbolic links included), or the same absolute path when neither exists.
bool same_path(const std::string& a, const std::string& b);

// True when `path` is `dir` or lies inside it (after resolving links).
bool inside(const std::string& path, const std::string& dir);

}  // namespace rotor::cli
