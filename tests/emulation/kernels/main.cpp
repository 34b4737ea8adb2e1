// kernels_emulate NAME...: runs the checks of kernels/NAME.cu for each NAME
// (kernels/NAME_emulate.cpp), or of every file without a NAME. Exit 0: all
// checks passed; 1: a check failed or nothing was launched; 2: bad usage.
#include <cstdio>
#include <cstring>
#include <string>

#include "emulate_common.h"

int main(int argc, char** argv) {
  auto& reg = emu_check::registry();
  int ran = 0;
  for (const auto& [name, run] : reg) {
    bool wanted = argc == 1;
    for (int a = 1; a < argc; ++a) wanted |= std::strcmp(argv[a], name) == 0;
    if (!wanted) continue;
    std::printf("== kernels/%s.cu\n", name);
    run();
    ++ran;
  }
  if (ran == 0 || (argc > 1 && ran != argc - 1)) {
    std::string names;
    for (const auto& [name, run] : reg) names += std::string(" ") + name;
    std::fprintf(stderr, "kernels_emulate: unknown kernel file name; known:%s\n", names.c_str());
    return 2;
  }
  return emu_check::finish("kernels_emulate");
}
