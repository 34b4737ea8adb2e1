// WMMA (nvcuda::wmma, mma.h) for the emulated Volta kernels
// (kernels/flash_attention_sm70.cu), included after cuda_emulation.h by
// flash_sm70_emulate.cpp and by the emulated device (device/README.md). A
// fragment is the whole 16 x 16 tile, held by every lane: loads read it
// whole, mma_sync computes it with fp32 sums of exact products, and stores
// write it from lane 0 once every lane of the warp has reached the store.
// So the emulation checks the kernels' tiling, indexing and
// synchronization, not the tensor cores' rounding.
#pragma once

#include <cuda_fp16.h>

#include <type_traits>

#include "cuda_emulation.h"

namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  float x[16][16];
};

template <class F>
void fill_fragment(F& f, float v) {
  for (auto& row : f.x)
    for (float& e : row) e = v;
}
template <class Use, class L>
void load_matrix_sync(fragment<Use, 16, 16, 16, __half, L>& f, const __half* p, unsigned ldm) {
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      f.x[r][c] = __half2float(std::is_same_v<L, row_major> ? p[r * ldm + c] : p[c * ldm + r]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t l) {
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      f.x[r][c] = l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
}
template <class A, class B>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const A& a, const B& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  fragment<accumulator, 16, 16, 16, float> t = c;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      for (int k = 0; k < 16; ++k) t.x[i][j] += a.x[i][k] * b.x[k][j];
  d = t;
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t l) {
  // On the device each lane stores the elements it loaded for the same
  // layout, so an accumulator read and written back in place is no race; here
  // every lane reads the whole tile, so lane 0 writes once all have.
  __syncwarp();
  if (emu::lane() != 0) return;
  for (unsigned r = 0; r < 16; ++r)
    for (unsigned c = 0; c < 16; ++c)
      (l == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[r][c];
}
}  // namespace nvcuda::wmma
