// `rotor info`: version, build options, library versions and devices.
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "core/build_info.h"
#include "ops/cpu_gemm.h"

namespace {

int run_info() {
  // The small products' kernels (ops/cpu_gemm.h) on the CPU line.
  const std::string small = rotor::ops::cpu_small_gemm_name();
  const std::string text = rotor::build_info_text(small == "none" ? "" : small + " small products");
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

ROTOR_COMMAND("info", "Print version, build options, library versions and devices", 0,
              [](CLI::App&) { return [] { return run_info(); }; });
