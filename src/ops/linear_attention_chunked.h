// Causal linear attention with the chunks in parallel: the algorithm CUDA
// runs for causal calls with Tq == Tk (src/ops/linear_attention_cuda.cpp),
// written once over a small backend of batched GEMMs and four row kernels,
// with a CPU backend as its twin (tests/cpu/test_linear_attention_chunked.cpp
// holds it to the CPU op's sweeps; kernels/linear_attention_chunks.cu holds
// the CUDA row kernels, emulated on the CPU by kernels_emulate).
//
// The sequential sweep of the chunked kernels (kernels/linear_attention_
// device.cuh) walks a head's chunks one after another: on a GPU one block
// per (batch, head), a few blocks for the whole device. Here the T rows of a
// head are cut into C = ceil(T / L) chunks of L rows (the last one padded
// with zero rows), and every product is one GEMM batched over all B H C
// chunks:
//   forward:  U_c = b'_c^T v_c and u_c = phi'_c^T 1 (a chunk's keys, with
//             f_n = exp(s_n - e_c) on key n: its stabilizer against the
//             chunk's last one); an exclusive scan over the chunks with the
//             decays exp(e_{c-1} - e_c) gives the state S_c, z_c of all the
//             keys before chunk c; num = a'_c S_c + P_c v_c and den =
//             phi'_c z_c + rowsum(Pd_c), with g_m = exp(e_{c-1} - s_m) on
//             query m (a' = g a) and P_c = [n <= m] exp(s_n - s_m) a_m.b_n
//             the masked product inside the chunk (Pd the same with phi).
//   backward: the forward's states again; d a = g G S^T + Q b with Q =
//             [n <= m] exp(s_n - s_m) G_m.v_n; d phi(q) = g dden z^T + W phi(k)
//             with W = [n <= m] exp(s_n - s_m) dden_m; the suffix states R_c,
//             r_c of the queries after chunk c (a reverse scan of a'^T G and
//             phi'^T dden) give d b = f v R^T + Q^T a, dv = f b R + P^T G and
//             d phi(k) = f r^T + W^T phi(q).
// s_t is the prefix stabilizer of key min(t, key_len - 1) (Favor with
// causal; 0 otherwise), so s never decreases along a head and every factor
// above is at most 1; e_c = s at chunk c's last row. The result is the
// sequential sweep's up to fp32 rounding (sums in another order).
//
// Inputs and outputs are f32 [BH, T, X] row-major; a == phi (the same
// pointer) when nothing is rotated after the feature map, and the backward's
// d a / d phi(q) (and d b / d phi(k)) may then be one buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace rotor::ops::linear_chunked {

// What the algorithm runs on: CPU loops and sgemm, or cuBLASLt and the
// kernels of kernels/linear_attention_chunks.cu. Every pointer is f32 (or
// i32 key lengths) on the backend's device, contiguous.
class Backend {
 public:
  virtual ~Backend() = default;
  // batch products D_i = op(A_i) op(B_i) + beta D_i, A_i = a + i sa, ...,
  // row-major, op = transpose where ta / tb; k >= 1.
  virtual void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t sa,
                    const float* b, int64_t sb, float* d, int64_t sd, int64_t batch,
                    float beta) = 0;
  // dst [BH, dst_rows, X] = src [BH, src_rows, X] row for row (times
  // scale[bh, row] [BH, dst_rows] when given), rows past src_rows zero.
  virtual void rows(const float* src, int64_t src_rows, float* dst, int64_t dst_rows, int64_t X,
                    int64_t BH, const float* scale) = 0;
  // From the prefix stabilizers ck [BH, T] (null: none) and key lengths
  // key_len [B] (null: T; H heads a batch row): s, f, g [BH, Tpad] and
  // decay [BH, C] (C = Tpad / L): with len = min(key_len, T), s_t =
  // ck[min(t, len - 1)] (0 without ck or keys), e_c = s_{cL + L - 1}, f_t =
  // exp(s_t - e_c) for a key t < len and 0 past it, g_t = exp(e_{c-1} - s_t)
  // and decay_c = exp(e_{c-1} - e_c) for t in chunk c, e_{-1} = s_0.
  virtual void factors(const float* ck, const int32_t* key_len, int64_t H, int64_t BH, int64_t T,
                       int64_t Tpad, int64_t L, float* s, float* f, float* g, float* decay) = 0;
  // In place over x [BH, C, E] (decay [BH, C]): forward, x_c := the sum over
  // c' < c of x_c' decay_{c'+1} ... decay_{c-1} (x_0 := 0); reverse, x_c :=
  // the sum over c' > c of x_c' decay_{c+1} ... decay_{c'-1} (x_{C-1} := 0).
  // Each element in turn along c, in that order (the same bits on every
  // backend).
  virtual void scan(float* x, int64_t BH, int64_t C, int64_t E, const float* decay,
                    bool reverse) = 0;
  // Over p [BH, C, L, L] with s [BH, C L], for the rows m and keys n of a
  // chunk, w = [n <= m and n < len] exp(s_n - s_m) (len as in factors):
  // multiply (p holds products), p[m, n] *= w; else p[m, n] = w coef[m]
  // (coef [BH, C L]).
  virtual void weights(float* p, const float* s, const float* coef, const int32_t* key_len,
                       int64_t H, int64_t T, int64_t BH, int64_t C, int64_t L, bool multiply) = 0;
  virtual void fill(float* p, int64_t n, float value) = 0;
  // Scratch of n floats, valid until the backend is destroyed.
  virtual float* take(int64_t n) = 0;
};

struct Inputs {
  int64_t H = 1, BH = 0, T = 0, M = 0, Dv = 0;
  int64_t L = 64;                    // rows a chunk
  const int32_t* key_len = nullptr;  // [B] or null
  const float *phq = nullptr, *aq = nullptr, *phk = nullptr, *bk = nullptr, *v = nullptr;
  const float* ck = nullptr;  // favor: [BH, T] prefix stabilizers; null: none
};

// num [BH, T, Dv] and den [BH, T] (out = num / (den + eps)).
void forward(Backend& be, const Inputs& in, float* num, float* den);

// From G = dout / (den + eps) [BH, T, Dv] and dden [BH, T]: da, dphq [BH,
// T, M] (may be one buffer), db, dphk [BH, T, M] (may be one), dv [BH, T,
// Dv], all overwritten.
void backward(Backend& be, const Inputs& in, const float* G, const float* dden, float* da,
              float* dphq, float* db, float* dphk, float* dv);

// The CPU backend (tests; the CPU op keeps its own sweeps).
class CpuBackend : public Backend {
 public:
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t sa,
            const float* b, int64_t sb, float* d, int64_t sd, int64_t batch, float beta) override;
  void rows(const float* src, int64_t src_rows, float* dst, int64_t dst_rows, int64_t X, int64_t BH,
            const float* scale) override;
  void factors(const float* ck, const int32_t* key_len, int64_t H, int64_t BH, int64_t T,
               int64_t Tpad, int64_t L, float* s, float* f, float* g, float* decay) override;
  void scan(float* x, int64_t BH, int64_t C, int64_t E, const float* decay, bool reverse) override;
  void weights(float* p, const float* s, const float* coef, const int32_t* key_len, int64_t H,
               int64_t T, int64_t BH, int64_t C, int64_t L, bool multiply) override;
  void fill(float* p, int64_t n, float value) override;
  float* take(int64_t n) override;

 private:
  std::vector<std::unique_ptr<float[]>> scratch_;
};

}  // namespace rotor::ops::linear_chunked
