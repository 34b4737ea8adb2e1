// Row loops of the CPU attention cores in vector clones (ops/cpu_clones.h):
// the same bits on every CPU, sums in double in a fixed order.
#pragma once

#include <cstdint>

namespace rotor::ops::detail {

// The softmax of row[0, n) in place: e^(row[j] - max) by ops/cpu_math.h's
// exp_f32 (within about 2 ulp), the sum in double in 16 lanes (lane l adds
// j = l mod 16 in order, then the lanes, then the tail), each term times
// the float reciprocal of the sum. n = 0 leaves the row alone.
void softmax_row(float* row, int64_t n);

// The softmax backward's row sum without dropout: dp[j] set to 0 where
// p[j] is 0 (a masked key), then sum_j dp[j] p[j] in double in the same 16
// lanes.
double masked_dot_row(const float* p, float* dp, int64_t n);

// row[j] = e^(row[j] - shift) * scale for j < n, by exp_f32 (linear
// attention's FAVOR+ features).
void exp_shift_scale_row(float* row, int64_t n, float shift, float scale);

// row[j] *= e^(c[j] - c0) * m for j < n, by exp_f32 (causal FAVOR+'s
// per-key stabilizers).
void mul_exp_row(float* row, const float* c, float c0, float m, int64_t n);

}  // namespace rotor::ops::detail
