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

// e^y for 0 <= y <= 88, within about 1 ulp (k = y / ln 2 rounded half up).
inline float exp_nonneg_f32(float y) {
  const int32_t k = static_cast<int32_t>(y * kLog2e + 0.5f);  // y >= 0: round half up
  return exp_reduced(y, static_cast<float>(k));
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

// tanh(x), within about 2 ulp of the true value, NaN for NaN, +-1 for +-inf.
// |x| < 0.35: the odd Taylor series to x^13 (the next term is below 1e-9 of
// the sum); else 1 - 2 / (e^(2|x|) + 1), |x| capped at 10 (tanh is 1 in
// float from 9.01 on); the sign put back by bits. Both halves are computed
// for every x, from capped arguments, and one is picked by a bit mask: what
// a vector loop does anyway (with -fno-trapping-math, which the files using
// this build with, GCC then vectorizes it).
inline float tanh_f32(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const float a = std::bit_cast<float>(bits & 0x7FFFFFFFu);  // |x|
  const float as = a < 0.35f ? a : 0.35f;
  const float z = as * as;
  float s = 21844.0f / 6081075.0f;
  s = s * z - 1382.0f / 155925.0f;
  s = s * z + 62.0f / 2835.0f;
  s = s * z - 17.0f / 315.0f;
  s = s * z + 2.0f / 15.0f;
  s = s * z - 1.0f / 3.0f;
  const float small = as + as * (z * s);
  const float al = a < 10.0f ? a : 10.0f;
  const float large = 1.0f - 2.0f / (exp_nonneg_f32(2.0f * al) + 1.0f);
  const uint32_t use_small = a < 0.35f ? 0xFFFFFFFFu : 0u;
  const uint32_t t =
      (std::bit_cast<uint32_t>(small) & use_small) | (std::bit_cast<uint32_t>(large) & ~use_small);
  const uint32_t nan = a != a ? 0xFFFFFFFFu : 0u;  // every comparison above was false
  return std::bit_cast<float>((bits & nan) | ((t | (bits & 0x80000000u)) & ~nan));
}

}  // namespace rotor::ops::detail
