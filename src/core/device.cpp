#include "core/device.h"

#include <charconv>

#include "core/cuda_context.h"
#include "core/error.h"

namespace rotor {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device parse_device(std::string_view s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda" || s == "gpu") return Device::cuda(0);
  if (s.substr(0, 5) == "cuda:") {
    int idx = -1;
    auto rest = s.substr(5);
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), idx);
    if (ec == std::errc() && p == rest.data() + rest.size() && idx >= 0) return Device::cuda(idx);
  }
  ROTOR_FAIL("unknown device '{}' (expected auto, cpu, cuda or cuda:N)", s);
}

int cuda_device_count() {
  return cuda::device_count();
}

Device resolve_device(std::string_view s) {
  return resolve_device(s, cuda_device_count());
}

Device resolve_device(std::string_view s, int n) {
  if (s == "auto") return n > 0 ? Device::cuda(0) : Device::cpu();
  Device d = parse_device(s);
  if (d.is_cuda() && d.index >= n) {
    if (!ROTOR_WITH_CUDA) ROTOR_FAIL("device '{}' asked for, but rotor was built without CUDA", s);
    ROTOR_FAIL("device '{}' asked for, but {} CUDA device(s) answer", s, n);
  }
  return d;
}

}  // namespace rotor
