// CUDA glue for the flash attention core (src/ops/flash_attention.h,
// kernels/flash_attention.cu). The public op has checked the arguments and the
// kernels' limits; this provides the fp32 scratch of the backward (dQ
// accumulator and D = rowsum(dO o O)) from the stream-ordered pool.
#if ROTOR_WITH_CUDA

#include "kernels/flash_attention.cuh"
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
  return p;
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse) {
  cuda_glue::DeviceScope s(q);
  const kernels::FlashParams p = params_of(q, k, v, options);
  ROTOR_CUDA_CHECK(
      kernels::flash_attention_forward(p, out.raw(), lse.data<float>(), q.dtype(), s.stream()));
}

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv) {
  cuda_glue::DeviceScope s(q);
  const kernels::FlashParams p = params_of(q, k, v, options);
  const size_t rows = static_cast<size_t>(p.B * p.H * p.Tq);
  cuda_glue::Scratch dq_accum(rows * static_cast<size_t>(p.D) * sizeof(float), s.index());
  cuda_glue::Scratch delta(rows * sizeof(float), s.index());
  ROTOR_CUDA_CHECK(kernels::flash_attention_backward(
      p, out.raw(), lse.data<float>(), dout.raw(), dq.raw(), dk.raw(), dv.raw(),
      dq_accum.as<float>(), delta.as<float>(), q.dtype(), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
