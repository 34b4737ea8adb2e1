#include "cli/errors.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <vector>

#include "core/error.h"

namespace rotor::cli {

namespace {

thread_local std::string g_activity;

// One line: control characters (a newline in a library's message) become spaces.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

std::string after(const std::string& s, const std::string& marker) {
  const size_t p = s.find(marker);
  return p == std::string::npos ? std::string() : s.substr(p + marker.size());
}

// The words for an option's type as CLI11 names it (INT, UINT, FLOAT, TEXT).
std::string kind_of(const CLI::App* sub, const std::string& name) {
  const CLI::Option* opt = sub ? sub->get_option_no_throw(name) : nullptr;
  const std::string type = opt ? opt->get_type_name() : std::string();
  if (type.find("UINT") != std::string::npos) return "a non-negative integer";
  if (type.find("INT") != std::string::npos) return "an integer";
  if (type.find("FLOAT") != std::string::npos) return "a number";
  return "a valid value";
}

std::string command_list(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; }))
    names.push_back(s->get_name());
  return fmt::format("{}", fmt::join(names, ", "));
}

// The message of a parse error of the (sub)command `sub`, named `name`.
std::string describe(const CLI::ParseError& e, CLI::App* sub, const std::string& name) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ConversionError*>(&e)) {
    // "Could not convert: --beam = abc"
    const std::string rest = after(what, "Could not convert: ");
    const size_t eq = rest.find(" = ");
    if (eq != std::string::npos) {
      const std::string option = rest.substr(0, eq);
      return fmt::format("{}: {} must be {}, got '{}'", name, option, kind_of(sub, option),
                         rest.substr(eq + 3));
    }
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    // "Expected exactly 1 arguments to --beam, got 0" or "--beam: 1 required INT missing"
    std::string option = after(what, " arguments to ");
    option = option.substr(0, option.find(','));
    if (option.empty() && what.rfind("-", 0) == 0) option = what.substr(0, what.find(':'));
    if (!option.empty()) return fmt::format("{}: {} needs a value", name, option);
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e)) {
    // CLI11's own validators, where a command still uses them:
    // "-n: Value 0 not in range 1.000000 to 4096.000000", "--x: foo not in {a,b}".
    const size_t colon = what.find(": ");
    const std::string option = what.substr(0, colon), rest = after(what, ": ");
    const std::string value = after(rest, "Value ").substr(0, after(rest, "Value ").find(' '));
    const std::string range = after(rest, " not in range ");
    const size_t to = range.find(" to ");
    if (colon != std::string::npos && !value.empty() && to != std::string::npos) {
      const double lo = std::strtod(range.c_str(), nullptr);
      const double hi = std::strtod(range.c_str() + to + 4, nullptr);
      if (hi > 1e300) return fmt::format("{}: {} {} is too small", name, option, value);
      return fmt::format("{}: {} must be from {} to {}, got {}", name, option, lo, hi, value);
    }
    const size_t in = rest.find(" not in {");
    if (colon != std::string::npos && in != std::string::npos)
      return fmt::format("{}: {} must be one of {}, got '{}'", name, option, rest.substr(in + 8),
                         rest.substr(0, in));
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    const std::string extras = after(what, "expected: ");
    return fmt::format("{}: unexpected argument{} {}", name,
                       extras.find(' ') == std::string::npos ? "" : "s", extras);
  }
  return fmt::format("{}: {}", name, what);
}

}  // namespace

Activity::Activity(std::string what) : previous_(std::move(g_activity)) {
  g_activity = std::move(what);
}

Activity::~Activity() {
  // Left by an exception: keep the innermost activity for the message that
  // main() prints once the exception arrives there.
  if (std::uncaught_exceptions() > 0) return;
  g_activity = std::move(previous_);
}

const std::string& current_activity() {
  return g_activity;
}

int report_parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  // The innermost (sub)command reached before the error: "bench train".
  CLI::App* sub = nullptr;
  std::string name;
  for (CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    sub = at;
    name += (name.empty() ? "" : " ") + at->get_name();
  }
  std::string message;
  if (!sub) {
    const bool command_given = argc > 1 && argv[1][0] != '-';
    message = command_given
                  ? fmt::format("unknown command '{}' (commands: {})", argv[1], command_list(app))
                  : fmt::format("{} (commands: {}; see `rotor --help`)",
                                dynamic_cast<const CLI::RequiredError*>(&e)
                                    ? std::string("no command given")
                                    : std::string(e.what()),
                                command_list(app));
  } else {
    message = describe(e, sub, name) + fmt::format(" (see `rotor {} --help`)", name);
  }
  std::fprintf(stderr, "rotor: error: %s\n", one_line(message).c_str());
  std::fflush(stderr);
  return 2;
}

void report_exception(const std::exception& e) {
  const std::string& where = current_activity();
  std::string message;
  if (dynamic_cast<const std::bad_alloc*>(&e)) {
    message = where.empty() ? "out of memory" : fmt::format("out of memory ({})", where);
  } else if (dynamic_cast<const std::length_error*>(&e)) {
    message = fmt::format("out of memory ({}{}a size beyond what can be allocated was asked for)",
                          where, where.empty() ? "" : ": ");
  } else if (const auto* fe = dynamic_cast<const std::filesystem::filesystem_error*>(&e)) {
    // libstdc++: "filesystem error: OPERATION: REASON [PATH1] [PATH2]".
    std::string op = after(fe->what(), "filesystem error: ");
    const std::string reason = fe->code().message();
    const size_t cut = op.find(": " + reason);
    if (cut != std::string::npos) op.resize(cut);
    const std::string path = fe->path1().string();
    message = fmt::format("{}{}{} {}: {}", where, where.empty() ? "" : ": ", op,
                          path.empty() ? std::string("(an empty path)") : "'" + path + "'", reason);
  } else {
    message = e.what();
    // rotor's allocators say how much they could not get; add what for.
    const bool oom =
        message.rfind("out of host memory", 0) == 0 || message.rfind("out of GPU memory", 0) == 0;
    if (oom && !where.empty()) message += fmt::format(" ({})", where);
  }
  std::fprintf(stderr, "rotor: error: %s\n", one_line(message).c_str());
  std::fflush(stderr);
}

}  // namespace rotor::cli
