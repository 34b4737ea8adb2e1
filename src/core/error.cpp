#include "core/error.h"

#include <cstring>

namespace rotor {

Error with_context(const std::string& context, const std::exception& e) {
  return Error(fmt::format("{}: {}", context, e.what()));
}

void throw_check_failure(const char* file, int line, const char* cond, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  throw Error(fmt::format("{} (check `{}` failed at {}:{})", message, cond, base, line));
}

}  // namespace rotor
