// NumPy's .npy format (version 1.0), for tensors a user reads with
// numpy.load: the magic "\x93NUMPY", the version, a little-endian uint16
// header length, a Python-literal header {'descr': '<f4', 'fortran_order':
// False, 'shape': (...), } padded with spaces and a newline so that the data
// starts at a multiple of 64 bytes, then the row-major data.
#pragma once

#include <string>

#include "core/tensor.h"

namespace rotor::checkpoint {

// Writes `tensor` (F32 or I32; any device) to `path` atomically.
void save_npy(const std::string& path, const Tensor& tensor);

}  // namespace rotor::checkpoint
