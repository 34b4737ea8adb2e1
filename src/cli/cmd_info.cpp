// `rotor info`: version, build options, library versions and devices.
#include <cstdio>

#include "cli/command.h"
#include "core/build_info.h"

namespace {

int run_info() {
  std::fputs(rotor::build_info_text().c_str(), stdout);
  return 0;
}

}  // namespace

ROTOR_COMMAND("info", "Print version, build options, library versions and devices", 0,
              [](CLI::App&) { return [] { return run_info(); }; });
