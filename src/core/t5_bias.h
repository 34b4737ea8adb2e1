// T5's relative position buckets (Raffel et al. 2020, section 2.1, and the
// authors' Mesh TensorFlow code): a learned scalar per head and bucket of
// the relative position r = key position - query position, added to the
// attention score. Short distances get a bucket each, longer ones share
// log-spaced buckets, and every distance from max_distance on shares the
// last. An encoder (bidirectional) gives half the buckets to keys after the
// query; a decoder (causal) has only r <= 0.
//
// The cores never compute buckets: the model gathers its [buckets, H] table
// into one row per r in [-max_distance, max_distance] (the gather's ids come
// from relative_ids below) and the cores add row clamp(r) + max_distance,
// which is exact because every |r| >= max_distance lies in the last bucket
// of its side (tests/cpu/test_t5_bias.cpp checks it).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"  // ROTOR_HD

namespace rotor::t5 {

// The bucket of relative position r (key - query) among `buckets`, as
// Hugging Face transformers' T5Attention._relative_position_bucket computes
// it, in the same float arithmetic: log(n / max_exact) in float, divided by
// the float of log(max_distance / max_exact) in double, times the bucket
// span, truncated (the log-spaced part can land on a bucket boundary, where
// another rounding gives the bucket below).
inline int64_t bucket(int64_t r, int64_t buckets, int64_t max_distance, bool bidirectional) {
  int64_t ret = 0;
  int64_t n = -r;  // query - key: positive for keys before the query
  if (bidirectional) {
    buckets /= 2;
    if (n < 0) ret += buckets;  // keys after the query: the upper half
    n = n < 0 ? -n : n;
  } else {
    n = n > 0 ? n : 0;
  }
  const int64_t max_exact = buckets / 2;
  if (n < max_exact) return ret + n;
  const float ratio = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                      static_cast<float>(std::log(static_cast<double>(max_distance) /
                                                  static_cast<double>(max_exact)));
  int64_t large = max_exact + static_cast<int64_t>(ratio * static_cast<float>(buckets - max_exact));
  if (large > buckets - 1) large = buckets - 1;
  return ret + large;
}

// The bucket of each r = -max_distance .. max_distance, in that order: the
// ids of the gather that turns the [buckets, H] table into the cores' rows
// ([2 max_distance + 1, H], ops::AttentionOptions::rel_bias).
inline std::vector<int32_t> relative_ids(int64_t buckets, int64_t max_distance,
                                         bool bidirectional) {
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(2 * max_distance + 1));
  for (int64_t r = -max_distance; r <= max_distance; ++r)
    ids.push_back(static_cast<int32_t>(bucket(r, buckets, max_distance, bidirectional)));
  return ids;
}

// The largest max_distance rotor's CUDA flash kernels take: they hold a
// head's column of the gathered table (2 max_distance + 1 floats), and in the
// backward its gradient too, in shared memory beside their tiles (8 KiB at
// 512, which keeps the portable kernel under sm_75's 64 KiB and the Volta
// one under its 96 KiB). The plan runs the reference core beyond it.
inline constexpr int64_t kFlashMaxDistance = 512;

// The row of relative position r in the gathered table: r clamped to
// [-max_distance, max_distance], shifted to start at 0.
ROTOR_HD int64_t relative_row(int64_t r, int64_t max_distance) {
  return (r < -max_distance ? -max_distance : (r > max_distance ? max_distance : r)) + max_distance;
}

}  // namespace rotor::t5
