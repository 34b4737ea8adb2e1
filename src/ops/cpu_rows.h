// Row loops of the CPU attention cores in vector clones (ops/cpu_clones.h):
// the same bits on every CPU, sums in double in a fixed order.
#pragma once

#include <cstdint>

namespace rotor::ops::detail {

// The softmax of row[0, n) in place: e^(row[j] - max) by ops/cpu_math.h's
// exp_f32 (within about 2 ulp), the sum in double in 16 lanes (lane l adds
// j = l mod 16 in order, then the lanes, then the tail), each term times
// the float reciprocal of the sum. n = 0 leaves the row alone.
void softmax_row(float* row, int64_t n);

// The softmax backward's row sum without dropout: dp[j] set to 0 where
// p[j] is 0 (a masked key), then sum_j dp[j] p[j] in double in the same 16
// lanes.
double masked_dot_row(const float* p, float* dp, int64_t n);

// FAVOR+'s features of n rows: favor_shift_rows subtracts from each row of
// logits [n, M] its shift 0.5 |x_r|^2 + c_r (x: the rows [n, D] the logits
// came from, |x_r|^2 in double in the 16 lanes of softmax_row), c_r being 0
// (None), the row's largest logit (Row, by max_row), `global` (Global) or
// the running largest of rows 0..r (Prefix); c (optional) receives each
// c_r. exp_scale_row then makes x[j] = e^x[j] * scale (exp_f32) over the
// whole block, whose vector loop has one tail, not one a row (110 features
// are 6 vectors of 16 and 14 tail elements).
enum class RowShift { None, Row, Global, Prefix };
void favor_shift_rows(float* logits, const float* x, int64_t n, int64_t M, int64_t D, RowShift stab,
                      float global, float* c);
void exp_scale_row(float* x, int64_t n, float scale);
// FAVOR+'s backward over n rows: mul_sum_rows makes t = dphi o phi in place
// and its row sums (double, the 16 lanes); after the caller's dx = t W,
// sub_scaled_rows adds -float(sums[r]) x_r to each row of dx.
void mul_sum_rows(const float* phi, float* dphi, int64_t n, int64_t M, double* sums);
void sub_scaled_rows(float* dx, const double* sums, const float* x, int64_t n, int64_t D);

// x[j] = tanh(x[j]) in place for j < n, as sign(x) (1 - 2 / (e^(2|x|) + 1))
// by exp_f32: within about 1e-7 of tanh (absolute; near 0 the difference of
// the two terms loses the low bits of x), exactly +-1 past |x| ~ 9, NaN for
// NaN. The classifier's label attention (models/bert_classifier.cpp) runs
// it over [examples, labels, d] values, where std::tanh costs ~10 ms a step.
void tanh_row(float* x, int64_t n);

// row[j] *= e^(c[j] - c0) * m for j < n, by exp_f32 (causal FAVOR+'s
// per-key stabilizers).
void mul_exp_row(float* row, const float* c, float c0, float m, int64_t n);

// Row updates of linear attention and the head split over n values, each
// element on its own (so the same bits in every clone as in a scalar loop):
// y = a x (y may be x), y += a x, and y = x / s in double rounded to float.
void scale_row_to(const float* x, float a, float* y, int64_t n);
void add_scaled_row(float* y, float a, const float* x, int64_t n);
void div_row_f64(const float* x, double s, float* y, int64_t n);
// sum_j x[j] y[j] in double in the 16 lanes of softmax_row (linear
// attention's denominators and row sums).
double dot_row_f64(const float* x, const float* y, int64_t n);

// acc[j] += x[r * ld + j] for r < rows in order, j < n, in double: column
// sums of a block of rows (sum_rows, the bias gradients), each column's in
// row order whatever the vector width.
void add_rows_f64(const float* x, int64_t ld, int64_t rows, int64_t n, double* acc);

// out[c * ld_out + r] = in[r * ld_in + c] for r < rows, c < cols: a block
// transposed in 16 x 16 tiles of vector shuffles (linear attention's key
// rows, so that its products read B as stored: oneDNN runs [32, 110] x
// [110, 32] about 1.6x as fast as with B transposed). in and out must not
// overlap.
void transpose_block(const float* in, int64_t rows, int64_t cols, int64_t ld_in, float* out,
                     int64_t ld_out);

// The largest of row[0, n) (NaNs skipped; -inf for n = 0; ops/cpu_lanes.h
// lane_max).
float max_row(const float* row, int64_t n);

// Linear attention's elementwise feature maps, n values: phi = elu(x) + 1
// (x + 1 for x > 0, else exp_f32(x)) or max(x, 0), and their backward dx =
// dphi phi' (for elu1 phi' = 1 for x > 0, else phi). dx may alias dphi.
void elu1_row(const float* x, float* phi, int64_t n);
void elu1_grad_row(const float* x, const float* phi, const float* dphi, float* dx, int64_t n);
void relu_row(const float* x, float* phi, int64_t n);
void relu_grad_row(const float* x, const float* dphi, float* dx, int64_t n);

// RoPE of n rows of `width` floats (core/rope.h, pairs of the first 2 half
// dimensions rotated by table[r * half + i], the rest copied; back: the
// transpose), for the interleaved (pairs (2i, 2i+1)) and the half layout
// (pairs (i, i + half)). in may equal out. The same products as
// rope::rotate / rotate_back, pair by pair.
void rope_rows_interleaved(const float* table_cos_sin, const float* in, float* out, int64_t n,
                           int64_t width, int64_t half, bool back);
void rope_rows_half(const float* table_cos_sin, const float* in, float* out, int64_t n,
                    int64_t width, int64_t half, bool back);

// Layer normalization of one row x[n] (ops/layer_norm.h): mean and the
// biased variance in double by the lane sums (two passes), rstd =
// 1/sqrt(var + eps), y = (x - mean) rstd gamma + beta in f32. With rms the
// mean is 0 (RMSNorm: var is the mean of x^2).
void layer_norm_row(const float* x, const float* gamma, const float* beta, int64_t n, float eps,
                    float* y, float& mean, float& rstd, bool rms = false);

// Its backward for one row: dx = rstd (g - mean(g) - xhat mean(g xhat)),
// g = dy gamma, the two means by the lane sums in double (rms: without the
// mean(g) term, mean 0); with add (not null) dx = add + that, one rounding
// (add's bits plus the same float). dx may alias dy or add.
void layer_norm_dx_row(const float* dy, const float* x, const float* gamma, float mean, float rstd,
                       int64_t n, const float* add, float* dx, bool rms = false);

// dg[j] += sum_r dy[r, j] xhat[r, j] and db[j] += sum_r dy[r, j] for the w
// columns starting at dy and x (rows of stride n), the rows in order, in
// double: each column the same additions as one column at a time.
void layer_norm_param_rows(const float* dy, const float* x, const float* mean, const float* rstd,
                           int64_t rows, int64_t n, int64_t w, double* dg, double* db);

// The materialized attention core's products for short rows (kSmallRows
// and below): dnnl_sgemm spends 0.5 to 3 microseconds a call on dispatch,
// several times the arithmetic of an 8 x 8 x 32 product, and the core makes
// six products per (batch, head). beta is 0: C is overwritten.
//   small_gemm_nt: C[M, N] = alpha A[M, K] B[N, K]^T, each element a dot
//     product over K in 8 lanes (lane l adds k = l mod 8 in order, then a
//     fixed tree, then the tail);
//   small_gemm_xn: C[M, N] = alpha A[M, K] B[K, N], or alpha A[K, M]^T B[K, N]
//     with trans_a, each element summed over k in order (then times alpha,
//     unless alpha is 1).
// The same bits in every clone; not those of cpu_sgemm.
constexpr int64_t kSmallRows = 12;
void small_gemm_nt(int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                   int ldb, float* C, int ldc);
void small_gemm_xn(bool trans_a, int M, int N, int K, float alpha, const float* A, int lda,
                   const float* B, int ldb, float* C, int ldc);

}  // namespace rotor::ops::detail
