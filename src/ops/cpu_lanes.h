// Row sums in double in a fixed order, whatever the vector width: 16 lanes,
// lane l adding the terms j = l mod 16 in order, then the lanes in order,
// then the tail. Independent lanes let the compiler vectorize the sums (one
// accumulator would chain every addition on the last), and the order, so
// the bits, are the same in every vector clone (ops/cpu_clones.h). Always
// inlined, so that a clone that calls them vectorizes them for its own ISA.
#pragma once

#include <cstdint>

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

}  // namespace rotor::ops::detail
