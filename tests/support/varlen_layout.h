// The variable-length layout of the flash core's tests (ops::AttentionOptions::
// cu_seqlens_q): documents end to end, [H, total, W], against the same
// documents regrouped, one a row of the longest's length, [N, H, L, W].
// tests/cpu/test_flash_varlen.cpp and tests/gpu/test_flash_varlen_cuda.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace rotor::test {

// cu_seqlens of documents of these lengths: i32 [N + 1] from 0.
inline std::vector<int32_t> offsets(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> cu(lengths.size() + 1, 0);
  for (size_t n = 0; n < lengths.size(); ++n) cu[n + 1] = cu[n] + lengths[n];
  return cu;
}

inline int64_t longest(const std::vector<int32_t>& lengths) {
  return lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
}

// fn(stream row, regrouped row) for every document row of every head: rows
// of W elements, h * total + cu[n] + t and (n * H + h) * L + t.
template <class Fn>
void for_each_document_row(const std::vector<int32_t>& cu, int64_t H, int64_t L, Fn fn) {
  const int64_t N = static_cast<int64_t>(cu.size()) - 1, total = cu.back();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < cu[n + 1] - cu[n]; ++t)
        fn(h * total + cu[n] + t, (n * H + h) * L + t);
}

// The stream's rows into their documents' rows (rows past a document keep
// what they held).
inline void regroup(const std::vector<float>& stream, std::vector<float>& rows,
                    const std::vector<int32_t>& cu, int64_t H, int64_t L, int64_t W) {
  for_each_document_row(cu, H, L, [&](int64_t s, int64_t r) {
    std::memcpy(&rows[r * W], &stream[s * W], sizeof(float) * static_cast<size_t>(W));
  });
}

// The documents' rows of a regrouped result, in the stream's order.
inline std::vector<float> stream_of(const std::vector<float>& rows, const std::vector<int32_t>& cu,
                                    int64_t H, int64_t L, int64_t W) {
  std::vector<float> s(static_cast<size_t>(H * cu.back() * W));
  for_each_document_row(cu, H, L, [&](int64_t si, int64_t r) {
    std::memcpy(&s[si * W], &rows[r * W], sizeof(float) * static_cast<size_t>(W));
  });
  return s;
}

}  // namespace rotor::test
