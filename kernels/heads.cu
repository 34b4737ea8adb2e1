// Head split with RoPE fused in (RoFormer eq. 34 under model.rope's
// settings) and the head merge. The rotation is core/rope.h, the very code of
// the CPU path: angles in double, their cosine and sine rounded to float.
// They are computed once per call into a table of [T, R/2] (cos, sin) pairs
// (small: it stays in L2), so the split itself is a pure bandwidth kernel.
//
// Vector path (D a whole number of 16-byte vectors, pointers aligned): grid
// (tiles of positions t, part x head, batch), block (the D/N vectors of a
// head row, rows of t). A thread moves one 16-byte vector: one LDG.E.128 from
// [B, T, P, H, D] and one STG.E.128 into [B, H, T, D], its rotation factors
// from the table, and no integer division; it rotates interleaved pairs over
// the whole head. Otherwise (the half layout, a fraction < 1, no table) one
// thread per slot of two dimensions (rope::slot_dims), its factors from the
// table or computed in place.
#include "core/rope.h"
#include "kernels/common.cuh"
#include "kernels/heads.cuh"
#include "kernels/vec.cuh"

namespace rotor::kernels {

namespace {

struct PartPtrs {
  void* p[3];
};

// parts.p[p] without indexing the array by a run-time value (which would copy
// the kernel parameter to the stack).
template <class T>
__device__ __forceinline__ T* part_ptr(const PartPtrs& parts, int64_t p) {
  return static_cast<T*>(p == 0 ? parts.p[0] : p == 1 ? parts.p[1] : parts.p[2]);
}

// Blocks of the grid-stride loops below (more than common.cuh's default cap:
// one thread per pair of a [B, T, P, H, D] tensor is many threads).
constexpr int64_t kMaxBlocks = 65535 * 8;
constexpr int kVecThreads = 256;

// table[t * R/2 + i] = (cos, sin) of pair i at position t + offset (rope
// resolved at the call's length).
__global__ void rope_table_kernel(float2* table, int64_t T, int64_t R, rope::Params rope,
                                  int64_t offset) {
  const int64_t half = R / 2, total = T * half;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = e / half, i = e - t * half;
    const rope::Rotation r = rope::rotation(rope, t + offset, i, R);
    table[e] = make_float2(r.cos, r.sin);
  }
}

// The vector path, forward (x -> parts) or backward (dparts -> dx).
template <class T, bool kBackward>
__global__ void split_heads_vec_kernel(const T* __restrict__ x_or_null, PartPtrs parts,
                                       T* __restrict__ dx_or_null, HeadsShape s, int rope_parts,
                                       const float2* __restrict__ table, float scale0) {
  constexpr int N = Vec<T>::N;
  const int64_t t = blockIdx.x * int64_t(blockDim.y) + threadIdx.y;
  if (t >= s.T) return;
  // Part p of at most 3 without a division: ph = p * H + h.
  const int64_t ph = blockIdx.y, p = (ph >= s.H) + (ph >= 2 * s.H), h = ph - p * s.H;
  const int64_t b = blockIdx.z;
  const int64_t d0 = threadIdx.x * int64_t(N);
  const int64_t packed = (((b * s.T + t) * s.P + p) * s.H + h) * s.D + d0;  // [B,T,P,H,D]
  const int64_t split = ((b * s.H + h) * s.T + t) * s.D + d0;               // [B,H,T,D]
  const float sc = p == 0 ? scale0 : 1.0f;
  T* part = part_ptr<T>(parts, p);
  float v[N];
  if (!kBackward) {
    load_vec(x_or_null + packed, v);
  } else {
    load_vec(part + split, v);
#pragma unroll
    for (int c = 0; c < N; ++c) v[c] *= sc;
  }
  if (p < rope_parts) {
    // N/2 (cos, sin) pairs: N/4 aligned float4 loads (D/2 and d0/2 are even).
    const float4* rot = reinterpret_cast<const float4*>(table + t * (s.D / 2) + d0 / 2);
#pragma unroll
    for (int k = 0; k < N / 4; ++k) {
      const float4 cs = rot[k];
      const rope::Rotation r[2] = {{cs.x, cs.y}, {cs.z, cs.w}};
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int e = 4 * k + 2 * q;
        float y0, y1;
        if (!kBackward)
          rope::rotate(v[e], v[e + 1], r[q], y0, y1);
        else
          rope::rotate_back(v[e], v[e + 1], r[q], y0, y1);
        v[e] = y0;
        v[e + 1] = y1;
      }
    }
  }
  if (!kBackward) {
#pragma unroll
    for (int c = 0; c < N; ++c) v[c] *= sc;
    store_vec(part + split, v);
  } else {
    store_vec(dx_or_null + packed, v);
  }
}

// The scalar path: one thread per (b, t, p, h, slot), the factors from the
// table ([T, R/2]) or, without one, computed here.
template <class T, bool kBackward>
__global__ void split_heads_kernel(const T* __restrict__ x_or_null, PartPtrs parts,
                                   T* __restrict__ dx_or_null, HeadsShape s, int rope_parts,
                                   rope::Params rope, const float2* __restrict__ table,
                                   int64_t offset, float scale0) {
  // Slots of two dimensions; an odd D (no rotation) has a last slot of one.
  const int64_t half = s.D / 2, slots = (s.D + 1) / 2;
  const int64_t total = s.B * s.T * s.P * s.H * slots;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % slots;
    int64_t r = idx / slots;
    const int64_t h = r % s.H;
    r /= s.H;
    const int64_t p = r % s.P;
    r /= s.P;
    const int64_t t = r % s.T;
    const int64_t b = r / s.T;
    const int64_t R = rope::rotated_dims(rope, s.D);
    int64_t da, db;  // the slot's two dimensions (the odd last one: D - 1 twice)
    if (i < half)
      rope::slot_dims(rope.layout, R, i, da, db);
    else
      da = db = s.D - 1;
    const int64_t packed = (((b * s.T + t) * s.P + p) * s.H + h) * s.D;  // [B,T,P,H,D]
    const int64_t split = ((b * s.H + h) * s.T + t) * s.D;               // [B,H,T,D]
    const float sc = p == 0 ? scale0 : 1.0f;
    const bool rotated = p < rope_parts && i < half && 2 * i < R;
    rope::Rotation rot{1.0f, 0.0f};
    if (rotated) {
      if (table) {
        const float2 cs = table[t * (R / 2) + i];
        rot = rope::Rotation{cs.x, cs.y};
      } else {
        rot = rope::rotation(rope, t + offset, i, R);
      }
    }
    T* part = part_ptr<T>(parts, p);
    if (!kBackward) {
      float y0 = to_f32(x_or_null[packed + da]), y1 = to_f32(x_or_null[packed + db]);
      if (rotated) rope::rotate(y0, y1, rot, y0, y1);
      part[split + da] = from_f32<T>(y0 * sc);
      part[split + db] = from_f32<T>(y1 * sc);
    } else {
      float y0 = to_f32(part[split + da]) * sc, y1 = to_f32(part[split + db]) * sc;
      if (rotated) rope::rotate_back(y0, y1, rot, y0, y1);
      dx_or_null[packed + da] = from_f32<T>(y0);
      dx_or_null[packed + db] = from_f32<T>(y1);
    }
  }
}

// [B, H, T, D] <-> [B, T, H, D] in 16-byte vectors: grid (tiles of t, H, B).
template <bool kForward>
__global__ void merge_vec_kernel(const char* __restrict__ src, char* __restrict__ dst, int64_t H,
                                 int64_t Tn, int64_t row_bytes) {
  const int64_t t = blockIdx.x * int64_t(blockDim.y) + threadIdx.y;
  if (t >= Tn) return;
  const int64_t h = blockIdx.y, b = blockIdx.z, o = threadIdx.x * int64_t(16);
  const int64_t merged = ((b * Tn + t) * H + h) * row_bytes + o;  // [B, T, H, D]
  const int64_t split = ((b * H + h) * Tn + t) * row_bytes + o;   // [B, H, T, D]
  if (kForward)
    store_raw16(dst + merged, load_raw16(src + split));
  else
    store_raw16(dst + split, load_raw16(src + merged));
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

// Block and grid of the vector kernels for rows of `vectors` 16-byte vectors.
bool vec_launch(int64_t vectors, int64_t T, int64_t ph, int64_t B, dim3& grid, dim3& block) {
  if (vectors < 1 || vectors > kVecThreads || ph > 65535 || B > 65535) return false;
  const int64_t rows = kVecThreads / vectors;
  block = dim3(static_cast<unsigned>(vectors), static_cast<unsigned>(rows));
  grid = dim3(static_cast<unsigned>((T + rows - 1) / rows), static_cast<unsigned>(ph),
              static_cast<unsigned>(B));
  return true;
}

template <class T>
bool split_vec_ok(const void* x, PartPtrs parts, int P, HeadsShape s) {
  if (!aligned16(x) || s.D % Vec<T>::N != 0) return false;
  for (int p = 0; p < P; ++p)
    if (!aligned16(parts.p[p])) return false;
  return true;
}

cudaError_t split_any(const void* x, PartPtrs parts, void* dx, HeadsShape s, DType dtype, int rot,
                      rope::Params rope, int64_t off, float scale0, bool backward, void* workspace,
                      size_t workspace_bytes, cudaStream_t stream) {
  if (s.B * s.T * s.P * s.H * s.D == 0) return cudaSuccess;
  const rope::Params at = rope::at_length(rope, s.D, off + s.T);
  const int64_t R = rope::rotated_dims(at, s.D);
  const size_t table_bytes = split_heads_workspace(s, rot, at);
  bool table_ready = false;
  if (table_bytes > 0 && workspace && workspace_bytes >= table_bytes) {
    rope_table_kernel<<<grid_for(s.T * (R / 2)), kThreads, 0, stream>>>(
        static_cast<float2*>(workspace), s.T, R, at, off);
    table_ready = true;
  }
  const float2* table = table_ready ? static_cast<const float2*>(workspace) : nullptr;
  ROTOR_FLOAT_SWITCH(
      dtype, T, dim3 grid, block;
      const bool vec = (rot == 0 || (table_ready && rope::interleaved_full(at, s.D))) &&
                       split_vec_ok<T>(backward ? dx : x, parts, static_cast<int>(s.P), s) &&
                       vec_launch(s.D / Vec<T>::N, s.T, s.P * s.H, s.B, grid, block);
      if (vec) {
        if (backward)
          split_heads_vec_kernel<T, true><<<grid, block, 0, stream>>>(
              nullptr, parts, static_cast<T*>(dx), s, rot, table, scale0);
        else
          split_heads_vec_kernel<T, false><<<grid, block, 0, stream>>>(
              static_cast<const T*>(x), parts, nullptr, s, rot, table, scale0);
      } else {
        const unsigned g = grid_for(s.B * s.T * s.P * s.H * ((s.D + 1) / 2), kThreads, kMaxBlocks);
        if (backward)
          split_heads_kernel<T, true><<<g, kThreads, 0, stream>>>(
              nullptr, parts, static_cast<T*>(dx), s, rot, at, table, off, scale0);
        else
          split_heads_kernel<T, false><<<g, kThreads, 0, stream>>>(
              static_cast<const T*>(x), parts, nullptr, s, rot, at, table, off, scale0);
      });
  return cudaGetLastError();
}

}  // namespace

size_t split_heads_workspace(HeadsShape s, int rope_parts, const rope::Params& rope) {
  if (rope_parts <= 0 || s.T <= 0 || s.D < 2) return 0;
  return static_cast<size_t>(s.T * (rope::rotated_dims(rope, s.D) / 2)) * sizeof(float2);
}

cudaError_t split_heads_forward(const void* x, void* const parts[3], HeadsShape s, DType dtype,
                                int rope_parts, rope::Params rope, int64_t position_offset,
                                float part0_scale, void* workspace, size_t workspace_bytes,
                                cudaStream_t stream) {
  PartPtrs pp{{parts[0], parts[1], parts[2]}};
  return split_any(x, pp, nullptr, s, dtype, rope_parts, rope, position_offset, part0_scale, false,
                   workspace, workspace_bytes, stream);
}

cudaError_t split_heads_backward(const void* const dparts[3], void* dx, HeadsShape s, DType dtype,
                                 int rope_parts, rope::Params rope, int64_t position_offset,
                                 float part0_scale, void* workspace, size_t workspace_bytes,
                                 cudaStream_t stream) {
  PartPtrs pp{
      {const_cast<void*>(dparts[0]), const_cast<void*>(dparts[1]), const_cast<void*>(dparts[2])}};
  return split_any(nullptr, pp, dx, s, dtype, rope_parts, rope, position_offset, part0_scale, true,
                   workspace, workspace_bytes, stream);
}

cudaError_t merge_heads(const void* src, void* dst, int64_t B, int64_t H, int64_t T, int64_t D,
                        DType dtype, bool forward, cudaStream_t stream) {
  if (B * H * T * D == 0) return cudaSuccess;
  const int64_t row_bytes = D * static_cast<int64_t>(dtype_size(dtype));
  dim3 grid, block;
  if (row_bytes % 16 == 0 && aligned16(src) && aligned16(dst) &&
      vec_launch(row_bytes / 16, T, H, B, grid, block)) {
    if (forward)
      merge_vec_kernel<true><<<grid, block, 0, stream>>>(static_cast<const char*>(src),
                                                         static_cast<char*>(dst), H, T, row_bytes);
    else
      merge_vec_kernel<false><<<grid, block, 0, stream>>>(static_cast<const char*>(src),
                                                          static_cast<char*>(dst), H, T, row_bytes);
    return cudaGetLastError();
  }
  const unsigned g = grid_for(B * H * T * D, kThreads, kMaxBlocks);
  switch (dtype) {
    case DType::F32:
      merge_kernel<float><<<g, kThreads, 0, stream>>>(
          static_cast<const float*>(src), static_cast<float*>(dst), B, H, T, D, forward);
      break;
    case DType::F16:
    case DType::BF16:  // a pure permutation: move 16-bit words
      merge_kernel<uint16_t><<<g, kThreads, 0, stream>>>(
          static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), B, H, T, D, forward);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace rotor::kernels
