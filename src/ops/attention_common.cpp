#include "ops/attention_common.h"

#include <initializer_list>
#include <string>
#include <utility>

#include "ops/dispatch.h"

namespace rotor::ops::detail {

namespace {

// The variable-length layout's offsets (AttentionOptions::cu_seqlens_q or _k)
// for `total` tokens: i32 [N + 1] on q's device; on the CPU, from 0,
// nondecreasing, ending at total, each document at most max_len long.
void check_cu_seqlens(const Tensor& cu, int64_t N, int64_t total, int64_t max_len, const Tensor& q,
                      const char* what, const char* op) {
  if (!cu.defined() || cu.dtype() != DType::I32 || cu.numel() != N + 1)
    ROTOR_FAIL("{}: {} must be i32 [{}], like cu_seqlens_q, got {}", op, what, N + 1,
               cu.defined() ? cu.str() : std::string("none"));
  check_same_device(q, cu, op);
  if (cu.is_cuda()) return;  // read on the host where it lives there (the layers build it there)
  const int32_t* c = cu.data<int32_t>();
  if (c[0] != 0 || c[N] != total)
    ROTOR_FAIL("{}: {} runs from {} to {}, not from 0 to the {} tokens", op, what, c[0], c[N],
               total);
  for (int64_t n = 0; n < N; ++n)
    if (c[n + 1] < c[n] || c[n + 1] - c[n] > max_len)
      ROTOR_FAIL("{}: {} gives document {} {} tokens, outside [0, {}] (its max_seqlen)", op, what,
                 n, static_cast<int64_t>(c[n + 1]) - c[n], max_len);
}

}  // namespace

AttentionDims check_attention_args(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttentionOptions& o, const char* op, bool varlen_ok) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    ROTOR_FAIL("{}: q, k, v must be [B, H, T, D], got {}, {}, {}", op, shape_str(q.shape()),
               shape_str(k.shape()), shape_str(v.shape()));
  if (o.cu_seqlens_q.defined() || o.cu_seqlens_k.defined()) {
    if (!varlen_ok)
      ROTOR_FAIL("{}: the variable-length layout (cu_seqlens) is the flash core's alone", op);
    if (q.size(0) != 1 || k.size(0) != 1 || v.shape() != k.shape() || k.size(1) != q.size(1) ||
        k.size(3) != q.size(3))
      ROTOR_FAIL(
          "{}: the variable-length layout takes q [1, H, total_q, D] and k, v [1, H, "
          "total_k, D], got {}, {}, {}",
          op, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
    if (o.key_lengths.defined() || o.score_bias.defined() || o.packed_rows ||
        o.query_lengths.defined())
      ROTOR_FAIL(
          "{}: the variable-length layout takes no key or query lengths and no dense "
          "score bias",
          op);
    if (o.max_seqlen_q < 0 || o.max_seqlen_k < 0)
      ROTOR_FAIL("{}: max_seqlen_q and max_seqlen_k must be >= 0, got {} and {}", op,
                 o.max_seqlen_q, o.max_seqlen_k);
    const int64_t N = o.cu_seqlens_q.defined() ? o.cu_seqlens_q.numel() - 1 : 0;
    if (N < 1) ROTOR_FAIL("{}: cu_seqlens_q must hold at least one document", op);
    check_cu_seqlens(o.cu_seqlens_q, N, q.size(2), o.max_seqlen_q, q, "cu_seqlens_q", op);
    check_cu_seqlens(o.cu_seqlens_k, N, k.size(2), o.max_seqlen_k, q, "cu_seqlens_k", op);
    AttentionOptions dense = o;
    dense.cu_seqlens_q = dense.cu_seqlens_k = Tensor();
    check_attention_args(q, k, v, dense, op);  // dtypes, devices, dropout, T5's table
    return {N, q.size(1), o.max_seqlen_q, o.max_seqlen_k, q.size(3)};
  }
  const AttentionDims d{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.shape() != Shape{d.B, d.H, d.Tk, d.D} || v.shape() != k.shape())
    ROTOR_FAIL("{}: with q {} expected k and v [{}, {}, Tk, {}], got {} and {}", op,
               shape_str(q.shape()), d.B, d.H, d.D, shape_str(k.shape()), shape_str(v.shape()));
  require_floating(q, op);
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype()) ROTOR_FAIL("{}: q, k, v dtypes differ", op);
  check_same_device(q, k, op);
  check_same_device(q, v, op);
  if (o.key_lengths.defined()) {
    if (o.key_lengths.dtype() != DType::I32 || o.key_lengths.numel() != d.B)
      ROTOR_FAIL("{}: key_lengths must be i32 [{}], got {}", op, d.B, o.key_lengths.str());
    check_same_device(q, o.key_lengths, op);
  }
  if (!(o.dropout >= 0.0f && o.dropout < 1.0f))
    ROTOR_FAIL("{}: dropout must be in [0, 1), got {}", op, o.dropout);
  check_rel_bias(o, d, q, op);
  const Shape scores{d.B, d.H, d.Tq, d.Tk};
  for (const auto& [t, what] :
       {std::pair{&o.score_bias, "score_bias"}, std::pair{&o.score_bias_grad, "score_bias_grad"}}) {
    if (!t->defined()) continue;
    if (t->dtype() != DType::F32 || t->shape() != scores)
      ROTOR_FAIL("{}: {} must be f32 {}, got {}", op, what, shape_str(scores), t->str());
    check_same_device(q, *t, op);
  }
  if (o.score_bias_grad.defined() && !o.score_bias.defined())
    ROTOR_FAIL("{}: score_bias_grad without score_bias", op);
  return d;
}

void check_rel_bias(const AttentionOptions& o, const AttentionDims& d, const Tensor& q,
                    const char* op) {
  if (!o.rel_bias.defined()) {
    if (o.rel_bias_grad.defined()) ROTOR_FAIL("{}: rel_bias_grad without rel_bias", op);
    return;
  }
  if (o.alibi) ROTOR_FAIL("{}: ALiBi and T5's relative bias together", op);
  const Shape want{2 * o.rel_max + 1, d.H};
  if (o.rel_max < 0 || o.rel_bias.dtype() != DType::F32 || o.rel_bias.shape() != want)
    ROTOR_FAIL("{}: rel_bias must be f32 {}, got {}", op, shape_str(want), o.rel_bias.str());
  check_same_device(q, o.rel_bias, op);
  if (o.rel_bias_grad.defined()) {
    if (o.rel_bias_grad.dtype() != DType::F32 || o.rel_bias_grad.shape() != want)
      ROTOR_FAIL("{}: rel_bias_grad must be f32 {}, got {}", op, shape_str(want),
                 o.rel_bias_grad.str());
    check_same_device(q, o.rel_bias_grad, op);
  }
}

void check_like(const Tensor& t, const Shape& shape, const Tensor& q, const char* what) {
  check_shape(t, shape, what);
  if (t.dtype() != q.dtype()) ROTOR_FAIL("{}: dtype {} differs from q's", what, t.str());
  check_same_device(t, q, what);
}

// Visible keys of batch row b: j < key_length, and j <= i + (Tk - Tq) when causal.
std::vector<int64_t> key_lengths_host(const AttentionDims& d, const AttentionOptions& o,
                                      const char* op) {
  std::vector<int64_t> len(static_cast<size_t>(d.B), d.Tk);
  if (!o.key_lengths.defined()) return len;
  const int32_t* p = o.key_lengths.data<int32_t>();
  for (int64_t b = 0; b < d.B; ++b) {
    if (p[b] < 0 || p[b] > d.Tk)
      ROTOR_FAIL("{}: key_lengths[{}] = {} outside [0, {}]", op, b, p[b], d.Tk);
    len[static_cast<size_t>(b)] = p[b];
  }
  return len;
}

}  // namespace rotor::ops::detail
