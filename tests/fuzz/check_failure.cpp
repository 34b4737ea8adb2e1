// Stands in for src/core/error.cpp in the fuzz build: a failed ROTOR_CHECK
// aborts, so that libFuzzer keeps the input, instead of throwing the
// rotor::Error that the targets accept as the answer to bad input. Input must
// be rejected before it breaks an internal invariant. with_context is the
// same as in src/core/error.cpp.
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace rotor {

Error with_context(const std::string& context, const std::exception& e) {
  return Error(fmt::format("{}: {}", context, e.what()));
}

void throw_check_failure(const char* file, int line, const char* cond, const std::string& message) {
  std::fprintf(stderr, "fuzz: internal check `%s` failed at %s:%d: %s\n", cond, file, line,
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace rotor
