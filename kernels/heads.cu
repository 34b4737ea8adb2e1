// Head split with RoPE fused in (RoFormer eq. 34, interleaved pairs) and the
// head merge. One thread per rotation pair (two adjacent elements). Angles are
// (t + offset) * theta_i with theta_i = base^(-2i/D) in double precision, then
// sincos of the double angle: accurate at positions in the thousands.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/heads.cuh"

namespace rotor::kernels {

namespace {

template <class T>
struct Elem;
template <>
struct Elem<float> {
  static __device__ float load(const float* p) { return *p; }
  static __device__ void store(float* p, float v) { *p = v; }
};
template <>
struct Elem<__half> {
  static __device__ float load(const __half* p) { return __half2float(*p); }
  static __device__ void store(__half* p, float v) { *p = __float2half_rn(v); }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
  static __device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
};

struct PartPtrs {
  void* p[3];
};

__device__ inline void rope_angle(int64_t t, int64_t offset, int64_t i, int64_t D, float base,
                                  float& c, float& s) {
  double theta =
      pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(D));
  double angle = static_cast<double>(t + offset) * theta;
  double sd, cd;
  sincos(angle, &sd, &cd);
  c = static_cast<float>(cd);
  s = static_cast<float>(sd);
}

// Grid: one thread per (b, t, p, h, pair).
template <class T, bool kBackward>
__global__ void split_heads_kernel(const T* __restrict__ x_or_null, PartPtrs parts,
                                   T* __restrict__ dx_or_null, HeadsShape s, int rotary_parts,
                                   float base, int64_t offset, float scale0) {
  const int64_t half = s.D / 2;
  const int64_t total = s.B * s.T * s.P * s.H * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i = idx % half;
    int64_t r = idx / half;
    int64_t h = r % s.H;
    r /= s.H;
    int64_t p = r % s.P;
    r /= s.P;
    int64_t t = r % s.T;
    int64_t b = r / s.T;
    const int64_t packed = (((b * s.T + t) * s.P + p) * s.H + h) * s.D + 2 * i;  // [B,T,P,H,D]
    const int64_t split = ((b * s.H + h) * s.T + t) * s.D + 2 * i;               // [B,H,T,D]
    const float sc = p == 0 ? scale0 : 1.0f;
    float c = 1.0f, sn = 0.0f;
    if (p < rotary_parts) rope_angle(t, offset, i, s.D, base, c, sn);
    T* part = static_cast<T*>(parts.p[p]);
    if (!kBackward) {
      float x0 = Elem<T>::load(x_or_null + packed), x1 = Elem<T>::load(x_or_null + packed + 1);
      Elem<T>::store(part + split, (x0 * c - x1 * sn) * sc);
      Elem<T>::store(part + split + 1, (x1 * c + x0 * sn) * sc);
    } else {
      float g0 = Elem<T>::load(part + split) * sc, g1 = Elem<T>::load(part + split + 1) * sc;
      Elem<T>::store(dx_or_null + packed, g0 * c + g1 * sn);
      Elem<T>::store(dx_or_null + packed + 1, g1 * c - g0 * sn);
    }
  }
}

template <class T>
__global__ void merge_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t B, int64_t H,
                             int64_t Tn, int64_t D, bool forward) {
  const int64_t total = B * H * Tn * D;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i = idx % D;
    int64_t r = idx / D;
    int64_t h = r % H;
    r /= H;
    int64_t t = r % Tn;
    int64_t b = r / Tn;
    const int64_t merged = idx;                            // [B, T, H, D] index
    const int64_t split = ((b * H + h) * Tn + t) * D + i;  // [B, H, T, D]
    if (forward)
      dst[merged] = src[split];
    else
      dst[split] = src[merged];
  }
}

int grid_for(int64_t n, int block) {
  int64_t g = (n + block - 1) / block;
  return static_cast<int>(g < 65535 * 8 ? (g > 0 ? g : 1) : 65535 * 8);
}

template <class T>
cudaError_t split_dispatch(const void* x, PartPtrs parts, void* dx, HeadsShape s, int rot,
                           float base, int64_t off, float scale0, bool backward,
                           cudaStream_t stream) {
  const int block = 256;
  const int grid = grid_for(s.B * s.T * s.P * s.H * (s.D / 2), block);
  if (backward)
    split_heads_kernel<T, true><<<grid, block, 0, stream>>>(nullptr, parts, static_cast<T*>(dx), s,
                                                            rot, base, off, scale0);
  else
    split_heads_kernel<T, false><<<grid, block, 0, stream>>>(static_cast<const T*>(x), parts,
                                                             nullptr, s, rot, base, off, scale0);
  return cudaGetLastError();
}

cudaError_t split_any(const void* x, PartPtrs parts, void* dx, HeadsShape s, DType dtype, int rot,
                      float base, int64_t off, float scale0, bool backward, cudaStream_t stream) {
  switch (dtype) {
    case DType::F32:
      return split_dispatch<float>(x, parts, dx, s, rot, base, off, scale0, backward, stream);
    case DType::F16:
      return split_dispatch<__half>(x, parts, dx, s, rot, base, off, scale0, backward, stream);
    case DType::BF16:
      return split_dispatch<__nv_bfloat16>(x, parts, dx, s, rot, base, off, scale0, backward,
                                           stream);
    default:
      return cudaErrorInvalidValue;
  }
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
  const int block = 256;
  const int grid = grid_for(B * H * T * D, block);
  switch (dtype) {
    case DType::F32:
      merge_kernel<float><<<grid, block, 0, stream>>>(
          static_cast<const float*>(src), static_cast<float*>(dst), B, H, T, D, forward);
      break;
    case DType::F16:
    case DType::BF16:  // a pure permutation: move 16-bit words
      merge_kernel<uint16_t><<<grid, block, 0, stream>>>(
          static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), B, H, T, D, forward);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace rotor::kernels
