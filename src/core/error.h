// Errors. rotor::Error is what a user sees: one line that says what and where.
// ROTOR_CHECK guards internal invariants and adds the source location.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace rotor {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Returns a copy of `e` whose message is prefixed by `context: `.
Error with_context(const std::string& context, const std::exception& e);

[[noreturn]] void throw_check_failure(const char* file, int line, const char* cond,
                                      const std::string& message);

}  // namespace rotor

#define ROTOR_CHECK(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond))                                                                           \
      ::rotor::throw_check_failure(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)

// A user-facing error with a formatted message.
#define ROTOR_FAIL(...) throw ::rotor::Error(::fmt::format(__VA_ARGS__))
