#include "ops/cpu_rows.h"

#include <cmath>

#include "ops/cpu_clones.h"
#include "ops/cpu_math.h"

namespace rotor::ops::detail {

ROTOR_CPU_CLONES void softmax_row(float* row, int64_t n) {
  if (n <= 0) return;
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  constexpr int64_t kLanes = 16;
  double lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float e = exp_f32(row[j + l] - mx);
      row[j + l] = e;
      lanes[l] += static_cast<double>(e);
    }
  double sum = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  for (; j < n; ++j) {
    row[j] = exp_f32(row[j] - mx);
    sum += static_cast<double>(row[j]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) row[i] *= inv;
}

ROTOR_CPU_CLONES double masked_dot_row(const float* p, float* dp, int64_t n) {
  constexpr int64_t kLanes = 16;
  double lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float g = p[j + l] == 0.0f ? 0.0f : dp[j + l];
      dp[j + l] = g;
      lanes[l] += static_cast<double>(g) * p[j + l];
    }
  double dot = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) dot += lanes[l];
  for (; j < n; ++j) {
    const float g = p[j] == 0.0f ? 0.0f : dp[j];
    dp[j] = g;
    dot += static_cast<double>(g) * p[j];
  }
  return dot;
}

ROTOR_CPU_CLONES void exp_shift_scale_row(float* row, int64_t n, float shift, float scale) {
  for (int64_t j = 0; j < n; ++j) row[j] = exp_f32(row[j] - shift) * scale;
}

ROTOR_CPU_CLONES void mul_exp_row(float* row, const float* c, float c0, float m, int64_t n) {
  for (int64_t j = 0; j < n; ++j) row[j] *= exp_f32(c[j] - c0) * m;
}

}  // namespace rotor::ops::detail
