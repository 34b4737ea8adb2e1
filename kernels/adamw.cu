// AdamW kernel: one fused pass over params, grads and both moments, with the
// very arithmetic of the CPU loop (src/ops/adamw.cpp) so results agree to an ulp.
#include "kernels/adamw.cuh"
#include "kernels/common.cuh"

namespace rotor::kernels {
namespace {

template <class G>
__global__ void adamw_kernel(float* p, const G* grads, float* m, float* v, int64_t n, AdamWArgs a) {
  const float grad_multiplier =
      a.device_scale ? a.grad_multiplier * a.device_scale[0] : a.grad_multiplier;
  const float b1 = a.beta1, b2 = a.beta2;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float g = to_f32(grads[i]) * grad_multiplier + a.l2 * p[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
    p[i] = p[i] * a.decay - a.step_size * mi / denom;
  }
}

}  // namespace

cudaError_t adamw_step(float* params, const void* grads, DType grad_dt, float* m, float* v,
                       int64_t n, const AdamWArgs& args, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ROTOR_FLOAT_SWITCH(grad_dt, G,
                     adamw_kernel<G><<<grid_for(n, kThreads, 8192), kThreads, 0, stream>>>(
                         params, static_cast<const G*>(grads), m, v, n, args));
  return cudaGetLastError();
}

}  // namespace rotor::kernels
