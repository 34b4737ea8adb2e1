// Memory for tensors: a 64-byte-aligned CPU allocator with usage statistics,
// and the CUDA stream-ordered pool behind the same two calls.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace rotor {

void* device_alloc(size_t bytes, Device device);
void device_free(void* ptr, size_t bytes, Device device);

// Bytes currently held by tensors on `device`, and the high-water mark.
size_t bytes_in_use(Device device);
size_t peak_bytes(Device device);
void reset_peak_bytes(Device device);

// The CPU allocator keeps freed blocks for reuse (size classes of powers of
// two). These report and release that cache.
size_t cached_bytes();
void release_cached_memory();

}  // namespace rotor
