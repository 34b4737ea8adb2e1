// The CPU GEMM libraries side by side (docs/design.md, "The CPU GEMM"):
// OpenBLAS's cblas_sgemm against oneDNN's dnnl_sgemm, row-major, on the
// products of one tiny-config update (2,048 tokens, d_model 128, d_ff 512,
// vocabularies of 260 and 8,000) and of the per-head attention core (T 128,
// head dim 32), on the same OpenMP threads. Prints, per shape, the best of
// three rounds (each a repeat count worth about 2 GFLOP) for both, their
// ratio and the largest difference of their results.
//
//   build-cpu/bench/bench_gemm_libs   (a build with oneDNN: ROTOR_CPU_GEMM auto or onednn)
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

struct Shape {
  bool ta, tb;
  int M, N, K;
  const char* what;
};

double seconds_per_call(int reps, const auto& call) {
  call();  // warm up
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

}  // namespace

int main() {
  constexpr int T = 2048;
  const std::vector<Shape> shapes = {
      {false, true, T, 384, 128, "qkv forward"},   {false, true, T, 128, 128, "out forward"},
      {false, true, T, 512, 128, "ff1 forward"},   {false, true, T, 128, 512, "ff2 forward"},
      {false, true, T, 260, 128, "bytes logits"},  {false, false, T, 128, 384, "qkv dX"},
      {true, false, 384, 128, T, "qkv dW"},        {false, false, T, 128, 512, "ff dX"},
      {true, false, 512, 128, T, "ff1 dW"},        {true, false, 128, 512, T, "ff2 dW"},
      {false, true, 128, 128, 32, "head scores"},  {false, false, 128, 32, 128, "head P V"},
      {false, true, T, 8000, 128, "8k logits"},    {false, false, T, 128, 8000, "8k logits dX"},
      {true, false, 8000, 128, T, "8k logits dW"},
  };
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  double total_blas = 0, total_dnnl = 0;
  std::printf("%-14s %-2s %17s %22s %22s %6s %9s\n", "product", "op", "M x N x K",
              "OpenBLAS us (GFLOP/s)", "oneDNN us (GFLOP/s)", "ratio", "max diff");
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.M) * s.K), b(static_cast<size_t>(s.K) * s.N);
    std::vector<float> c1(static_cast<size_t>(s.M) * s.N), c2(c1.size());
    for (float& x : a) x = uniform(rng);
    for (float& x : b) x = uniform(rng);
    const int lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    const double flop = 2.0 * s.M * s.N * s.K;
    const int reps = std::max(3, static_cast<int>(2e9 / flop));
    const auto blas = [&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
                  s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c1.data(), s.N);
    };
    const auto dnnl = [&] {
      dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(),
                 ldb, 0.0f, c2.data(), s.N);
    };
    double best_blas = 1e30, best_dnnl = 1e30;
    for (int round = 0; round < 3; ++round) {
      best_blas = std::min(best_blas, seconds_per_call(reps, blas));
      best_dnnl = std::min(best_dnnl, seconds_per_call(reps, dnnl));
    }
    double diff = 0;
    for (size_t i = 0; i < c1.size(); ++i)
      diff = std::max(diff, static_cast<double>(std::fabs(c1[i] - c2[i])));
    std::printf("%-14s %c%c %5d x %5d x %4d %12.1f (%6.1f) %12.1f (%6.1f) %6.2f %9.1e\n", s.what,
                s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K, best_blas * 1e6,
                flop / best_blas * 1e-9, best_dnnl * 1e6, flop / best_dnnl * 1e-9,
                best_blas / best_dnnl, diff);
    total_blas += best_blas;
    total_dnnl += best_dnnl;
  }
  std::printf("all shapes: OpenBLAS %.2f ms, oneDNN %.2f ms (ratio %.2f)\n", total_blas * 1e3,
              total_dnnl * 1e3, total_blas / total_dnnl);
  return 0;
}
