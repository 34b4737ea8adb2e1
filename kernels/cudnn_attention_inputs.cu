#include "kernels/cudnn_attention_inputs.cuh"

namespace rotor::kernels {
namespace {

__global__ void sdpa_inputs_kernel(int32_t* seq_q, int64_t B, int32_t tq, int64_t* seed_offset,
                                   int64_t seed, int64_t offset) {
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < B;
       b += int64_t(gridDim.x) * blockDim.x)
    seq_q[b] = tq;
  if (seed_offset && blockIdx.x == 0 && threadIdx.x == 0) {
    seed_offset[0] = seed;
    seed_offset[1] = offset;
  }
}

}  // namespace

cudaError_t sdpa_write_inputs(int32_t* seq_q, int64_t B, int32_t tq, int64_t* seed_offset,
                              int64_t seed, int64_t offset, cudaStream_t stream) {
  if (!seq_q) B = 0;
  if (B == 0 && !seed_offset) return cudaSuccess;
  const int threads = 256;
  int64_t blocks = (B + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > 1024) blocks = 1024;
  sdpa_inputs_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
      seq_q, B, tq, seed_offset, seed, offset);
  return cudaGetLastError();
}

}  // namespace rotor::kernels
