// The safetensors format (what Hugging Face checkpoints use; docs/design.md,
// "Checkpoints and run directories"):
//
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   JSON: {"__metadata__": {str: str}, NAME: {"dtype": "F32",
//             "shape": [..], "data_offsets": [begin, end]}, ...}, padded with
//             spaces so that the data starts at a multiple of 8
//   the data  each tensor's bytes, row-major little-endian, at [begin, end)
//             relative to the start of the data; the tensors tile it exactly
//
// rotor writes and reads F32, F16, BF16, I32 and U8. The reader validates the
// whole header before it returns: a truncated file, a header that is not JSON,
// offsets out of range, overlapping or leaving holes, a size that does not
// match the shape, an unknown dtype are each a rotor::Error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace rotor::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::vector<std::pair<std::string, std::string>>;  // in file order

// Writes `tensors` (in this order; CPU or GPU, copied to the host) and
// `metadata` to `path` atomically (temporary file, fsync, rename). Names must
// be unique, non-empty, valid UTF-8 and not "__metadata__".
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

// The same bytes save_safetensors writes, in memory (for tests and small files).
std::string safetensors_bytes(const NamedTensors& tensors, const Metadata& metadata = {});

// "F32", "F16", "BF16", "I32", "U8".
const char* safetensors_dtype_name(DType t);

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

// An open safetensors file: the header is read and validated by the
// constructor; tensors are read on demand.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Entries in header order.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  const SafetensorsEntry* find(const std::string& name) const;
  // The entry named `name`; a missing one is a rotor::Error naming the file.
  const SafetensorsEntry& entry(const std::string& name) const;
  const Metadata& metadata() const { return metadata_; }
  // The metadata value of `key`, or `fallback` when absent.
  std::string metadata_value(const std::string& key, const std::string& fallback = "") const;

  // The tensor as a CPU Tensor of its stored dtype and shape.
  Tensor load(const std::string& name) const;

 private:
  void close();
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // 8 + N
  std::vector<SafetensorsEntry> entries_;
  Metadata metadata_;
};

// Every tensor of the file, in header order.
NamedTensors load_safetensors(const std::string& path);

// A rotor::Error "WHERE: TENSOR holds a non-finite value (V at element I);
// WHY" for the first floating-point tensor of `tensors` with a NaN or an
// infinity: what rotor writes out (export, average) is checked with it first.
void require_finite(const NamedTensors& tensors, const std::string& where, const std::string& why);

}  // namespace rotor::checkpoint
