// What this rotor was built with and what it finds at run time.
#pragma once

#include <string>

namespace rotor {

// Multi-line report: version, compiler, build type, CUDA support and
// architectures, library versions, and the devices found. cpu_kernels:
// what else the CPU line names (`rotor info` passes the small products'
// kernels of ops/cpu_gemm.h, which sit above core).
std::string build_info_text(const std::string& cpu_kernels = "");

}  // namespace rotor
