// Row sums in double in a fixed order, whatever the vector width: 16 lanes,
// lane l adding the terms j = l mod 16 in order, then the lanes in order,
// then the tail. Independent lanes let the compiler vectorize the sums (one
// accumulator would chain every addition on the last), and the order, so
// the bits, are the same in every vector clone (ops/cpu_clones.h). Always
// inlined, so that a clone that calls them vectorizes them for its own ISA.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace rotor::ops::detail {

constexpr int64_t kLanes = 16;

// sum_j term(j) for j < n; term may also store (it is called once per j, in
// order within each lane).
template <class Term>
[[gnu::always_inline]] inline double lane_sum(int64_t n, Term term) {
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  double s = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) s += acc[l];
  for (; j < n; ++j) s += term(j);
  return s;
}

// Two sums at once: terms(j, u, v) gives the j-th terms of each.
template <class Terms>
[[gnu::always_inline]] inline void lane_sum2(int64_t n, Terms terms, double& s1, double& s2) {
  double a[kLanes] = {}, b[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      double u, v;
      terms(j + l, u, v);
      a[l] += u;
      b[l] += v;
    }
  s1 = s2 = 0.0;
  for (int64_t l = 0; l < kLanes; ++l) {
    s1 += a[l];
    s2 += b[l];
  }
  for (; j < n; ++j) {
    double u, v;
    terms(j, u, v);
    s1 += u;
    s2 += v;
  }
}

// max_j x[j] over j < n under the rule m = x > m ? x : m from -inf: NaNs
// are skipped, and a row of NaNs (or n = 0) gives -inf. In 16 lanes, each
// applying the rule to j = l mod 16 in order, the tail as one more vector
// (the row's last 16 values again, a max taking the same value twice being
// the same max; a shorter row padded with -inf), then the lanes pairwise:
// vector selects instead of one chain over the whole row, so that the
// clones vectorize it (the rule is x86's max instruction). The value is the
// sequential loop's except where the row's maximum is a zero of both signs;
// which zero is returned then may differ.
[[gnu::always_inline]] inline float lane_max(const float* x, int64_t n) {
  // One 16-float vector (GCC's vector extension: each clone lowers it to its
  // own registers), compared and selected lane by lane.
  typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
  Lanes acc;
  for (int64_t l = 0; l < kLanes; ++l) acc[l] = -INFINITY;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes v;
    std::memcpy(&v, x + j, sizeof v);
    acc = v > acc ? v : acc;
  }
  if (j < n) {
    Lanes v;
    if (n >= kLanes) {
      std::memcpy(&v, x + n - kLanes, sizeof v);
    } else {
      for (int64_t l = 0; l < kLanes; ++l) v[l] = l < n ? x[l] : -INFINITY;
    }
    acc = v > acc ? v : acc;
  }
  // Lanes l and l + 8, then l + 4, l + 2, l + 1.
  const Lanes h8 =
      __builtin_shufflevector(acc, acc, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  acc = h8 > acc ? h8 : acc;
  const Lanes h4 =
      __builtin_shufflevector(acc, acc, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
  acc = h4 > acc ? h4 : acc;
  const Lanes h2 =
      __builtin_shufflevector(acc, acc, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1);
  acc = h2 > acc ? h2 : acc;
  return acc[1] > acc[0] ? acc[1] : acc[0];
}

}  // namespace rotor::ops::detail
