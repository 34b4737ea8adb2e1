// DeBERTa's relative positions (He et al. 2021, section 3.1; DeBERTa-v2's
// log buckets): the relative position i - j of query i and key j, kept
// exact within half the buckets and log-spaced up to max_position beyond,
// then shifted into the rows of the shared relative embedding table
// [2 span, d], span = position_buckets (or max_relative_positions without
// buckets), clamped at both ends. Both disentangled terms read the same
// row: content-to-position q_i . K_r[row] and position-to-content
// k_j . Q_r[row] (the bucket is odd in i - j, so the key's view of the
// query, -(bucket(j - i)), is this row too).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace rotor::deberta {

// DeBERTa-v2's log bucket of relative position r (query - key), as Hugging
// Face transformers' make_log_bucket_position computes it in float32:
// |r| below bucket_size / 2 is kept; beyond, mid + ceil(log(|r| / mid) /
// log((max_position - 1) / mid) * (mid - 1)), signed.
inline int64_t log_bucket(int64_t r, int64_t bucket_size, int64_t max_position) {
  const int64_t mid = bucket_size / 2;
  if (r < mid && r > -mid) return r;
  const int64_t a = r < 0 ? -r : r;
  if (a <= mid) return r;
  const float ratio = std::log(static_cast<float>(a) / static_cast<float>(mid)) /
                      std::log(static_cast<float>(static_cast<double>(max_position - 1) /
                                                  static_cast<double>(mid)));
  const int64_t log_pos =
      static_cast<int64_t>(std::ceil(ratio * static_cast<float>(mid - 1))) + mid;
  return r < 0 ? -log_pos : log_pos;
}

// The span of the relative table: its rows are 0 .. 2 span - 1.
inline int64_t span(int64_t position_buckets, int64_t max_relative_positions) {
  return position_buckets > 0 ? position_buckets : max_relative_positions;
}

// The table row of relative position r = i - j.
inline int64_t relative_row(int64_t r, int64_t position_buckets, int64_t max_relative_positions) {
  const int64_t s = span(position_buckets, max_relative_positions);
  const int64_t b =
      position_buckets > 0 ? log_bucket(r, position_buckets, max_relative_positions) : r;
  const int64_t row = b + s;
  return row < 0 ? 0 : (row > 2 * s - 1 ? 2 * s - 1 : row);
}

// The row of every (i, j) of a [Tq, Tk] score matrix, query i at
// q_offset + i and key j at j: i32, row-major.
inline std::vector<int32_t> relative_rows(int64_t Tq, int64_t Tk, int64_t q_offset,
                                          int64_t position_buckets,
                                          int64_t max_relative_positions) {
  std::vector<int32_t> rows(static_cast<size_t>(Tq * Tk));
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j)
      rows[static_cast<size_t>(i * Tk + j)] = static_cast<int32_t>(
          relative_row(q_offset + i - j, position_buckets, max_relative_positions));
  return rows;
}

}  // namespace rotor::deberta
