// CUDA glue for the reference attention (src/ops/attention.h). It is the
// ground truth for the fused kernels, so it stays plain: the scores and the
// probabilities are materialized ([B, H, Tq, Tk]), the four products run on
// cuBLASLt and two row kernels do the masked softmax, the Philox attention
// dropout (flat [B, H, Tq, Tk] element index, as on the CPU) and its backward.
#if ROTOR_WITH_CUDA

#include "kernels/attention_reference.cuh"
#include "kernels/host_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {

struct Dims {
  int64_t B, H, Tq, Tk, D;
};

Dims check(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o, int dev,
           const char* op) {
  cuda_glue::require_on(k, dev, op);
  cuda_glue::require_on(v, dev, op);
  cuda_glue::require_floating(q, op);
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    ROTOR_FAIL("{}: q, k, v must be [B, H, T, D], got {}, {}, {}", op, q.str(), k.str(), v.str());
  const Dims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.shape() != Shape{d.B, d.H, d.Tk, d.D} || v.shape() != k.shape() ||
      k.dtype() != q.dtype() || v.dtype() != q.dtype())
    ROTOR_FAIL("{}: k {} and v {} do not match q {}", op, k.str(), v.str(), q.str());
  if (o.key_lengths.defined()) {
    cuda_glue::require_on(o.key_lengths, dev, op);
    if (o.key_lengths.dtype() != DType::I32 || o.key_lengths.numel() != d.B)
      ROTOR_FAIL("{}: key_lengths must be i32 [{}], got {}", op, d.B, o.key_lengths.str());
  }
  if (!(o.dropout >= 0.0f && o.dropout < 1.0f))
    ROTOR_FAIL("{}: dropout must be in [0, 1), got {}", op, o.dropout);
  return d;
}

void require_like(const Tensor& t, const Shape& shape, const Tensor& q, int dev, const char* what) {
  cuda_glue::require_on(t, dev, what);
  if (t.shape() != shape || t.dtype() != q.dtype())
    ROTOR_FAIL("{}: expected {}{}, got {}", what, dtype_name(q.dtype()), shape_str(shape), t.str());
}

kernels::AttentionMask mask_of(const Dims& d, const AttentionOptions& o) {
  kernels::AttentionMask m;
  m.B = d.B;
  m.H = d.H;
  m.Tq = d.Tq;
  m.Tk = d.Tk;
  m.causal = o.causal;
  m.key_lengths = o.key_lengths.defined() ? o.key_lengths.data<int32_t>() : nullptr;
  m.dropout = o.dropout;
  m.seed = o.seed;
  m.stream_id = o.stream;
  return m;
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, Tensor& out, Tensor& probs) {
  cuda_glue::DeviceScope s(q, "attention_forward");
  const Dims d = check(q, k, v, options, s.index(), "attention_forward");
  require_like(out, q.shape(), q, s.index(), "attention_forward: out");
  require_like(probs, {d.B, d.H, d.Tq, d.Tk}, q, s.index(), "attention_forward: probs");
  const kernels::AttentionMask mask = mask_of(d, options);

  Tensor scores = Tensor::empty({d.B, d.H, d.Tq, d.Tk}, DType::F32, q.device());  // [B, H, Tq, Tk]
  GemmOptions qk;
  qk.trans_b = true;
  qk.alpha = options.scale;
  cuda_impl::gemm(q, k, scores, qk);  // scale * Q K^T

  Tensor dropped;  // [B, H, Tq, Tk]: probs o keep / (1 - p)
  if (options.dropout > 0.0f) dropped = Tensor::empty(probs.shape(), q.dtype(), q.device());
  ROTOR_CUDA_CHECK(kernels::attention_softmax_forward(
      scores.data<float>(), probs.raw(), dropped.defined() ? dropped.raw() : nullptr, q.dtype(),
      mask, s.stream()));
  cuda_impl::gemm(dropped.defined() ? dropped : probs, v, out, GemmOptions{});  // P V
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const AttentionOptions& options, Tensor& dq,
                        Tensor& dk, Tensor& dv) {
  cuda_glue::DeviceScope s(q, "attention_backward");
  const Dims d = check(q, k, v, options, s.index(), "attention_backward");
  require_like(probs, {d.B, d.H, d.Tq, d.Tk}, q, s.index(), "attention_backward: probs");
  require_like(dout, q.shape(), q, s.index(), "attention_backward: dout");
  require_like(dq, q.shape(), q, s.index(), "attention_backward: dq");
  require_like(dk, k.shape(), q, s.index(), "attention_backward: dk");
  require_like(dv, v.shape(), q, s.index(), "attention_backward: dv");
  const kernels::AttentionMask mask = mask_of(d, options);

  // dV = (P o M)^T dout
  Tensor dropped = probs;  // [B, H, Tq, Tk]
  if (options.dropout > 0.0f) {
    dropped = Tensor::empty(probs.shape(), q.dtype(), q.device());
    ROTOR_CUDA_CHECK(
        kernels::attention_dropout_probs(probs.raw(), dropped.raw(), q.dtype(), mask, s.stream()));
  }
  GemmOptions tn;
  tn.trans_a = true;
  cuda_impl::gemm(dropped, dout, dv, tn);

  // dP_dropped = dout V^T (f32), then dS = scale * P o (dP - rowsum(P o dP)).
  Tensor dp = Tensor::empty({d.B, d.H, d.Tq, d.Tk}, DType::F32, q.device());  // [B, H, Tq, Tk]
  GemmOptions nt;
  nt.trans_b = true;
  cuda_impl::gemm(dout, v, dp, nt);
  Tensor ds = Tensor::empty(probs.shape(), q.dtype(), q.device());  // [B, H, Tq, Tk]
  ROTOR_CUDA_CHECK(kernels::attention_softmax_backward(probs.raw(), dp.data<float>(), ds.raw(),
                                                       q.dtype(), options.scale, mask, s.stream()));
  cuda_impl::gemm(ds, k, dq, GemmOptions{});  // dQ = dS K
  cuda_impl::gemm(ds, q, dk, tn);             // dK = dS^T Q
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
