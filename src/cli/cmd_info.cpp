// `rotor info`: version, build options, library versions and devices.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "core/build_info.h"
#include "ops/cpu_gemm.h"

namespace {

int run_info() {
  std::string text = rotor::build_info_text();
  // The small products' kernels (ops/cpu_gemm.h; ops sit above core's
  // build_info), after the CPU's line.
  const std::string line = std::string("  small gemm: ") + rotor::ops::cpu_small_gemm_name() +
                           " (linear attention's products)\n";
  const size_t at = text.find("  spdlog:");
  text.insert(at == std::string::npos ? text.size() : at, line);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

ROTOR_COMMAND("info", "Print version, build options, library versions and devices", 0,
              [](CLI::App&) { return [] { return run_info(); }; });
