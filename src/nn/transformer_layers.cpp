#include "nn/transformer_layers.h"

namespace rotor::nn {

namespace {
AttentionNames names(const std::string& p) {
  return {p + ".q_proj", p + ".k_proj", p + ".v_proj", p + ".out_proj"};
}
MultiHeadAttentionOptions attention_options(const LayerOptions& c, bool causal, bool rope) {
  MultiHeadAttentionOptions a;
  a.normal_init_std = c.normal_init_std;
  a.d_model = c.d_model;
  a.n_heads = c.n_heads;
  a.causal = causal;
  a.rope = rope;
  a.rope_params = c.rope_params;
  a.alibi = c.alibi;  // self-attention only: MultiHeadAttention drops it for cross-attention
  a.relative_bias = c.relative_bias;  // likewise
  a.xl = c.xl;                        // likewise
  a.tupe = c.tupe;                    // likewise
  a.deberta = c.deberta;              // likewise
  a.dropout = c.attention_dropout;
  a.kind = c.attention_kind;
  a.impl = c.impl;
  a.rope_in_kernel = c.rope_in_kernel;
  a.linear = c.linear_attention;
  a.kv_heads = c.kv_heads;
  a.bias = c.bias;
  return a;
}
FeedForwardOptions ffn_options(const LayerOptions& c) {
  FeedForwardOptions f;
  f.d_model = c.d_model;
  f.d_ff = c.d_ff;
  f.activation = c.activation;
  f.activation_dropout = c.activation_dropout;
  f.init = c.normal_init_std ? Init::normal(*c.normal_init_std) : Init::xavier_uniform();
  f.gated = c.gated_ffn;
  f.bias = c.bias;
  return f;
}
}  // namespace

EncoderLayer::EncoderLayer(ParameterStore& s, const EncoderLayerNames& n, const LayerOptions& c,
                           bool causal)
    : attn_(s, n.attention, attention_options(c, causal, c.rope), false),
      attn_res_(s, n.attention_norm, c.d_model, c.layer_norm_eps, c.dropout, c.post_norm,
                c.rms_norm),
      ffn_(s, n.fc1, n.fc2, ffn_options(c)),
      ffn_res_(s, n.final_norm, c.d_model, c.layer_norm_eps, c.dropout, c.post_norm, c.rms_norm),
      recompute_(c.checkpoint),
      d_(c.d_model) {}

Tensor EncoderLayer::forward(const Tensor& x, const Tensor& lengths, const Context& ctx,
                             const std::vector<int32_t>* positions, const DocLayout* docs) {
  Tensor y = run(x, lengths, ctx, positions, docs);  // [B, T, d]
  checkpoint_docs_ = docs;
  if (!recompute_.applies(ctx)) {
    recompute_.drop();
    checkpoint_positions_.reset();
    return y;
  }
  release();
  recompute_.keep({x, lengths}, ctx);
  if (positions)
    checkpoint_positions_ = *positions;
  else
    checkpoint_positions_.reset();
  return y;
}

void EncoderLayer::release() {
  attn_.release();
  attn_res_.release();
  ffn_.release();
  ffn_res_.release();
}

Tensor EncoderLayer::run(const Tensor& x, const Tensor& lengths, const Context& ctx,
                         const std::vector<int32_t>* positions, const DocLayout* docs) {
  B_ = x.size(0);
  T_ = x.size(1);
  Tensor x2 = x.view({B_ * T_, d_});    // [B*T, d]
  Tensor h = attn_res_.begin(x2, ctx);  // [B*T, d]
  // [B*T, d]
  Tensor a = attn_.forward(h.view({B_, T_, d_}), Tensor(), lengths, ctx, positions, docs)
                 .view({B_ * T_, d_});
  Tensor y = attn_res_.end(x2, a, ctx);  // [B*T, d]
  Tensor h2 = ffn_res_.begin(y, ctx);    // [B*T, d]
  Tensor f = ffn_.forward(h2, ctx);      // [B*T, d]
  return ffn_res_.end(y, f, ctx).view({B_, T_, d_});
}

Tensor EncoderLayer::backward(const Tensor& dy) {
  if (recompute_.pending()) {
    run(recompute_.input(0), recompute_.input(1), recompute_.context(),
        checkpoint_positions_ ? &*checkpoint_positions_ : nullptr, checkpoint_docs_);
    recompute_.drop();
    checkpoint_positions_.reset();
  }
  Tensor g = ffn_res_.end_backward(dy.view({B_ * T_, d_}));  // [B*T, d]
  g = ffn_res_.begin_backward(ffn_.backward(g));
  Tensor ga = attn_res_.end_backward(g);                                           // [B*T, d]
  Tensor dh = attn_.backward(ga.view({B_, T_, d_}), nullptr).view({B_ * T_, d_});  // [B*T, d]
  return attn_res_.begin_backward(dh).view({B_, T_, d_});
}

Tensor EncoderLayer::prefill(const Tensor& x, MultiHeadAttention::Cache& cache, int64_t max_length,
                             const Context& ctx) {
  const int64_t B = x.size(0), T = x.size(1);
  Tensor x2 = x.view({B * T, d_});            // [B*T, d]
  Tensor h = attn_res_.apply_begin(x2, ctx);  // [B*T, d]
  // [B*T, d]
  Tensor a = attn_.prefill(h.view({B, T, d_}), cache, max_length, ctx).view({B * T, d_});
  Tensor y = attn_res_.apply_end(x2, a, ctx);                // [B*T, d]
  Tensor f = ffn_.apply(ffn_res_.apply_begin(y, ctx), ctx);  // [B*T, d]
  return ffn_res_.apply_end(y, f, ctx).view({B, T, d_});
}

Tensor EncoderLayer::step(const Tensor& x, MultiHeadAttention::Cache& cache,
                          const std::vector<int64_t>& positions, const Context& ctx) {
  const int64_t B = x.size(0);
  Tensor x2 = x.view({B, d_});                // [B, d]
  Tensor h = attn_res_.apply_begin(x2, ctx);  // [B, d]
  // [B, d]
  Tensor a = attn_.step_rows(h.view({B, 1, d_}), cache, positions, ctx).view({B, d_});
  Tensor y = attn_res_.apply_end(x2, a, ctx);                // [B, d]
  Tensor f = ffn_.apply(ffn_res_.apply_begin(y, ctx), ctx);  // [B, d]
  return ffn_res_.apply_end(y, f, ctx).view({B, 1, d_});
}

DecoderLayer::DecoderLayer(ParameterStore& s, const std::string& p, const LayerOptions& c)
    : self_attn_(s, names(p + ".self_attn"), attention_options(c, true, c.rope), false),
      self_res_(s, p + ".self_attn_layer_norm", c.d_model, c.layer_norm_eps, c.dropout, c.post_norm,
                c.rms_norm),
      cross_attn_(s, names(p + ".encoder_attn"), attention_options(c, false, false), true),
      cross_res_(s, p + ".encoder_attn_layer_norm", c.d_model, c.layer_norm_eps, c.dropout,
                 c.post_norm, c.rms_norm),
      ffn_(s, p + ".fc1", p + ".fc2", ffn_options(c)),
      ffn_res_(s, p + ".final_layer_norm", c.d_model, c.layer_norm_eps, c.dropout, c.post_norm,
               c.rms_norm),
      recompute_(c.checkpoint),
      d_(c.d_model) {}

Tensor DecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths,
                             const Context& ctx, const DocLayout* docs,
                             const DocLayout* memory_docs) {
  Tensor y = run(x, memory, memory_lengths, ctx, docs, memory_docs);  // [B, T, d]
  docs_ = docs;
  memory_docs_ = memory_docs;
  if (!recompute_.applies(ctx)) {
    recompute_.drop();
    return y;
  }
  release();
  recompute_.keep({x, memory, memory_lengths}, ctx);
  return y;
}

void DecoderLayer::release() {
  self_attn_.release();
  self_res_.release();
  cross_attn_.release();
  cross_res_.release();
  ffn_.release();
  ffn_res_.release();
}

Tensor DecoderLayer::run(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths,
                         const Context& ctx, const DocLayout* docs, const DocLayout* memory_docs) {
  B_ = x.size(0);
  T_ = x.size(1);
  Tensor x2 = x.view({B_ * T_, d_});  // [B*T, d]
  // Right padding: the causal mask already hides every pad key from real queries.
  Tensor h = self_res_.begin(x2, ctx);  // [B*T, d]
  // [B*T, d]
  Tensor a = self_attn_.forward(h.view({B_, T_, d_}), Tensor(), Tensor(), ctx, nullptr, docs)
                 .view({B_ * T_, d_});
  Tensor y = self_res_.end(x2, a, ctx);  // [B*T, d]
  Tensor hc = cross_res_.begin(y, ctx);  // [B*T, d]
  // [B*T, d]
  Tensor c =
      cross_attn_
          .forward(hc.view({B_, T_, d_}), memory, memory_lengths, ctx, nullptr, docs, memory_docs)
          .view({B_ * T_, d_});
  Tensor y2 = cross_res_.end(y, c, ctx);  // [B*T, d]
  Tensor hf = ffn_res_.begin(y2, ctx);    // [B*T, d]
  Tensor f = ffn_.forward(hf, ctx);       // [B*T, d]
  return ffn_res_.end(y2, f, ctx).view({B_, T_, d_});
}

Tensor DecoderLayer::backward(const Tensor& dy, Tensor& d_memory) {
  if (recompute_.pending()) {
    run(recompute_.input(0), recompute_.input(1), recompute_.input(2), recompute_.context(), docs_,
        memory_docs_);
    recompute_.drop();
  }
  Tensor g = ffn_res_.end_backward(dy.view({B_ * T_, d_}));  // [B*T, d]
  g = ffn_res_.begin_backward(ffn_.backward(g));
  Tensor gc = cross_res_.end_backward(g);  // [B*T, d]
  // [B*T, d]
  Tensor dhc = cross_attn_.backward(gc.view({B_, T_, d_}), &d_memory).view({B_ * T_, d_});
  g = cross_res_.begin_backward(dhc);
  Tensor ga = self_res_.end_backward(g);  // [B*T, d]
  // [B*T, d]
  Tensor dh = self_attn_.backward(ga.view({B_, T_, d_}), nullptr).view({B_ * T_, d_});
  return self_res_.begin_backward(dh).view({B_, T_, d_});
}

Tensor DecoderLayer::step(const Tensor& x, const Tensor& memory, const Tensor& memory_lengths,
                          State& state, int64_t position, int64_t max_length, const Context& ctx) {
  const int64_t B = x.size(0);
  Tensor x2 = x.view({B, d_});                // [B, d]
  Tensor h = self_res_.apply_begin(x2, ctx);  // [B, d]
  // [B, d]
  Tensor a =
      self_attn_.step(h.view({B, 1, d_}), Tensor(), Tensor(), state.self, position, max_length, ctx)
          .view({B, d_});
  Tensor y = self_res_.apply_end(x2, a, ctx);  // [B, d]
  Tensor hc = cross_res_.apply_begin(y, ctx);  // [B, d]
  // [B, d]
  Tensor c =
      cross_attn_
          .step(hc.view({B, 1, d_}), memory, memory_lengths, state.cross, position, max_length, ctx)
          .view({B, d_});
  Tensor y2 = cross_res_.apply_end(y, c, ctx);                // [B, d]
  Tensor f = ffn_.apply(ffn_res_.apply_begin(y2, ctx), ctx);  // [B, d]
  return ffn_res_.apply_end(y2, f, ctx).view({B, 1, d_});
}

}  // namespace rotor::nn
