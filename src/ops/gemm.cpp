// CPU GEMM: ops/cpu_gemm.h's sgemm (oneDNN or OpenBLAS) per batch element,
// then a bias + activation epilogue (cuBLASLt fuses the same epilogue on the GPU).
#include "ops/gemm.h"

#include <cmath>

#include "ops/cpu_f32.h"
#include "ops/cpu_gemm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace rotor::ops {

Activation parse_activation(const std::string& name) {
  if (name == "none") return Activation::None;
  if (name == "relu") return Activation::ReLU;
  if (name == "gelu") return Activation::GELU;
  if (name == "silu") return Activation::SiLU;
  ROTOR_FAIL("unknown activation '{}' (expected none, relu, gelu or silu)", name);
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None:
      return "none";
    case Activation::ReLU:
      return "relu";
    case Activation::GELU:
      return "gelu";
    case Activation::SiLU:
      return "silu";
  }
  return "?";
}

namespace {

// Leading (batch) dimensions of a tensor of rank >= 2.
Shape batch_dims(const Tensor& t) {
  return Shape(t.shape().begin(), t.shape().end() - 2);
}

// Element count of the batch dimensions, or 0 for a 2-D tensor (broadcast).
int64_t batch_count(const Tensor& t) {
  return t.dim() == 2 ? 0 : shape_numel(batch_dims(t));
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& options) {
  if (a.dim() < 2 || b.dim() < 2 || c.dim() < 2)
    ROTOR_FAIL("gemm: operands must have at least 2 dimensions, got A {}, B {}, C {}",
               shape_str(a.shape()), shape_str(b.shape()), shape_str(c.shape()));
  // C may be f32 with 16-bit A and B (weight gradients into the f32 buffer).
  if (!is_floating(a.dtype()) || a.dtype() != b.dtype() ||
      (c.dtype() != a.dtype() && c.dtype() != DType::F32))
    ROTOR_FAIL("gemm: A and B must share one floating dtype and C be that or f32, got {}, {}, {}",
               dtype_name(a.dtype()), dtype_name(b.dtype()), dtype_name(c.dtype()));
  check_same_device(a, c, "gemm (A, C)");
  check_same_device(b, c, "gemm (B, C)");

  const int64_t M = options.trans_a ? a.size(-1) : a.size(-2);
  const int64_t K = options.trans_a ? a.size(-2) : a.size(-1);
  const int64_t Kb = options.trans_b ? b.size(-1) : b.size(-2);
  const int64_t N = options.trans_b ? b.size(-2) : b.size(-1);
  if (K != Kb)
    ROTOR_FAIL("gemm: inner dimensions differ: op(A) is [{}, {}], op(B) is [{}, {}] (A {}, B {})",
               M, K, Kb, N, shape_str(a.shape()), shape_str(b.shape()));
  if (c.size(-2) != M || c.size(-1) != N)
    ROTOR_FAIL("gemm: C is {}, expected [..., {}, {}]", shape_str(c.shape()), M, N);
  const Shape cbatch = batch_dims(c);
  if (a.dim() != 2 && batch_dims(a) != cbatch)
    ROTOR_FAIL("gemm: A {} has batch dimensions other than C's {}", shape_str(a.shape()),
               shape_str(c.shape()));
  if (b.dim() != 2 && batch_dims(b) != cbatch)
    ROTOR_FAIL("gemm: B {} has batch dimensions other than C's {}", shape_str(b.shape()),
               shape_str(c.shape()));
  if (options.bias.defined()) {
    if (options.bias.dim() != 1 || options.bias.size(0) != N)
      ROTOR_FAIL("gemm: bias must be [{}], got {}", N, shape_str(options.bias.shape()));
    if (options.bias.dtype() != c.dtype())
      ROTOR_FAIL("gemm: bias dtype {} differs from C's {}", dtype_name(options.bias.dtype()),
                 dtype_name(c.dtype()));
    check_same_device(options.bias, c, "gemm (bias, C)");
  }
  if (options.pre_activation.defined()) {
    check_shape(options.pre_activation, c.shape(), "gemm pre_activation");
    if (options.pre_activation.dtype() != c.dtype())
      ROTOR_FAIL("gemm: pre_activation dtype {} differs from C's {}",
                 dtype_name(options.pre_activation.dtype()), dtype_name(c.dtype()));
    check_same_device(options.pre_activation, c, "gemm (pre_activation, C)");
  }

  ROTOR_DISPATCH_CUDA(c, gemm(a, b, c, options));

  if (detail::F32Compute::needed({&a, &c})) {
    // 16-bit operands: f32 products and accumulation, C rounded once (cuBLASLt's numerics).
    detail::F32Compute f;
    GemmOptions o = options;
    o.bias = f.input(options.bias);
    if (options.pre_activation.defined()) o.pre_activation = f.output(o.pre_activation);
    Tensor c32 = f.output(c, options.beta != 0.0f);
    gemm(f.input(a), f.input(b), c32, o);
    f.commit();
    return;
  }
  const int64_t batch = shape_numel(cbatch);
  if (M == 0 || N == 0 || batch == 0) return;
  profile::add_work(
      2.0 * static_cast<double>(batch * M) * static_cast<double>(N * K),
      4.0 * static_cast<double>(batch) * static_cast<double>(M * K + K * N + 2 * M * N));
  const float* A = a.data<float>();
  const float* B = b.data<float>();
  float* C = c.data<float>();
  const int64_t a_stride = batch_count(a) ? M * K : 0;
  const int64_t b_stride = batch_count(b) ? K * N : 0;

  if (K == 0) {
    // BLAS needs leading dimensions >= 1; the product is empty: C = beta C
    // (beta = 0 overwrites C, whatever it held, as BLAS does).
    if (options.beta == 0.0f)
      fill(c, 0.0f);
    else
      scale(c, options.beta);
  } else if (!options.trans_a && a_stride != 0 && b_stride == 0) {
    // A batched [..., M, K] against a shared B: one sgemm over all rows.
    cpu_sgemm(CblasNoTrans, options.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(batch * M), static_cast<int>(N), static_cast<int>(K), options.alpha,
              A, static_cast<int>(K), B, static_cast<int>(options.trans_b ? K : N), options.beta, C,
              static_cast<int>(N));
  } else {
    const int lda = static_cast<int>(options.trans_a ? M : K);
    const int ldb = static_cast<int>(options.trans_b ? K : N);
    for (int64_t i = 0; i < batch; ++i) {
      cpu_sgemm(options.trans_a ? CblasTrans : CblasNoTrans,
                options.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(M),
                static_cast<int>(N), static_cast<int>(K), options.alpha, A + i * a_stride, lda,
                B + i * b_stride, ldb, options.beta, C + i * M * N, static_cast<int>(N));
    }
  }

  // Epilogue: bias, then the pre-activation copy, then the activation, a row
  // at a time.
  Tensor pre = options.pre_activation;
  detail::bias_activation_rows(C, options.bias.defined() ? options.bias.data<float>() : nullptr,
                               pre.defined() ? pre.data<float>() : nullptr, batch * M, N,
                               options.activation);
}

}  // namespace rotor::ops
