// Linear attention's kernels: the launchers of the device code in
// kernels/linear_attention_device.cuh (ops/linear_attention_cuda.cpp calls
// them and the cuBLASLt GEMMs of the non-causal products).
#include "kernels/linear_attention.cuh"
#include "kernels/linear_attention_device.cuh"

namespace rotor::kernels::linattn {

cudaError_t launch_features(const FeatureArgs& f, cudaStream_t stream) {
  if (f.BH * f.T == 0) return cudaSuccess;
  const size_t smem = sizeof(float) * static_cast<size_t>(f.D + 2 * f.M);
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(features, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  features<<<static_cast<unsigned>(f.BH * f.T), kRowThreads, smem, stream>>>(f);
  return cudaGetLastError();
}

cudaError_t launch_features_backward(const FeatureArgs& f, cudaStream_t stream) {
  if (f.BH * f.T == 0) return cudaSuccess;
  const size_t smem = sizeof(float) * static_cast<size_t>(f.D + f.M);
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        features_backward, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  features_backward<<<static_cast<unsigned>(f.BH * f.T), kRowThreads, smem, stream>>>(f);
  return cudaGetLastError();
}

cudaError_t launch_key_stabilizers(const float* rowmax, const int32_t* key_len, int64_t H,
                                   int64_t BH, int64_t T, bool prefix, float* stab,
                                   cudaStream_t stream) {
  if (BH * T == 0) return cudaSuccess;
  key_stabilizers<<<static_cast<unsigned>(BH), kRowThreads, 0, stream>>>(rowmax, key_len, H, T,
                                                                         prefix, stab);
  return cudaGetLastError();
}

cudaError_t launch_grad_prep(const void* dout, const void* out, DType dt, const float* den,
                             float eps, int64_t rows, int64_t Dv, float* G, float* dden,
                             cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  grad_prep<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(dout, out, dt, den, eps, Dv, G,
                                                                     dden);
  return cudaGetLastError();
}

cudaError_t launch_normalize(const float* num, const float* den, float eps, int64_t rows,
                             int64_t Dv, void* out, DType dt, cudaStream_t stream) {
  if (rows * Dv == 0) return cudaSuccess;
  normalize<<<grid_for(rows * Dv), kThreads, 0, stream>>>(num, den, eps, rows, Dv, out, dt);
  return cudaGetLastError();
}

cudaError_t launch_chunk_forward(const ChunkArgs& a, int64_t BH, cudaStream_t stream) {
  if (BH == 0 || a.Tq == 0) return cudaSuccess;
  chunk_forward<<<static_cast<unsigned>(BH), kChunkThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_chunk_backward(const ChunkArgs& a, int64_t BH, cudaStream_t stream) {
  if (BH == 0) return cudaSuccess;
  chunk_backward<<<static_cast<unsigned>(BH), kChunkThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace rotor::kernels::linattn
