// The emulated device's memory (tests/emulation/device/runtime.cpp): host
// blocks that stand for device allocations, each recorded with its size, so
// that a copy, a memset or a cuBLASLt operand can be held to one live
// allocation.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

namespace emu_device {

// Fails the run (a message naming `what`, then abort) unless [p, p + bytes)
// lies inside one live device allocation. bytes == 0 passes.
void check_range(const std::string& what, const void* p, size_t bytes);

// Whether p points into a live device allocation.
bool is_device(const void* p);

// Queues work on a stream (runtime.cpp's header says when it runs: at once,
// or with ROTOR_EMU_STREAMS=lazy when something needs it).
void enqueue(cudaStream_t stream, std::function<void()> work);

// Runs the work queued on `stream`: what comes next on it runs after.
void in_order(cudaStream_t stream);

// The emulated device's compute capability, 10 major + minor (ROTOR_EMU_SM;
// 90 unless set).
int sm();

// The device cudaSetDevice chose (0 unless set; ROTOR_EMU_DEVICES of them).
int current_device();

}  // namespace emu_device
