// Head split with RoPE fused in (RoFormer eq. 34, interleaved pairs) and the
// head merge. One thread per rotation pair (two adjacent elements). The
// rotation is core/rope.h, the very code of the CPU path: angles in double,
// their cosine and sine rounded to float.
#include "core/rope.h"
#include "kernels/common.cuh"
#include "kernels/heads.cuh"

namespace rotor::kernels {

namespace {

struct PartPtrs {
  void* p[3];
};

// Blocks of the grid-stride loops below (more than common.cuh's default cap:
// one thread per pair of a [B, T, P, H, D] tensor is many threads).
constexpr int64_t kMaxBlocks = 65535 * 8;

// Grid: one thread per (b, t, p, h, pair).
template <class T, bool kBackward>
__global__ void split_heads_kernel(const T* __restrict__ x_or_null, PartPtrs parts,
                                   T* __restrict__ dx_or_null, HeadsShape s, int rotary_parts,
                                   double base, int64_t offset, float scale0) {
  const int64_t half = s.D / 2;
  const int64_t total = s.B * s.T * s.P * s.H * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half;
    int64_t r = idx / half;
    const int64_t h = r % s.H;
    r /= s.H;
    const int64_t p = r % s.P;
    r /= s.P;
    const int64_t t = r % s.T;
    const int64_t b = r / s.T;
    const int64_t packed = (((b * s.T + t) * s.P + p) * s.H + h) * s.D + 2 * i;  // [B,T,P,H,D]
    const int64_t split = ((b * s.H + h) * s.T + t) * s.D + 2 * i;               // [B,H,T,D]
    const float sc = p == 0 ? scale0 : 1.0f;
    const rope::Rotation rot =
        p < rotary_parts ? rope::rotation(t + offset, i, s.D, base) : rope::Rotation{1.0f, 0.0f};
    T* part = static_cast<T*>(parts.p[p]);
    float y0, y1;
    if (!kBackward) {
      rope::rotate(to_f32(x_or_null[packed]), to_f32(x_or_null[packed + 1]), rot, y0, y1);
      part[split] = from_f32<T>(y0 * sc);
      part[split + 1] = from_f32<T>(y1 * sc);
    } else {
      rope::rotate_back(to_f32(part[split]) * sc, to_f32(part[split + 1]) * sc, rot, y0, y1);
      dx_or_null[packed] = from_f32<T>(y0);
      dx_or_null[packed + 1] = from_f32<T>(y1);
    }
  }
}

template <class T>
__global__ void merge_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t B, int64_t H,
                             int64_t Tn, int64_t D, bool forward) {
  const int64_t total = B * H * Tn * D;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % D;
    int64_t r = idx / D;
    const int64_t h = r % H;
    r /= H;
    const int64_t t = r % Tn;
    const int64_t b = r / Tn;
    const int64_t merged = idx;                            // [B, T, H, D] index
    const int64_t split = ((b * H + h) * Tn + t) * D + i;  // [B, H, T, D]
    if (forward)
      dst[merged] = src[split];
    else
      dst[split] = src[merged];
  }
}

cudaError_t split_any(const void* x, PartPtrs parts, void* dx, HeadsShape s, DType dtype, int rot,
                      float base, int64_t off, float scale0, bool backward, cudaStream_t stream) {
  const unsigned grid = grid_for(s.B * s.T * s.P * s.H * (s.D / 2), kThreads, kMaxBlocks);
  const double base_d = static_cast<double>(base);
  ROTOR_FLOAT_SWITCH(dtype, T,
                     if (backward) split_heads_kernel<T, true><<<grid, kThreads, 0, stream>>>(
                         nullptr, parts, static_cast<T*>(dx), s, rot, base_d, off, scale0);
                     else split_heads_kernel<T, false><<<grid, kThreads, 0, stream>>>(
                         static_cast<const T*>(x), parts, nullptr, s, rot, base_d, off, scale0));
  return cudaGetLastError();
}

}  // namespace

cudaError_t split_heads_forward(const void* x, void* const parts[3], HeadsShape s, DType dtype,
                                int rotary_parts, float rope_base, int64_t position_offset,
                                float part0_scale, cudaStream_t stream) {
  PartPtrs pp{{parts[0], parts[1], parts[2]}};
  return split_any(x, pp, nullptr, s, dtype, rotary_parts, rope_base, position_offset, part0_scale,
                   false, stream);
}

cudaError_t split_heads_backward(const void* const dparts[3], void* dx, HeadsShape s, DType dtype,
                                 int rotary_parts, float rope_base, int64_t position_offset,
                                 float part0_scale, cudaStream_t stream) {
  PartPtrs pp{
      {const_cast<void*>(dparts[0]), const_cast<void*>(dparts[1]), const_cast<void*>(dparts[2])}};
  return split_any(nullptr, pp, dx, s, dtype, rotary_parts, rope_base, position_offset, part0_scale,
                   true, stream);
}

cudaError_t merge_heads(const void* src, void* dst, int64_t B, int64_t H, int64_t T, int64_t D,
                        DType dtype, bool forward, cudaStream_t stream) {
  const unsigned grid = grid_for(B * H * T * D, kThreads, kMaxBlocks);
  switch (dtype) {
    case DType::F32:
      merge_kernel<float><<<grid, kThreads, 0, stream>>>(
          static_cast<const float*>(src), static_cast<float*>(dst), B, H, T, D, forward);
      break;
    case DType::F16:
    case DType::BF16:  // a pure permutation: move 16-bit words
      merge_kernel<uint16_t><<<grid, kThreads, 0, stream>>>(
          static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), B, H, T, D, forward);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace rotor::kernels
