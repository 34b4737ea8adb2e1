#include "ops/cpu_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/cpu_clones.h"
#include "ops/cpu_lanes.h"
#include "ops/cpu_math.h"

namespace rotor::ops::detail {

ROTOR_CPU_CLONES void softmax_row(float* row, int64_t n) {
  if (n <= 0) return;
  const float mx = lane_max(row, n);
  const double sum = lane_sum(n, [&](int64_t j) {
    const float e = exp_f32(row[j] - mx);
    row[j] = e;
    return static_cast<double>(e);
  });
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) row[i] *= inv;
}

ROTOR_CPU_CLONES double masked_dot_row(const float* p, float* dp, int64_t n) {
  return lane_sum(n, [&](int64_t j) {
    const float g = p[j] == 0.0f ? 0.0f : dp[j];
    dp[j] = g;
    return static_cast<double>(g) * p[j];
  });
}

ROTOR_CPU_CLONES void exp_scale_row(float* x, int64_t n, float scale) {
  for (int64_t j = 0; j < n; ++j) x[j] = exp_f32(x[j]) * scale;
}

// row[j] -= s for j < n in 16-float vectors: the same bits as a plain loop,
// without its scalar tail of up to 15 elements -- the row's last 16 values
// are read first and written last, so that the main loop may overlap them.
[[gnu::always_inline]] inline void sub_lanes(float* row, float s, int64_t n) {
  typedef float V16 __attribute__((vector_size(16 * sizeof(float))));
  if (n < 16) {
    for (int64_t j = 0; j < n; ++j) row[j] -= s;
    return;
  }
  V16 last;
  std::memcpy(&last, row + n - 16, sizeof last);
  last -= s;
  for (int64_t j = 0; j + 16 <= n; j += 16) {
    V16 v;
    std::memcpy(&v, row + j, sizeof v);
    v -= s;
    std::memcpy(row + j, &v, sizeof v);
  }
  std::memcpy(row + n - 16, &last, sizeof last);
}

ROTOR_CPU_CLONES void favor_shift_rows(float* logits, const float* x, int64_t n, int64_t M,
                                       int64_t D, RowShift stab, float global, float* c) {
  float running = -INFINITY;  // Prefix: the largest logit of rows 0..r
  for (int64_t r = 0; r < n; ++r) {
    float* p = logits + r * M;
    const float* xr = x + r * D;
    const double sq = lane_sum(D, [&](int64_t j) { return static_cast<double>(xr[j]) * xr[j]; });
    float c0 = stab == RowShift::Global ? global : 0.0f;
    if (stab == RowShift::Row) c0 = lane_max(p, M);
    if (stab == RowShift::Prefix) c0 = running = std::max(running, lane_max(p, M));
    if (c) c[r] = c0;
    const float shift = static_cast<float>(0.5 * sq) + c0;
    sub_lanes(p, shift, M);
  }
}

ROTOR_CPU_CLONES void mul_sum_rows(const float* phi, float* dphi, int64_t n, int64_t M,
                                   double* sums) {
  for (int64_t r = 0; r < n; ++r) {
    const float* x = phi + r * M;
    float* y = dphi + r * M;
    sums[r] = lane_sum(M, [&](int64_t j) {
      y[j] *= x[j];
      return static_cast<double>(y[j]);
    });
  }
}

ROTOR_CPU_CLONES void sub_scaled_rows(float* dx, const double* sums, const float* x, int64_t n,
                                      int64_t D) {
  for (int64_t r = 0; r < n; ++r) {
    const float a = -static_cast<float>(sums[r]);
    for (int64_t j = 0; j < D; ++j) dx[r * D + j] += a * x[r * D + j];
  }
}

ROTOR_CPU_CLONES void mul_exp_row(float* row, const float* c, float c0, float m, int64_t n) {
  for (int64_t j = 0; j < n; ++j) row[j] *= exp_f32(c[j] - c0) * m;
}

ROTOR_CPU_CLONES void scale_row_to(const float* x, float a, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = a * x[j];
}

ROTOR_CPU_CLONES void add_scaled_row(float* y, float a, const float* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
}

ROTOR_CPU_CLONES void div_row_f64(const float* x, double s, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>(x[j] / s);
}

ROTOR_CPU_CLONES double dot_row_f64(const float* x, const float* y, int64_t n) {
  return lane_sum(n, [&](int64_t j) { return static_cast<double>(x[j]) * y[j]; });
}

ROTOR_CPU_CLONES void add_rows_f64(const float* x, int64_t ld, int64_t rows, int64_t n,
                                   double* acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
  }
}

namespace {

typedef float V16 __attribute__((vector_size(16 * sizeof(float))));

// A 16 x 16 block in 16 vectors transposed in place: four rounds of the
// block swap [[A, B], [C, D]] -> [[A, C], [B, D]] at granularities 8, 4, 2
// and 1, each a two-input shuffle per row (one vpermt2ps in the AVX-512
// clone).
[[gnu::always_inline]] inline void transpose16(V16* r) {
  for (int i = 0; i < 16; ++i) {  // blocks of 8
    if (i & 8) continue;
    const V16 a = r[i], b = r[i + 8];
    r[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    r[i + 8] =
        __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  }
  for (int i = 0; i < 16; ++i) {  // blocks of 4
    if (i & 4) continue;
    const V16 a = r[i], b = r[i + 4];
    r[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    r[i + 4] =
        __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  }
  for (int i = 0; i < 16; ++i) {  // blocks of 2
    if (i & 2) continue;
    const V16 a = r[i], b = r[i + 2];
    r[i] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    r[i + 2] =
        __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
  for (int i = 0; i < 16; ++i) {  // blocks of 1
    if (i & 1) continue;
    const V16 a = r[i], b = r[i + 1];
    r[i] = __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
    r[i + 1] =
        __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  }
}

}  // namespace

ROTOR_CPU_CLONES void transpose_block(const float* in, int64_t rows, int64_t cols, int64_t ld_in,
                                      float* out, int64_t ld_out) {
  if (rows < 16 || cols < 16) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out[c * ld_out + r] = in[r * ld_in + c];
    return;
  }
  // 16 x 16 tiles; the last tile of a row or column of tiles overlaps the
  // one before it rather than running short (it writes some elements twice,
  // with the same values).
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t r = std::min(r0, rows - 16);
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int64_t c = std::min(c0, cols - 16);
      V16 t[16];
      for (int i = 0; i < 16; ++i) std::memcpy(&t[i], in + (r + i) * ld_in + c, sizeof(V16));
      transpose16(t);
      for (int i = 0; i < 16; ++i) std::memcpy(out + (c + i) * ld_out + r, &t[i], sizeof(V16));
    }
  }
}

ROTOR_CPU_CLONES float max_row(const float* row, int64_t n) {
  return lane_max(row, n);
}

ROTOR_CPU_CLONES void tanh_row(float* x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const float a = x[j] < 0.0f ? -x[j] : x[j];
    const float t = 1.0f - 2.0f / (exp_f32(a + a) + 1.0f);  // NaN stays NaN
    x[j] = x[j] < 0.0f ? -t : t;
  }
}

ROTOR_CPU_CLONES void elu1_row(const float* x, float* phi, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const float e = exp_f32(x[j] > 0.0f ? 0.0f : x[j]);  // NaN stays NaN
    phi[j] = x[j] > 0.0f ? x[j] + 1.0f : e;
  }
}

ROTOR_CPU_CLONES void elu1_grad_row(const float* x, const float* phi, const float* dphi, float* dx,
                                    int64_t n) {
  for (int64_t j = 0; j < n; ++j) dx[j] = x[j] > 0.0f ? dphi[j] : dphi[j] * phi[j];
}

ROTOR_CPU_CLONES void relu_row(const float* x, float* phi, int64_t n) {
  for (int64_t j = 0; j < n; ++j) phi[j] = x[j] > 0.0f ? x[j] : 0.0f;
}

ROTOR_CPU_CLONES void relu_grad_row(const float* x, const float* dphi, float* dx, int64_t n) {
  for (int64_t j = 0; j < n; ++j) dx[j] = x[j] > 0.0f ? dphi[j] : 0.0f;
}

// table_cos_sin: (cos, sin) of pair i of row r at 2 (r half + i). The
// pairs are rotated in explicit 16-float vectors: a plain loop over the
// interleaved pairs is what GCC's vectorizer turns into vfmaddsub (an FMA,
// whatever -ffp-contract says), which would change bits.
ROTOR_CPU_CLONES void rope_rows_interleaved(const float* table_cos_sin, const float* in, float* out,
                                            int64_t n, int64_t width, int64_t half, bool back) {
  // Eight pairs at a time in one 16-float vector (GCC's vector extension,
  // lowered by each clone to its own registers): with the table's (cos,
  // sin) spread to cc = (c, c) and ss = (-s, s) per pair and x's pairs
  // swapped, y = x cc + swap(x) ss -- per pair e c + o (-s) = e c - o s and
  // o c + e s, the products and sums of the scalar tail, in its order.
  typedef float V16 __attribute__((vector_size(16 * sizeof(float))));
  const float sign = back ? -1.0f : 1.0f;
  V16 sgn;
  for (int l = 0; l < 16; ++l) sgn[l] = l % 2 == 0 ? -sign : sign;
  const auto rotate = [&](const V16& xv, const V16& tv, V16& yv) {
    // __builtin_shufflevector: GCC 12+ and clang (the fuzzers' compiler).
    const V16 cc =
        __builtin_shufflevector(tv, tv, 0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
    const V16 ss =
        __builtin_shufflevector(tv, tv, 1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15) * sgn;
    const V16 sw =
        __builtin_shufflevector(xv, xv, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    yv = xv * cc + sw * ss;
  };
  int64_t rotated = 2 * half;
  // Whole rows rotated: rows and table rows are both contiguous, pairs never
  // straddle two rows, so the block is one long row with one tail.
  if (rotated == width && n > 1) {
    width *= n;
    rotated = width;
    n = 1;
  }
  for (int64_t r = 0; r < n; ++r) {
    const float* t = table_cos_sin + r * rotated;
    const float* x = in + r * width;
    float* y = out + r * width;
    // A tail of fewer than 8 pairs: the last 8 pairs as one more vector,
    // rotated from their inputs before the main loop may overwrite them (in
    // == out) and stored after it. The same products pair by pair.
    const bool tail = rotated % 16 != 0 && rotated > 16;
    V16 last{};
    if (tail) {
      V16 xv, tv;
      std::memcpy(&xv, x + rotated - 16, sizeof xv);
      std::memcpy(&tv, t + rotated - 16, sizeof tv);
      rotate(xv, tv, last);
    }
    int64_t j = 0;
    for (; j + 16 <= rotated; j += 16) {
      V16 xv, tv;
      std::memcpy(&xv, x + j, sizeof xv);
      std::memcpy(&tv, t + j, sizeof tv);
      V16 yv;
      rotate(xv, tv, yv);
      std::memcpy(y + j, &yv, sizeof yv);
    }
    if (tail) {
      std::memcpy(y + rotated - 16, &last, sizeof last);
    } else {
      for (; j < rotated; j += 2) {
        const float e = x[j], o = x[j + 1], c = t[j], sn = sign * t[j + 1];
        y[j] = e * c - o * sn;
        y[j + 1] = o * c + e * sn;
      }
    }
    if (y != x)
      for (j = rotated; j < width; ++j) y[j] = x[j];
  }
}

ROTOR_CPU_CLONES void rope_rows_half(const float* table_cos_sin, const float* in, float* out,
                                     int64_t n, int64_t width, int64_t half, bool back) {
  const float sign = back ? -1.0f : 1.0f;
  for (int64_t r = 0; r < n; ++r) {
    const float* t = table_cos_sin + 2 * r * half;
    const float* x = in + r * width;
    float* y = out + r * width;
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = x[i], x1 = x[i + half], c = t[2 * i], s = sign * t[2 * i + 1];
      y[i] = x0 * c - x1 * s;
      y[i + half] = x1 * c + x0 * s;
    }
    if (y != x)
      for (int64_t j = 2 * half; j < width; ++j) y[j] = x[j];
  }
}

ROTOR_CPU_CLONES void layer_norm_row(const float* x, const float* gamma, const float* beta,
                                     int64_t n, float eps, float* y, float& mean, float& rstd,
                                     bool rms) {
  const double mu =
      rms ? 0.0 : lane_sum(n, [&](int64_t j) { return double{x[j]}; }) / static_cast<double>(n);
  // Two passes: sum((x - mu)^2) avoids the cancellation of E[x^2] - mu^2.
  const double ss = lane_sum(n, [&](int64_t j) { return (x[j] - mu) * (x[j] - mu); });
  const double rs = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  const float muf = static_cast<float>(mu), rsf = static_cast<float>(rs);
  for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - muf) * rsf * gamma[j] + beta[j];
  mean = muf;
  rstd = rsf;
}

ROTOR_CPU_CLONES void layer_norm_dx_row(const float* dy, const float* x, const float* gamma,
                                        float mean, float rstd, int64_t n, const float* add,
                                        float* dx, bool rms) {
  double sg = 0.0, sgx = 0.0;
  lane_sum2(
      n,
      [&](int64_t j, double& g, double& gx) {
        g = static_cast<double>(dy[j]) * gamma[j];
        gx = g * (x[j] - mean) * rstd;
      },
      sg, sgx);
  const float mg = rms ? 0.0f : static_cast<float>(sg / n), mgx = static_cast<float>(sgx / n);
  if (add) {
    for (int64_t j = 0; j < n; ++j) {
      const float xhat = (x[j] - mean) * rstd;
      dx[j] = add[j] + rstd * (dy[j] * gamma[j] - mg - xhat * mgx);
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float xhat = (x[j] - mean) * rstd;
    dx[j] = rstd * (dy[j] * gamma[j] - mg - xhat * mgx);
  }
}

ROTOR_CPU_CLONES void layer_norm_param_rows(const float* dy, const float* x, const float* mean,
                                            const float* rstd, int64_t rows, int64_t n, int64_t w,
                                            double* dg, double* db) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * n;
    const float* xr = x + r * n;
    const float mu = mean[r];
    const double rs = static_cast<double>(rstd[r]);
    for (int64_t j = 0; j < w; ++j) {
      const double xhat = (xr[j] - mu) * rs;
      dg[j] += dyr[j] * xhat;
      db[j] += dyr[j];
    }
  }
}

ROTOR_CPU_CLONES void small_gemm_nt(int M, int N, int K, float alpha, const float* A, int lda,
                                    const float* B, int ldb, float* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    const float* __restrict a = A + static_cast<int64_t>(i) * lda;
    for (int j = 0; j < N; ++j) {
      const float* __restrict b = B + static_cast<int64_t>(j) * ldb;
      float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      int k = 0;
      for (; k + 8 <= K; k += 8)
        for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * b[k + l];
      float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
      for (; k < K; ++k) sum += a[k] * b[k];
      C[static_cast<int64_t>(i) * ldc + j] = alpha * sum;
    }
  }
}

ROTOR_CPU_CLONES void small_gemm_xn(bool trans_a, int M, int N, int K, float alpha, const float* A,
                                    int lda, const float* B, int ldb, float* C, int ldc) {
  // A's element (i, k): A[i lda + k], or A[k lda + i] transposed.
  const int64_t step_i = trans_a ? 1 : lda, step_k = trans_a ? lda : 1;
  for (int i = 0; i < M; ++i) {
    float* __restrict c = C + static_cast<int64_t>(i) * ldc;
    for (int n = 0; n < N; ++n) c[n] = 0.0f;
    for (int k = 0; k < K; ++k) {
      const float a = A[i * step_i + k * step_k];
      const float* __restrict b = B + static_cast<int64_t>(k) * ldb;
      for (int n = 0; n < N; ++n) c[n] += a * b[n];
    }
    if (alpha != 1.0f)
      for (int n = 0; n < N; ++n) c[n] *= alpha;
  }
}

}  // namespace rotor::ops::detail
