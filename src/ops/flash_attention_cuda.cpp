// CUDA glue for the flash attention core (src/ops/flash_attention.h,
// kernels/flash_attention.cu, kernels/flash_attention_tc.cu,
// kernels/flash_attention_sm70.cu). The public op has checked the arguments
// and that options.flash_kernel runs the case; this runs that kernel (the
// tensor-core and Volta ones need 16-byte aligned buffers: an error otherwise,
// never a quiet change of kernel) and provides the scratch of the backward
// (fp32 dQ accumulator, D = rowsum(dO o O), the RoPE table) from the
// stream-ordered pool. T5's table and its gradient pass through as pointers. Which kernel runs is
// decided in nn/attention_plan.h.
#if ROTOR_WITH_CUDA

#include <cstdint>
#include <initializer_list>

#include "core/error.h"
#include "kernels/flash_attention.cuh"
#include "kernels/flash_attention_sm70.cuh"
#include "kernels/flash_attention_tc.cuh"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {

kernels::FlashParams params_of(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionOptions& o) {
  kernels::FlashParams p;
  p.q = q.raw();
  p.k = k.raw();
  p.v = v.raw();
  p.B = q.size(0);
  p.H = q.size(1);
  p.Tq = q.size(2);
  p.Tk = k.size(2);
  p.D = static_cast<int>(q.size(3));
  p.scale = o.scale;
  p.causal = o.causal;
  if (o.key_lengths.defined()) p.key_lengths = o.key_lengths.data<int32_t>();
  p.dropout = o.dropout;
  p.seed = o.seed;
  p.stream_id = o.stream;
  p.alibi = o.alibi;
  p.bias_q_offset = o.bias_q_offset;
  p.bias_k_offset = o.bias_k_offset;
  if (o.cu_seqlens_q.defined()) {  // N documents end to end: [1, H, total, D]
    p.B = o.cu_seqlens_q.numel() - 1;
    p.Tq = o.max_seqlen_q;
    p.Tk = o.max_seqlen_k;
    p.cu_seqlens_q = o.cu_seqlens_q.data<int32_t>();
    p.cu_seqlens_k = o.cu_seqlens_k.data<int32_t>();
    p.total_q = q.size(2);
    p.total_k = k.size(2);
  }
  if (o.rel_bias.defined()) {
    p.rel = o.rel_bias.data<float>();  // f32 [2 rel_max + 1, H]
    p.rel_max = o.rel_max;
  }
  return p;
}

kernels::FlashRope rope_of(const AttentionOptions& o) {
  kernels::FlashRope r;
  r.enabled = o.rope;
  r.params = o.rope_params;
  r.q_offset = o.rope_q_offset;
  r.k_offset = o.rope_k_offset;
  return r;
}

bool aligned16(const Tensor& t) {
  return (reinterpret_cast<uintptr_t>(t.raw()) & 15u) == 0;
}

// The tensor-core and Volta kernels load 16-byte vectors.
void require_aligned(const AttentionOptions& o, std::initializer_list<const Tensor*> bufs,
                     const char* op) {
  if (o.flash_kernel == FlashKernel::Portable) return;
  for (const Tensor* t : bufs)
    if (!aligned16(*t))
      ROTOR_FAIL("{}: rotor's {} flash kernel needs 16-byte aligned q, k, v and outputs", op,
                 flash_kernel_name(o.flash_kernel));
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse) {
  cuda_glue::DeviceScope s(q);
  const kernels::FlashParams p = params_of(q, k, v, options);
  require_aligned(options, {&q, &k, &v, &out}, "flash_attention_forward");
  if (options.flash_kernel == FlashKernel::TensorCore) {
    const kernels::FlashRope r = rope_of(options);
    cuda_glue::Scratch table(kernels::flash_tc_rope_table_bytes(p, r), s.index());
    ROTOR_CUDA_CHECK(kernels::flash_tc_forward(p, r, table.get(), out.raw(), lse.data<float>(),
                                               q.dtype(), s.stream()));
    return;
  }
  if (options.flash_kernel == FlashKernel::Volta) {
    ROTOR_CUDA_CHECK(
        kernels::flash_attention_sm70_forward(p, out.raw(), lse.data<float>(), s.stream()));
    return;
  }
  ROTOR_CUDA_CHECK(
      kernels::flash_attention_forward(p, out.raw(), lse.data<float>(), q.dtype(), s.stream()));
}

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  cuda_glue::DeviceScope s(q);
  kernels::FlashParams p = params_of(q, k, v, options);
  // T5's table gradient is added into rel_bias_grad (same shape as rel_bias).
  if (options.rel_bias_grad.defined()) p.rel_grad = options.rel_bias_grad.data<float>();
  const size_t rows = static_cast<size_t>(q.size(0) * q.size(1) * q.size(2));  // every q row
  cuda_glue::Scratch dq_accum(rows * static_cast<size_t>(p.D) * sizeof(float), s.index());
  cuda_glue::Scratch delta(rows * sizeof(float), s.index());
  require_aligned(options, {&q, &k, &v, &dout, &dk, &dv}, "flash_attention_backward");
  if (options.flash_kernel == FlashKernel::TensorCore) {
    const kernels::FlashRope r = rope_of(options);
    cuda_glue::Scratch table(kernels::flash_tc_rope_table_bytes(p, r), s.index());
    ROTOR_CUDA_CHECK(kernels::flash_tc_backward(
        p, r, table.get(), out.raw(), lse.data<float>(), dout.raw(), dq.raw(), dk.raw(), dv.raw(),
        dq_accum.as<float>(), delta.as<float>(), q.dtype(), s.stream()));
    return;
  }
  if (options.flash_kernel == FlashKernel::Volta) {
    ROTOR_CUDA_CHECK(kernels::flash_attention_sm70_backward(
        p, out.raw(), lse.data<float>(), dout.raw(), dq.raw(), dk.raw(), dv.raw(),
        dq_accum.as<float>(), delta.as<float>(), s.stream()));
    return;
  }
  ROTOR_CUDA_CHECK(kernels::flash_attention_backward(
      p, out.raw(), lse.data<float>(), dout.raw(), dq.raw(), dk.raw(), dv.raw(),
      dq_accum.as<float>(), delta.as<float>(), q.dtype(), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
