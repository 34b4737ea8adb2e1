// rotor's T5 relative position buckets (core/t5_bias.h), for
// tests/scripts/t5_buckets_check.py to hold bucket by bucket against
// transformers' T5 attention.
//
//   reference_t5_buckets BUCKETS:MAX_DISTANCE...
//
// For each setting, bidirectional (an encoder) and then causal (a decoder),
// one line: BUCKETS MAX_DISTANCE BIDIRECTIONAL(1|0) N, then the buckets of the
// relative positions r = key - query = -N .. N, N = 3 MAX_DISTANCE, all
// separated by spaces.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "core/t5_bias.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: reference_t5_buckets BUCKETS:MAX_DISTANCE...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t colon = arg.find(':');
    int64_t buckets = 0, max_distance = 0;
    try {
      if (colon == std::string::npos) throw std::invalid_argument(arg);
      buckets = std::stoll(arg.substr(0, colon));
      max_distance = std::stoll(arg.substr(colon + 1));
    } catch (const std::exception&) {
      std::fprintf(stderr, "reference_t5_buckets: %s is not BUCKETS:MAX_DISTANCE\n", arg.c_str());
      return 2;
    }
    // model.t5's rules (config/checks.cpp): an even count of at least 4, and a
    // max distance beyond the causal table's exact buckets.
    if (buckets < 4 || buckets % 2 != 0 || max_distance <= buckets / 2) {
      std::fprintf(stderr, "reference_t5_buckets: %s: no valid model.t5 setting\n", arg.c_str());
      return 2;
    }
    const int64_t n = 3 * max_distance;
    for (const bool bidirectional : {true, false}) {
      std::printf("%lld %lld %d %lld", static_cast<long long>(buckets),
                  static_cast<long long>(max_distance), bidirectional ? 1 : 0,
                  static_cast<long long>(n));
      for (int64_t r = -n; r <= n; ++r)
        std::printf(" %lld", static_cast<long long>(
                                 rotor::t5::bucket(r, buckets, max_distance, bidirectional)));
      std::printf("\n");
    }
  }
  return 0;
}
