#include "nn/attention.h"

#include <fmt/format.h>

#include <cmath>

#include "ops/cudnn_attention.h"
#include "ops/decode.h"
#include "ops/elementwise.h"

namespace rotor::nn {

MultiHeadAttention::MultiHeadAttention(ParameterStore& store, const AttentionNames& names,
                                       const AttentionConfig& config, bool cross)
    : config_(config), cross_(cross) {
  ROTOR_CHECK(config.d_model % config.n_heads == 0, "n_heads {} does not divide d_model {}",
              config.n_heads, config.d_model);
  head_dim_ = config.d_model / config.n_heads;
  ROTOR_CHECK(!config.rope || head_dim_ % 2 == 0, "RoPE needs an even head dimension, got {}",
              head_dim_);
  layer_id_ = store.next_layer_id();
  const int64_t d = config.d_model;
  // fairseq initializes q, k, v with gain 1/sqrt(2) (they share one fan).
  const std::optional<double>& std = config.normal_init_std;
  const Init qkv_init = std ? Init::normal(*std) : Init::xavier_uniform(1.0 / std::sqrt(2.0));
  const Init out_init = std ? Init::normal(*std) : Init::xavier_uniform();
  if (!cross) {
    qkv_ = std::make_unique<Linear>(store, std::vector<std::string>{names.q, names.k, names.v}, d,
                                    std::vector<int64_t>{d, d, d}, true, qkv_init);
  } else {
    q_ = std::make_unique<Linear>(store, std::vector<std::string>{names.q}, d,
                                  std::vector<int64_t>{d}, true, qkv_init);
    kv_ = std::make_unique<Linear>(store, std::vector<std::string>{names.k, names.v}, d,
                                   std::vector<int64_t>{d, d}, true, qkv_init);
  }
  out_ = std::make_unique<Linear>(store, names.out, d, d, true, out_init);
}

ops::SplitHeadsOptions MultiHeadAttention::split_options(bool self_qkv, int64_t offset,
                                                         bool core_rotates) const {
  ops::SplitHeadsOptions o;
  o.n_heads = config_.n_heads;
  o.rotary_parts = (self_qkv && config_.rope && !core_rotates) ? 2 : 0;
  o.rope_base = config_.rope_base;
  o.position_offset = offset;
  o.part0_scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  return o;
}

AttentionCore MultiHeadAttention::choose_core(const Tensor& q, const Tensor& k,
                                              const ops::AttentionOptions& options) const {
  AttentionCoreQuery query;
  query.on_cpu = q.is_cpu();
  query.rotor_supported = ops::flash_attention_supported(q);
  query.Tk = k.size(2);
  query.cudnn_unsupported = [&] {
    std::string why;
    ops::cudnn_attention_supported(q, k, options, &why);
    return why;
  };
  const AttentionCoreChoice choice = choose_attention_core(config_.impl, query);
  if (!choice.why.empty()) log_once(choice.why);
  return choice.core;
}

bool MultiHeadAttention::rope_in_core(const Tensor& q) const {
  if (!config_.rope || cross_ || !config_.rope_in_kernel) return false;
  if (core_ != AttentionCore::Rotor) {
    log_once(
        fmt::format("attention.rope_in_kernel: RoPE stays in the head split: the {} core "
                    "does not rotate (rotor's flash core does)",
                    attention_core_name(core_)));
    return false;
  }
  ops::AttentionOptions probe = attn_options_;
  probe.rope = true;
  if (!q.is_cpu() && !ops::flash_attention_tc_supported(q, probe)) {
    log_once(
        "attention.rope_in_kernel: RoPE stays in the head split: only the tensor-core kernel "
        "rotates on a GPU (sm_80+, f16/bf16, head dims 32/64/128)");
    return false;
  }
  log_once("attention.rope_in_kernel: RoPE rotated inside the flash attention core");
  return true;
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& memory, const Tensor& key_lengths,
                                   const Context& ctx) {
  const int64_t d = config_.d_model, H = config_.n_heads, D = head_dim_;
  B_ = x.size(0);
  Tq_ = x.size(1);
  Tk_ = cross_ ? memory.size(1) : Tq_;
  q_h_ = ctx.empty({B_, H, Tq_, D});
  k_h_ = ctx.empty({B_, H, Tk_, D});
  v_h_ = ctx.empty({B_, H, Tk_, D});
  // The core is chosen before the split: where it rotates q and k itself
  // (attention.rope_in_kernel), the split only splits.
  attn_options_ = ops::AttentionOptions{};
  attn_options_.scale = 1.0f;  // q is pre-scaled by the split
  attn_options_.causal = config_.causal;
  attn_options_.key_lengths = key_lengths;
  if (ctx.training && config_.dropout > 0.0f) {
    attn_options_.dropout = config_.dropout;
    attn_options_.seed = ctx.seed;
    attn_options_.stream = ctx.stream(layer_id_, RngPurpose::AttentionDropout);
  }
  core_ = choose_core(q_h_, k_h_, attn_options_);
  rope_in_core_ = rope_in_core(q_h_);
  if (rope_in_core_) {
    attn_options_.rope = true;
    attn_options_.rope_base = config_.rope_base;
    attn_options_.rope_q_offset = attn_options_.rope_k_offset = 0;
  }
  if (!cross_) {
    Tensor qkv = qkv_->forward(x.view({B_ * Tq_, d}), ctx);  // [B*T, 3d]
    std::vector<Tensor> parts{q_h_, k_h_, v_h_};
    ops::split_heads_forward(qkv.view({B_, Tq_, 3 * d}), parts,
                             split_options(true, 0, rope_in_core_));
  } else {
    Tensor q = q_->forward(x.view({B_ * Tq_, d}), ctx);
    std::vector<Tensor> qp{q_h_};
    ops::split_heads_forward(q.view({B_, Tq_, d}), qp, split_options(false, 0));
    Tensor kv = kv_->forward(memory.view({B_ * Tk_, d}), ctx);
    std::vector<Tensor> kvp{k_h_, v_h_};
    ops::SplitHeadsOptions o = split_options(false, 0);
    o.part0_scale = 1.0f;
    ops::split_heads_forward(kv.view({B_, Tk_, 2 * d}), kvp, o);
  }
  Tensor o = ctx.empty({B_, H, Tq_, D});
  if (core_ != AttentionCore::Reference) {
    lse_ = Tensor::empty({B_, H, Tq_}, DType::F32, ctx.device);
    if (core_ == AttentionCore::Cudnn)
      ops::cudnn_attention_forward(q_h_, k_h_, v_h_, attn_options_, o, lse_);
    else
      ops::flash_attention_forward(q_h_, k_h_, v_h_, attn_options_, o, lse_);
    o_h_ = o;  // the backward needs D = rowsum(dO o O)
  } else {
    probs_ = ctx.empty({B_, H, Tq_, Tk_});
    ops::attention_forward(q_h_, k_h_, v_h_, attn_options_, o, probs_);
  }
  Tensor merged = ctx.empty({B_, Tq_, d});
  ops::merge_heads_forward(o, merged);
  return out_->forward(merged.view({B_ * Tq_, d}), ctx).view({B_, Tq_, d});
}

Tensor MultiHeadAttention::backward(const Tensor& dy, Tensor* d_memory) {
  const int64_t d = config_.d_model, H = config_.n_heads, D = head_dim_;
  const DType dt = dy.dtype();
  const Device dev = dy.device();
  Tensor dmerged = out_->backward(dy.view({B_ * Tq_, d}));
  Tensor d_o = Tensor::empty({B_, H, Tq_, D}, dt, dev);
  ops::merge_heads_backward(dmerged.view({B_, Tq_, d}), d_o);
  Tensor dq = Tensor::empty(q_h_.shape(), dt, dev), dk = Tensor::empty(k_h_.shape(), dt, dev),
         dv = Tensor::empty(v_h_.shape(), dt, dev);
  if (core_ == AttentionCore::Cudnn)
    ops::cudnn_attention_backward(q_h_, k_h_, v_h_, o_h_, lse_, d_o, attn_options_, dq, dk, dv);
  else if (core_ == AttentionCore::Rotor)
    ops::flash_attention_backward(q_h_, k_h_, v_h_, o_h_, lse_, d_o, attn_options_, dq, dk, dv);
  else
    ops::attention_backward(q_h_, k_h_, v_h_, probs_, d_o, attn_options_, dq, dk, dv);
  q_h_ = k_h_ = v_h_ = probs_ = o_h_ = lse_ = Tensor();
  if (!cross_) {
    Tensor dqkv = Tensor::empty({B_, Tq_, 3 * d}, dt, dev);
    ops::split_heads_backward({dq, dk, dv}, dqkv, split_options(true, 0, rope_in_core_));
    Tensor dx = qkv_->backward(dqkv.view({B_ * Tq_, 3 * d})).view({B_, Tq_, d});
    if (!config_.rope) {
      // Without rotation the key bias adds q.b_k to all of a query's scores,
      // which softmax cancels: its gradient is exactly zero, and the fp32
      // round-off it would otherwise collect is what Adam (dividing by the
      // gradient's size) turns into steps of ~lr.
      Tensor db = qkv_->bias_grad().narrow(d, d);
      db.zero_();
    }
    return dx;
  }
  Tensor dqp = Tensor::empty({B_, Tq_, d}, dt, dev);
  ops::split_heads_backward({dq}, dqp, split_options(false, 0));
  Tensor dx = q_->backward(dqp.view({B_ * Tq_, d})).view({B_, Tq_, d});
  Tensor dkv = Tensor::empty({B_, Tk_, 2 * d}, dt, dev);
  ops::SplitHeadsOptions o = split_options(false, 0);
  o.part0_scale = 1.0f;
  ops::split_heads_backward({dk, dv}, dkv, o);
  Tensor dmem = kv_->backward(dkv.view({B_ * Tk_, 2 * d})).view({B_, Tk_, d});
  Tensor dbk = kv_->bias_grad().narrow(0, d);  // the key bias: zero gradient, as above
  dbk.zero_();
  ROTOR_CHECK(d_memory && d_memory->defined(), "cross-attention backward needs d_memory");
  // Several decoder layers attend to the same memory: their gradients add up.
  ops::add(*d_memory, dmem, *d_memory);
  return dx;
}

Tensor MultiHeadAttention::step(const Tensor& x, const Tensor& memory, const Tensor& key_lengths,
                                Cache& cache, int64_t position, int64_t max_length,
                                const Context& ctx) {
  const int64_t d = config_.d_model, H = config_.n_heads, D = head_dim_;
  const int64_t B = x.size(0);
  ROTOR_CHECK(x.dim() == 3 && x.size(1) == 1, "attention step: x must be [B, 1, d], got {}",
              x.str());
  Tensor q = ctx.empty({B, H, 1, D});
  Tensor o = ctx.empty({B, H, 1, D});
  if (!cross_) {
    if (!cache.k.defined()) {
      cache.k = ctx.zeros({B, H, max_length, D});
      cache.v = ctx.zeros({B, H, max_length, D});
      cache.length = 0;
    }
    ROTOR_CHECK(position == cache.length, "attention step at {} after {} cached", position,
                cache.length);
    Tensor qkv = qkv_->apply(x.view({B, d}), ctx);
    Tensor k = ctx.empty({B, H, 1, D}), v = ctx.empty({B, H, 1, D});
    std::vector<Tensor> parts{q, k, v};
    // The query is rotated at its own position; cached keys keep theirs.
    ops::split_heads_forward(qkv.view({B, 1, 3 * d}), parts, split_options(true, position));
    ops::kv_cache_write(k, cache.k, position);
    ops::kv_cache_write(v, cache.v, position);
    cache.length = position + 1;
    ops::decode_attention(q, cache.k, cache.v, cache.length, o);
  } else {
    const int64_t S = memory.size(1);
    if (!cache.k.defined()) {
      cache.k = ctx.empty({B, H, S, D});
      cache.v = ctx.empty({B, H, S, D});
      Tensor kv = kv_->apply(memory.view({B * S, d}), ctx);
      std::vector<Tensor> kvp{cache.k, cache.v};
      ops::SplitHeadsOptions so = split_options(false, 0);
      so.part0_scale = 1.0f;
      ops::split_heads_forward(kv.view({B, S, 2 * d}), kvp, so);
      cache.length = S;
    }
    Tensor qp = q_->apply(x.view({B, d}), ctx);
    std::vector<Tensor> qparts{q};
    ops::split_heads_forward(qp.view({B, 1, d}), qparts, split_options(false, 0));
    ops::AttentionOptions ao;
    ao.key_lengths = key_lengths;
    Tensor probs = Tensor::empty({B, H, 1, S}, ctx.dtype, ctx.device);
    ops::attention_forward(q, cache.k, cache.v, ao, o, probs);
  }
  Tensor merged = ctx.empty({B, 1, d});
  ops::merge_heads_forward(o, merged);
  return out_->apply(merged.view({B, d}), ctx).view({B, 1, d});
}

}  // namespace rotor::nn
