// The CUDA side of ops/cudnn_attention.h (src/ops/cudnn_attention_cuda.cpp):
// cuDNN frontend graphs, built per shape and cached. Callers have checked the
// arguments and the support (ops/cudnn_attention.cpp).
#pragma once

#if ROTOR_WITH_CUDA

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/cudnn_attention.h"

namespace rotor::ops::cuda_impl {

// cudnnGetVersion() of the loaded cuDNN (e.g. 91400).
int64_t cudnn_library_version();

#if ROTOR_WITH_CUDNN_FRONTEND
// Builds (or finds in the cache) the forward and backward graphs of the case
// on `device`; returns "" or cuDNN's reason for refusing it.
std::string cudnn_attention_prepare(const CudnnAttentionCase& c, float scale, int device);

void cudnn_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse);
void cudnn_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);
#endif

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
