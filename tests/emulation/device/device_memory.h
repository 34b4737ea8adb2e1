// The emulated device's memory (tests/emulation/device/runtime.cpp): host
// blocks that stand for device allocations, each recorded with its size, so
// that a copy, a memset or a cuBLASLt operand can be held to one live
// allocation.
#pragma once

#include <cstddef>
#include <string>

namespace emu_device {

// Fails the run (a message naming `what`, then abort) unless [p, p + bytes)
// lies inside one live device allocation. bytes == 0 passes.
void check_range(const std::string& what, const void* p, size_t bytes);

// Whether p points into a live device allocation.
bool is_device(const void* p);

// The emulated device's compute capability, 10 major + minor (ROTOR_EMU_SM;
// 90 unless set).
int sm();

}  // namespace emu_device
