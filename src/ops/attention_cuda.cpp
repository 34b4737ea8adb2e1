// CUDA glue for the reference attention (src/ops/attention.h). It is the
// ground truth for the fused kernels, so it stays plain: the scores and the
// probabilities are materialized ([B, H, Tq, Tk]), the four products run on
// cuBLASLt and two row kernels do the masked softmax (adding ALiBi's, T5's
// or a dense bias to the scores as it reads them), the Philox attention dropout (flat
// [B, H, Tq, Tk] element index, as on the CPU) and its backward; T5's table
// gradient is reduced from the unscaled dS by two deterministic kernels
// (kernels/attention_reference.cuh, attention_rel_bias_grad).
#if ROTOR_WITH_CUDA

#include "kernels/attention_reference.cuh"
#include "ops/attention_common.h"
#include "ops/cuda_glue.h"
#include "ops/cuda_ops.h"

namespace rotor::ops::cuda_impl {

namespace {

using Dims = detail::AttentionDims;

Dims dims_of(const Tensor& q, const Tensor& k) {
  return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
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
  m.alibi = o.alibi;
  m.bias_q_offset = o.bias_q_offset;
  m.bias_k_offset = o.bias_k_offset;
  m.rel = o.rel_bias.defined() ? o.rel_bias.data<float>() : nullptr;  // [2 rel_max + 1, H]
  m.rel_max = o.rel_max;
  m.bias = o.score_bias.defined() ? o.score_bias.data<float>() : nullptr;  // [B, H, Tq, Tk]
  return m;
}

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, Tensor& out, Tensor& probs) {
  cuda_glue::DeviceScope s(q);
  const Dims d = dims_of(q, k);
  const kernels::AttentionMask mask = mask_of(d, options);

  Tensor scores = Tensor::empty({d.B, d.H, d.Tq, d.Tk}, DType::F32, q.device());  // [B, H, Tq, Tk]
  GemmOptions qk;
  qk.trans_b = true;
  qk.alpha = options.scale;
  cuda_impl::gemm(q, k, scores, qk);  // scale * Q K^T

  Tensor dropped;  // [B, H, Tq, Tk]: probs o keep / (1 - p)
  if (options.dropout > 0.0f) dropped = Tensor::empty(probs.shape(), q.dtype(), q.device());
  ROTOR_CUDA_CHECK(kernels::attention_softmax_forward(scores.data<float>(), probs.raw(),
                                                      dropped.defined() ? dropped.raw() : nullptr,
                                                      q.dtype(), mask, s.stream()));
  cuda_impl::gemm(dropped.defined() ? dropped : probs, v, out, GemmOptions{});  // P V
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const AttentionOptions& options, Tensor& dq, Tensor& dk,
                        Tensor& dv) {
  cuda_glue::DeviceScope s(q);
  const Dims d = dims_of(q, k);
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
  // The dense bias's gradient is the unscaled dS: the row kernel writes it to
  // score_bias_grad. T5's table gradient is the unscaled dS summed per table
  // row: without a dense bias the row kernel writes it over dp (which it no
  // longer needs), then attention_rel_bias_grad adds it into rel_bias_grad.
  Tensor dp = Tensor::empty({d.B, d.H, d.Tq, d.Tk}, DType::F32, q.device());  // [B, H, Tq, Tk]
  GemmOptions nt;
  nt.trans_b = true;
  cuda_impl::gemm(dout, v, dp, nt);
  Tensor ds = Tensor::empty(probs.shape(), q.dtype(), q.device());  // [B, H, Tq, Tk]
  const bool rel_grad = options.rel_bias_grad.defined();
  float* g = options.score_bias_grad.defined() ? options.score_bias_grad.data<float>()
             : rel_grad                        ? dp.data<float>()
                                               : nullptr;  // f32 [B, H, Tq, Tk]
  ROTOR_CUDA_CHECK(kernels::attention_softmax_backward(
      probs.raw(), dp.data<float>(), ds.raw(), q.dtype(), options.scale, mask, g, s.stream()));
  if (rel_grad) {
    cuda_glue::Scratch diag(
        sizeof(double) * static_cast<size_t>(kernels::attention_rel_bias_diagonals(mask)),
        s.index());  // f64 [B H, Tq + Tk - 1]
    ROTOR_CUDA_CHECK(kernels::attention_rel_bias_grad(
        g, diag.as<double>(), options.rel_bias_grad.data<float>(), mask, s.stream()));
  }
  cuda_impl::gemm(ds, k, dq, GemmOptions{});  // dQ = dS K
  cuda_impl::gemm(ds, q, dk, tn);             // dK = dS^T Q
}

void tupe_untie_cls(Tensor& c, const Tensor& theta) {
  cuda_glue::DeviceScope s(c);
  ROTOR_CUDA_CHECK(kernels::tupe_untie_cls(c.data<float>(), theta.data<float>(), c.size(0),
                                           c.size(1), s.stream()));
}

void tupe_untie_cls_backward(Tensor& g, Tensor& dtheta) {
  cuda_glue::DeviceScope s(g);
  ROTOR_CUDA_CHECK(kernels::tupe_untie_cls_backward(g.data<float>(), dtheta.data<float>(),
                                                    g.size(0), g.size(1), s.stream()));
}

}  // namespace rotor::ops::cuda_impl

#endif  // ROTOR_WITH_CUDA
