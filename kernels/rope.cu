// RoPE kernel: one block per (b, t). The block computes the D/2 angles of its
// position in double -- theta_i = base^(-2i/D), angle = sign * m * theta_i,
// cos/sin in double rounded to float, exactly as the CPU path -- into shared
// memory, then rotates every head. No fast-math sin/cos: angles reach ~1e3 rad.
#include "kernels/common.cuh"
#include "kernels/rope.cuh"

namespace rotor::kernels {
namespace {

template <class T>
__global__ void rope_kernel(const T* x, T* y, int64_t rows, int64_t T_len, int64_t H, int64_t D,
                            double base, int64_t offset, double sign) {
  extern __shared__ float cs[];  // [D/2] cos, then [D/2] sin
  const int64_t half = D / 2;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t t = row % T_len;
    __syncthreads();  // the previous row's rotation is done with cs
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      const double theta = pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      const double angle = sign * static_cast<double>(t + offset) * theta;
      double s, c;
      sincos(angle, &s, &c);
      cs[i] = static_cast<float>(c);
      cs[half + i] = static_cast<float>(s);
    }
    __syncthreads();
    const T* xr = x + row * H * D;
    T* yr = y + row * H * D;
    for (int64_t p = threadIdx.x; p < H * half; p += blockDim.x) {
      const int64_t h = p / half, i = p - h * half;
      const int64_t at = h * D + 2 * i;
      const float x0 = to_f32(xr[at]), x1 = to_f32(xr[at + 1]);
      const float c = cs[i], s = cs[half + i];
      yr[at] = from_f32<T>(x0 * c - x1 * s);
      yr[at + 1] = from_f32<T>(x1 * c + x0 * s);
    }
  }
}

}  // namespace

cudaError_t rope_apply(const void* x, void* y, DType dt, int64_t B, int64_t T, int64_t H, int64_t D,
                       float base, int64_t position_offset, double sign, cudaStream_t stream) {
  const int64_t rows = B * T;
  if (rows <= 0 || H <= 0 || D <= 0) return cudaSuccess;
  if (D % 2 != 0) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(rows < (1 << 30) ? rows : (1 << 30));
  const int threads = row_threads(H * D / 2, 256);
  const size_t smem = sizeof(float) * static_cast<size_t>(D);
  ROTOR_FLOAT_SWITCH(dt, T_,
                     rope_kernel<T_><<<grid, threads, smem, stream>>>(
                         static_cast<const T_*>(x), static_cast<T_*>(y), rows, T, H, D,
                         static_cast<double>(base), position_offset, sign));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
