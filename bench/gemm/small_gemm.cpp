// The small products of linear attention's sweeps (docs/design.md, "The CPU
// GEMM"): oneDNN's dnnl_sgemm against rotor's small-matrix kernel
// (ops::cpu_small_sgemm: libxsmm where the build has it), row-major, no
// transposes, on the shapes one (batch, head) of the FAVOR+ LM multiplies
// (T 128, head dim 32, M = 110 features, chunks of 16 rows). As the sweeps
// call them: every OpenMP thread at once, each on its own matrices, one
// call after another. Prints, per shape, the best of three rounds of
// microseconds a call for both, their ratio and the largest difference of
// their results.
//
//   build-cpu/bench/bench_small_gemm   (a build with oneDNN and libxsmm)
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "ops/cpu_gemm.h"

namespace {

struct Shape {
  int M, N, K;
  float beta;
  const char* what;
};

// Microseconds a call, the best of three rounds of `reps` calls on every thread.
double us_per_call(int reps, const auto& call) {
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
#pragma omp parallel
    call(omp_get_thread_num());  // warm up
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
    for (int r = 0; r < reps; ++r) call(omp_get_thread_num());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s / reps * 1e6);
  }
  return best;
}

}  // namespace

int main() {
  std::printf("small products: %s against oneDNN, %d thread(s) at once\n",
              rotor::ops::cpu_small_gemm_name(), omp_get_max_threads());
  const std::vector<Shape> shapes = {
      {128, 110, 32, 0.0f, "features"},    {128, 32, 110, 0.0f, "features dx"},
      {16, 16, 110, 0.0f, "chunk scores"}, {16, 32, 16, 1.0f, "scores V"},
      {16, 110, 16, 1.0f, "dP a(k)"},      {110, 32, 16, 1.0f, "state S"},
      {16, 32, 110, 0.0f, "a(q) S"},       {32, 110, 16, 1.0f, "state U^T"},
  };
  const int threads = omp_get_max_threads();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  double total_dnnl = 0, total_small = 0;
  std::printf("%-13s %15s %12s %12s %6s %9s\n", "product", "M x N x K", "oneDNN us", "small us",
              "ratio", "max diff");
  for (const Shape& s : shapes) {
    const size_t na = static_cast<size_t>(s.M) * s.K, nb = static_cast<size_t>(s.K) * s.N,
                 nc = static_cast<size_t>(s.M) * s.N;
    std::vector<float> a(na * threads), b(nb * threads), c1(nc * threads), c2(nc * threads);
    for (float& x : a) x = uniform(rng);
    for (float& x : b) x = uniform(rng);
    const int reps = std::max(200, static_cast<int>(2e8 / (2.0 * s.M * s.N * s.K)));
    const double dnnl = us_per_call(reps, [&](int t) {
      dnnl_sgemm('N', 'N', s.M, s.N, s.K, 1.0f, a.data() + t * na, s.K, b.data() + t * nb, s.N,
                 s.beta, c1.data() + t * nc, s.N);
    });
    bool ran = true;
    const double small = us_per_call(reps, [&](int t) {
      if (!rotor::ops::cpu_small_sgemm(s.M, s.N, s.K, a.data() + t * na, s.K, b.data() + t * nb,
                                       s.N, s.beta, c2.data() + t * nc, s.N))
        ran = false;
    });
    if (!ran) {
      std::printf("%-13s %4d x %4d x %4d: no small kernel in this build\n", s.what, s.M, s.N, s.K);
      continue;
    }
    // One call of each on zeroed outputs, to compare the results.
    std::fill(c1.begin(), c1.end(), 0.0f);
    std::fill(c2.begin(), c2.end(), 0.0f);
    dnnl_sgemm('N', 'N', s.M, s.N, s.K, 1.0f, a.data(), s.K, b.data(), s.N, 0.0f, c1.data(), s.N);
    rotor::ops::cpu_small_sgemm(s.M, s.N, s.K, a.data(), s.K, b.data(), s.N, 0.0f, c2.data(), s.N);
    double diff = 0;
    for (size_t i = 0; i < nc; ++i) diff = std::max(diff, double(std::fabs(c1[i] - c2[i])));
    total_dnnl += dnnl;
    total_small += small;
    std::printf("%-13s %4d x %4d x %4d %12.2f %12.2f %6.2f %9.1e\n", s.what, s.M, s.N, s.K, dnnl,
                small, dnnl / small, diff);
  }
  std::printf("all shapes, one call each: oneDNN %.2f us, small %.2f us (ratio %.2f)\n", total_dnnl,
              total_small, total_small > 0 ? total_dnnl / total_small : 0.0);
}
