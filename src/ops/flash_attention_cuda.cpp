// CUDA glue for the flash attention core (src/ops/flash_attention.h,
// kernels/flash_attention.cu, kernels/flash_attention_tc.cu,
// kernels/flash_attention_sm70.cu). The public op has checked the arguments
// and the kernels' limits; this picks the kernel -- the sm_80+ tensor-core one
// where flash_attention_tc_supported says so and the buffers are 16-byte
// aligned; on a Volta device (7.x) with sm_70 code in the build, the WMMA one
// for aligned f16 at head dim 64 or 128 without RoPE in the kernel; the
// portable one otherwise (ROTOR_FLASH_KERNEL=portable|tc forces one of the
// first and the last) -- and provides the scratch of the backward (fp32 dQ accumulator,
// D = rowsum(dO o O), the RoPE table) from the stream-ordered pool.
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
  return p;
}

kernels::FlashRope rope_of(const AttentionOptions& o) {
  kernels::FlashRope r;
  r.enabled = o.rope;
  r.base = static_cast<double>(o.rope_base);
  r.q_offset = o.rope_q_offset;
  r.k_offset = o.rope_k_offset;
  return r;
}

bool aligned16(const Tensor& t) {
  return (reinterpret_cast<uintptr_t>(t.raw()) & 15u) == 0;
}

// Whether the tensor-core kernel runs this call. Under rope, or with
// ROTOR_FLASH_KERNEL=tc, it must (the public op has checked that it can, but
// not the alignment of views).
bool use_tc(const Tensor& q, const AttentionOptions& o, std::initializer_list<const Tensor*> bufs,
            const char* op) {
  if (!flash_attention_tc_supported(q, o)) return false;
  bool aligned = true;
  for (const Tensor* t : bufs) aligned = aligned && aligned16(*t);
  if (aligned) return true;
  if (o.rope || detail::flash_kernel_override() == detail::FlashKernel::TensorCore)
    ROTOR_FAIL("{}: the tensor-core flash kernel needs 16-byte aligned q, k, v and outputs", op);
  return false;
}

// Whether Volta's WMMA kernel runs this call (never under ROTOR_FLASH_KERNEL).
bool use_sm70(const Tensor& q, const AttentionOptions& o,
              std::initializer_list<const Tensor*> bufs) {
  if (detail::flash_kernel_override() != detail::FlashKernel::Auto) return false;
  if (q.dtype() != DType::F16 || o.rope ||
      !kernels::flash_attention_sm70_supports(static_cast<int>(q.size(3))))
    return false;
  for (const Tensor* t : bufs)
    if (!aligned16(*t)) return false;
  return kernels::flash_attention_sm70_available();
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse) {
  cuda_glue::DeviceScope s(q);
  const kernels::FlashParams p = params_of(q, k, v, options);
  if (use_tc(q, options, {&q, &k, &v, &out}, "flash_attention_forward")) {
    const kernels::FlashRope r = rope_of(options);
    cuda_glue::Scratch table(kernels::flash_tc_rope_table_bytes(p, r), s.index());
    ROTOR_CUDA_CHECK(kernels::flash_tc_forward(p, r, table.get(), out.raw(), lse.data<float>(),
                                               q.dtype(), s.stream()));
    return;
  }
  if (use_sm70(q, options, {&q, &k, &v, &out})) {
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
  const kernels::FlashParams p = params_of(q, k, v, options);
  const size_t rows = static_cast<size_t>(p.B * p.H * p.Tq);
  cuda_glue::Scratch dq_accum(rows * static_cast<size_t>(p.D) * sizeof(float), s.index());
  cuda_glue::Scratch delta(rows * sizeof(float), s.index());
  if (use_tc(q, options, {&q, &k, &v, &dout, &dk, &dv}, "flash_attention_backward")) {
    const kernels::FlashRope r = rope_of(options);
    cuda_glue::Scratch table(kernels::flash_tc_rope_table_bytes(p, r), s.index());
    ROTOR_CUDA_CHECK(kernels::flash_tc_backward(
        p, r, table.get(), out.raw(), lse.data<float>(), dout.raw(), dq.raw(), dk.raw(), dv.raw(),
        dq_accum.as<float>(), delta.as<float>(), q.dtype(), s.stream()));
    return;
  }
  if (use_sm70(q, options, {&q, &k, &v, &dout, &dk, &dv})) {
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
