// Hot CPU loops in several builds of one binary: ROTOR_CPU_CLONES before a
// function compiles it for AVX-512, for AVX2 and for the x86-64 baseline
// (GCC's target_clones), and the loader picks the best one the CPU has. The
// rest of rotor is built for the baseline, so the same binary runs on any
// x86-64 machine (the GPU machines' hosts included).
//
// A cloned function must give the same bits in every clone: integer work, or
// floating-point work without reductions whose order the vector width changes
// and without FMA contraction (a file with clones is compiled with
// -ffp-contract=off, CMakeLists.txt), so that results never depend on the CPU.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define ROTOR_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ROTOR_CPU_CLONES
#endif

namespace rotor::ops::detail {

// f(begin, end) over [0, n) in chunks of kChunk elements, the chunks handed
// to the OpenMP threads one at a time (a thread that loses its core for a
// while holds up no one); one chunk (a small tensor) runs on the calling
// thread, without waking a team for a few microseconds of work. f must
// write only its own chunk's elements.
template <class F>
void for_chunks(int64_t n, F&& f) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
}

}  // namespace rotor::ops::detail
