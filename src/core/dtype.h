// Element types of tensors and the host-side conversions for the 16-bit ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#define ROTOR_HD __host__ __device__ __forceinline__
#else
#define ROTOR_HD inline
#endif

namespace rotor {

enum class DType : uint8_t { F32, F16, BF16, I32, U8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::I32:
      return 4;
    case DType::U8:
      return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::I32:
      return "i32";
    case DType::U8:
      return "u8";
  }
  return "?";
}

inline bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

// Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16", "i32", "u8".
// Throws rotor::Error on anything else.
DType parse_dtype(std::string_view name);

// IEEE binary16 and bfloat16 stored as raw bits on the host. Conversions round
// to nearest even, as the CUDA intrinsics do, so CPU and GPU agree bit for bit.
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

ROTOR_HD uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
ROTOR_HD float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

ROTOR_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}
ROTOR_HD float bf16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

ROTOR_HD uint16_t float_to_half_bits(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absu < 0x38800000u) {
    // Subnormal half (or zero): shift the mantissa with round-to-nearest-even.
    if (absu < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    uint32_t exp = absu >> 23;
    uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exp;  // mant * 2^(exp-150) in units of 2^-24
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) half_mant++;
    return static_cast<uint16_t>(sign | half_mant);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits.
  uint32_t v = absu - 0x38000000u;  // exponent - 112 in the float's exponent field
  uint32_t rounding = 0xfffu + ((v >> 13) & 1u);
  v += rounding;
  return static_cast<uint16_t>(sign | (v >> 13));
}

ROTOR_HD float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline Half to_half(float f) {
  return Half{float_to_half_bits(f)};
}
inline BFloat16 to_bf16(float f) {
  return BFloat16{float_to_bf16_bits(f)};
}
inline float to_float(Half h) {
  return half_bits_to_float(h.bits);
}
inline float to_float(BFloat16 b) {
  return bf16_bits_to_float(b.bits);
}

}  // namespace rotor
