// The CUDA implementations behind the op API (only in builds with CUDA).
// Same signatures and semantics as the public ops in src/ops/*.h, which have
// checked the arguments before calling these; defined in src/ops/*_cuda.cpp,
// which call the raw-pointer launchers of kernels/*.cuh.
#pragma once

#include <vector>

#include "ops/adamw.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "ops/gemm.h"
#include "ops/heads.h"
#include "ops/linear_attention.h"

namespace rotor::ops::cuda_impl {

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmOptions& options);

void fill(Tensor& x, float value);
void cast(const Tensor& src, Tensor& dst);
void add(const Tensor& a, const Tensor& b, Tensor& out);
void mul(const Tensor& a, const Tensor& b, Tensor& out);
void scale(Tensor& x, float s);
void axpby(float alpha, const Tensor& x, float beta, Tensor& y);
void add_bias(Tensor& x, const Tensor& bias);
void activation_forward(const Tensor& x, Tensor& y, Activation act);
void activation_backward(const Tensor& dy, const Tensor& x, Tensor& dx, Activation act);
void glu_forward(const Tensor& h, Tensor& y, Activation act);
void glu_backward(const Tensor& dy, const Tensor& h, Tensor& dh, Activation act);
void tanh_forward(const Tensor& x, Tensor& y);
void tanh_backward(const Tensor& dy, const Tensor& y, Tensor& dx);

void sum_rows(const Tensor& x, Tensor& out, bool accumulate);
void sum(const Tensor& x, double& result);
void max_abs(const Tensor& x, float& result);
void global_norm(const std::vector<Tensor>& tensors, Tensor& out);
void any_nonfinite(const std::vector<Tensor>& tensors, Tensor& out);

void softmax_forward(const Tensor& x, Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx);

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                        Tensor& y, Tensor& mean, Tensor& rstd, bool rms);
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool rms);
void layer_norm_backward_add(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                             const Tensor& mean, const Tensor& rstd, const Tensor& residual,
                             Tensor& dx, Tensor& dgamma, Tensor& dbeta, bool rms);

void dropout_forward(const Tensor& x, Tensor& y, float p, uint64_t seed, uint64_t stream);
void dropout_backward(const Tensor& dy, Tensor& dx, float p, uint64_t seed, uint64_t stream);
void dropout_add_forward(const Tensor& residual, const Tensor& x, float p, uint64_t seed,
                         uint64_t stream, Tensor& out);

void embedding_forward(const Tensor& ids, const Tensor& table, float scale, Tensor& out);
void embedding_backward(const Tensor& ids, const Tensor& dout, float scale, Tensor& dtable,
                        int pad_id);

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, float smoothing,
                           int ignore_index, Tensor& loss, Tensor& nll, Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            float smoothing, int ignore_index, float loss_scale, Tensor& dlogits);
void top1_hits(const Tensor& logits, const Tensor& targets, int ignore_index, Tensor& hits);

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                       const AttentionOptions& options, Tensor& out, Tensor& probs);
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const AttentionOptions& options, Tensor& dq, Tensor& dk,
                        Tensor& dv);
// TUPE's untied [CLS] (src/ops/tupe_cls.h; kernels/attention_reference.cu).
void tupe_untie_cls(Tensor& c, const Tensor& theta);
void tupe_untie_cls_backward(Tensor& g, Tensor& dtheta);
// DeBERTa's relative rows (src/ops/deberta_bias.h; src/ops/deberta_bias_cuda.cpp,
// kernels/deberta_rows.cu).
void deberta_gather(const Tensor& c2p, const Tensor& p2c, const Tensor& rows, float scale,
                    Tensor& bias);
void deberta_scatter(const Tensor& dbias, const Tensor& rows, float scale, Tensor& dc2p,
                     Tensor& dp2c);
// Transformer-XL's relative shift (src/ops/xl_bias.h; src/ops/xl_bias_cuda.cpp,
// kernels/xl_shift.cu).
void xl_shift_forward(const Tensor& g, const Tensor& gv, const Tensor& cu, int64_t q_offset,
                      Tensor& bias);
void xl_shift_backward(const Tensor& dbias, int64_t q_offset, Tensor& dg, Tensor& dgv, Tensor& dcu);

// Flash-style attention core (src/ops/flash_attention_cuda.cpp, kernels/flash_attention.cu).
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options, Tensor& out, Tensor& lse);
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout,
                              const AttentionOptions& options, Tensor& dq, Tensor& dk, Tensor& dv);

// Linear attention (src/ops/linear_attention_cuda.cpp, kernels/linear_attention.cu).
void linear_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& projection, const LinearAttentionOptions& options,
                              Tensor& out, Tensor& den);
void linear_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& projection, const Tensor& out, const Tensor& den,
                               const Tensor& dout, const LinearAttentionOptions& options,
                               Tensor& dq, Tensor& dk, Tensor& dv);

// Incremental decoding (src/ops/decode_cuda.cpp, kernels/decode_attention.cu).
void kv_cache_write(const Tensor& src, Tensor& cache, int64_t position);
void decode_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t length,
                      Tensor& out, bool alibi, const Tensor& rel_bias, int64_t rel_max);
void index_select(const Tensor& src, const Tensor& index, Tensor& dst);

// Head split with fused RoPE (defined in src/ops/heads_cuda.cpp, kernels/heads.cu).
void split_heads_forward(const Tensor& x, std::vector<Tensor>& parts,
                         const SplitHeadsOptions& options);
void split_heads_backward(const std::vector<Tensor>& dparts, Tensor& dx,
                          const SplitHeadsOptions& options);
void merge_heads_forward(const Tensor& x, Tensor& y);
void merge_heads_backward(const Tensor& dy, Tensor& dx);

void adamw_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWOptions& options);

}  // namespace rotor::ops::cuda_impl
