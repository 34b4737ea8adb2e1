// Matrix products. CPU: ops/cpu_gemm.h (oneDNN or OpenBLAS); CUDA: cuBLASLt with fused epilogues.
#pragma once

#include "core/tensor.h"

namespace rotor::ops {

// Element-wise activations used as GEMM epilogues and in feed-forward layers.
// GELU is the tanh approximation (cuBLASLt's GELU epilogue; Hugging Face's
// "gelu_new"), so the CPU and GPU paths compute the same function.
// SiLU (x sigmoid(x), Llama's gated feed-forward) has no cuBLASLt epilogue: on
// CUDA it runs as a kernel after the GEMM (ops/gemm_cuda.cpp).
enum class Activation { None, ReLU, GELU, SiLU };
Activation parse_activation(const std::string& name);  // "none", "relu", "gelu", "silu"
const char* activation_name(Activation a);

struct GemmOptions {
  bool trans_a = false;  // use A^T
  bool trans_b = false;  // use B^T
  float alpha = 1.0f;
  float beta = 0.0f;  // C = alpha * op(A) op(B) + beta * C
  Tensor bias;        // optional [N], added to every row before the activation
  Activation activation = Activation::None;
  Tensor pre_activation;  // optional [..., M, N]: receives the value before the activation
};

// C[..., M, N] = act(alpha * op(A)[..., M, K] @ op(B)[..., K, N] + beta * C + bias).
// A and B are 2-D or carry the same leading batch dimensions as C; a 2-D B
// with a batched A is broadcast over the batch. A and B share one floating
// dtype; C, bias and pre_activation have A's dtype or f32 (16-bit A, B with an
// f32 C: weight gradients into the f32 buffer). Products accumulate in f32
// (CUDA: cuBLASLt; CPU: sgemm on f32 copies of 16-bit operands, ops/cpu_f32.h).
void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& options = {});

}  // namespace rotor::ops
