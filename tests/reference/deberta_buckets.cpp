// rotor's DeBERTa relative positions (core/deberta_bias.h), for
// tests/scripts/deberta_buckets_check.py to hold row by row against
// transformers' DeBERTa-v2.
//
//   reference_deberta_buckets BUCKETS:MAX_RELATIVE...
//
// For each setting (model.deberta.position_buckets, max_relative_positions),
// one line: BUCKETS MAX_RELATIVE N, then the relative table rows
// deberta::relative_row of the relative positions r = query - key = -N .. N,
// N = 3 max(MAX_RELATIVE, span) (span: BUCKETS, or MAX_RELATIVE without
// buckets), all separated by spaces.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "core/deberta_bias.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: reference_deberta_buckets BUCKETS:MAX_RELATIVE...\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t colon = arg.find(':');
    int64_t buckets = 0, max_relative = 0;
    try {
      if (colon == std::string::npos) throw std::invalid_argument(arg);
      buckets = std::stoll(arg.substr(0, colon));
      max_relative = std::stoll(arg.substr(colon + 1));
    } catch (const std::exception&) {
      std::fprintf(stderr, "reference_deberta_buckets: %s is not BUCKETS:MAX_RELATIVE\n",
                   arg.c_str());
      return 2;
    }
    // model.deberta's rules (config/checks.cpp): no buckets (0) or an even
    // count of at least 4 whose log-spaced part reaches beyond the exact half.
    const bool ok =
        max_relative >= 1 &&
        (buckets == 0 || (buckets >= 4 && buckets % 2 == 0 && max_relative > buckets / 2 + 1));
    if (!ok) {
      std::fprintf(stderr, "reference_deberta_buckets: %s: no valid model.deberta setting\n",
                   arg.c_str());
      return 2;
    }
    const int64_t n = 3 * std::max(max_relative, rotor::deberta::span(buckets, max_relative));
    std::printf("%lld %lld %lld", static_cast<long long>(buckets),
                static_cast<long long>(max_relative), static_cast<long long>(n));
    for (int64_t r = -n; r <= n; ++r)
      std::printf(" %lld",
                  static_cast<long long>(rotor::deberta::relative_row(r, buckets, max_relative)));
    std::printf("\n");
  }
  return 0;
}
