// Elementary functions for the CPU ops' hot loops, built from +, -, *, / and
// bit operations only: no libm call (which keeps a loop from vectorizing) and
// no FMA (the files that use them build with -ffp-contract=off), so that
// every vector clone (ops/cpu_clones.h) and every CPU gives the same bits.
// Files that use them build with -ffp-contract=off -fno-trapping-math
// (CMakeLists.txt; the latter lets GCC compute both sides of a select, as
// a vector loop must).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace rotor::ops::detail {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;       // 12 significant bits
constexpr float kLn2Lo = 1.42860676533018708e-6f;  // ln 2 - kLn2Hi

// e^y = 2^k e^r for y = k ln 2 + r, k the integer kf (|k| <= 127, so that
// k * kLn2Hi is exact and 2^k a normal float): r by Cody-Waite (ln 2 in a
// short high part and the rest), e^r by its Taylor series to r^7 (error
// below 2e-9 for |r| <= ln2/2), and 2^k put into the exponent bits.
inline float exp_reduced(float y, float kf) {
  const int32_t k = static_cast<int32_t>(kf);
  const float r = (y - kf * kLn2Hi) - kf * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23);
}

// e^x for any float x, within about 2 ulp where e^x is a normal float: 0
// below -87.3 (where e^x falls under FLT_MIN), e^88 above 88, NaN for NaN.
// k = x / ln 2 rounded to the nearest integer by adding and subtracting
// 1.5 * 2^23 (exact for |k| < 2^22, no libm call), so that |r| <= ln2/2 for
// either sign.
inline float exp_f32(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
  const float xc = x < -87.3f ? -87.3f : (x > 88.0f ? 88.0f : x);
  const float v = exp_reduced(xc, (xc * kLog2e + kRound) - kRound);
  const float under = x < -87.3f ? 0.0f : v;
  return x != x ? x : under;
}

}  // namespace rotor::ops::detail
