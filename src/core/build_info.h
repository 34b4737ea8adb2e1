// What this rotor was built with and what it finds at run time.
#pragma once

#include <string>

namespace rotor {

// Multi-line report: version, compiler, build type, CUDA support and
// architectures, library versions, and the devices found.
std::string build_info_text();

}  // namespace rotor
