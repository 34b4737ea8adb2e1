// Where a tensor lives: the CPU or CUDA device N.
#pragma once

#include <string>
#include <string_view>

namespace rotor {

struct Device {
  enum class Kind { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static Device cpu() { return {Kind::CPU, 0}; }
  static Device cuda(int i = 0) { return {Kind::CUDA, i}; }
  bool is_cpu() const { return kind == Kind::CPU; }
  bool is_cuda() const { return kind == Kind::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu" or "cuda:N"
};

// Parses "cpu", "cuda", "cuda:N"; throws rotor::Error otherwise. ("auto" is
// resolved by resolve_device.)
Device parse_device(std::string_view s);

// Number of CUDA devices that answer (0 when built without CUDA or none found).
int cuda_device_count();

// "auto" -> cuda:0 when a GPU answers, else cpu; anything else -> parse_device.
// Asking for cuda when none answers is a rotor::Error.
Device resolve_device(std::string_view s);
// The same against `device_count` GPUs (tests stand in a count for the GPUs
// of a machine that has none: train/session.h).
Device resolve_device(std::string_view s, int device_count);

}  // namespace rotor
