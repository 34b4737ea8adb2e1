// ALiBi's arithmetic (Press, Smith & Lewis 2022, "Train Short, Test Long"),
// written once for the CPU attention cores (src/ops/attention.cpp,
// flash_attention.cpp, decode.cpp) and the CUDA kernels. Head h of H adds
//   bias(i, j) = -slope_h * |pos_q(i) - pos_k(j)|
// to the score of query i and key j: under a causal mask every visible key
// lies at or before its query, so this is the paper's -slope * (i - j); an
// encoder (no mask) gets the symmetric form. No parameter, no table.
//
// Slopes (the paper's section 3 and its reference implementation): for H a
// power of two, slope_h = 2^(-8(h+1)/H), h = 0..H-1, a geometric sequence
// starting and stepping at 2^(-8/H) (8 heads: 1/2, 1/4, ..., 1/256). For
// other H, with m the largest power of two below H: the m slopes of m heads,
// then the first H - m of every other slope of 2m heads, starting with the
// first: 2^(-8(2k+1)/(2m)), k = 0..H-m-1 (12 heads: 2^-1..2^-8, then 2^-0.5,
// 2^-1.5, 2^-2.5, 2^-3.5).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"  // ROTOR_HD

namespace rotor::alibi {

// The slope of head `head` of `heads` (as above), in double. The exponent
// -8 n / 2^s is exact and formed without a division: the CUDA kernels call
// this too (once per thread), where a double division is a subroutine.
ROTOR_HD double slope(int64_t head, int64_t heads) {
  int64_t m = 1;
  int shift = 0;  // m = 2^shift
  while (m * 2 <= heads) {
    m *= 2;
    ++shift;
  }
  // Head h < m: exponent -8(h+1)/m; the k-th extra head: -8(2k+1)/(2m).
  const bool extra = head >= m;
  const int64_t n = extra ? 2 * (head - m) + 1 : head + 1;
  double inv = 1.0;  // 1 / m or 1 / (2m), exactly
  for (int i = 0; i < shift + (extra ? 1 : 0); ++i) inv *= 0.5;
  return std::exp2(-8.0 * static_cast<double>(n) * inv);
}

// -slope * |q_pos - k_pos| in fp32, the slope rounded to float first: the
// value every core adds to the (scaled) score.
ROTOR_HD float bias(float slope, int64_t q_pos, int64_t k_pos) {
  const int64_t d = q_pos >= k_pos ? q_pos - k_pos : k_pos - q_pos;
  return -slope * static_cast<float>(d);
}

}  // namespace rotor::alibi
