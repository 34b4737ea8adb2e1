// How the rotor command reports failures: always one line "rotor: error: ..."
// on stderr, in rotor's words. A command line CLI11 cannot split exits with 2;
// everything else (rotor::Error and what escapes from libraries) with 1.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <string>

namespace rotor::cli {

// What the command is doing now, for messages that cannot say it themselves
// (out of memory): "translating lines 1-64 of in.txt". Scoped: the previous
// activity is restored when the object goes away.
class Activity {
 public:
  explicit Activity(std::string what);
  ~Activity();
  Activity(const Activity&) = delete;
  Activity& operator=(const Activity&) = delete;

 private:
  std::string previous_;
};
const std::string& current_activity();

// Prints a CLI11 parse error in rotor's words (help and --version print as
// CLI11 does) and returns the exit code: 0 for help/version, 2 otherwise.
int report_parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

// Prints `e` as one line: rotor::Error as it is, std::bad_alloc as "out of
// memory (ACTIVITY)", a filesystem error without the library's bracketed
// paths. Newlines inside a message become spaces.
void report_exception(const std::exception& e);

}  // namespace rotor::cli
