#include "nn/bert_layer.h"

namespace rotor::nn {

namespace {
AttentionNames bert_attention_names(const std::string& p) {
  return {p + ".attention.self.query", p + ".attention.self.key", p + ".attention.self.value",
          p + ".attention.output.dense"};
}

AttentionConfig attention_config(const BertLayerConfig& c) {
  AttentionConfig a;
  a.d_model = c.d_model;
  a.n_heads = c.n_heads;
  a.causal = false;
  a.rope = c.rope;
  a.rope_base = c.rope_base;
  a.dropout = c.attention_dropout;
  a.impl = c.impl;
  return a;
}

// MultiHeadAttention registers its projections with the fairseq (Xavier)
// init; BERT draws every weight from N(0, init_std). The init is read only by
// ParameterStore::initialize, so overriding it after registration is enough.
void set_normal_init(ParameterStore& store, const std::string& prefix, double std) {
  Parameter* w = store.find(prefix + ".weight");
  ROTOR_CHECK(w != nullptr, "BertLayer: parameter {}.weight not registered", prefix);
  w->init = Init::normal(std);
  if (Parameter* b = store.find(prefix + ".bias")) b->init = Init::zeros();
}
}  // namespace

BertLayer::BertLayer(ParameterStore& s, const std::string& p, const BertLayerConfig& c)
    : attn_(s, bert_attention_names(p), attention_config(c), false),
      attn_res_(s, p + ".attention.output.LayerNorm", c.d_model, c.layer_norm_eps, c.dropout,
                c.post_norm),
      ffn_(s, p + ".intermediate.dense", p + ".output.dense", c.d_model, c.d_ff, c.activation,
           c.activation_dropout, Init::normal(c.init_std)),
      ffn_res_(s, p + ".output.LayerNorm", c.d_model, c.layer_norm_eps, c.dropout, c.post_norm),
      d_(c.d_model) {
  const AttentionNames n = bert_attention_names(p);
  for (const std::string& name : {n.q, n.k, n.v, n.out}) set_normal_init(s, name, c.init_std);
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& lengths, const Context& ctx) {
  B_ = x.size(0);
  T_ = x.size(1);
  Tensor x2 = x.view({B_ * T_, d_});
  Tensor h = attn_res_.begin(x2, ctx);
  Tensor a = attn_.forward(h.view({B_, T_, d_}), Tensor(), lengths, ctx).view({B_ * T_, d_});
  Tensor y = attn_res_.end(x2, a, ctx);
  Tensor h2 = ffn_res_.begin(y, ctx);
  Tensor f = ffn_.forward(h2, ctx);
  return ffn_res_.end(y, f, ctx).view({B_, T_, d_});
}

Tensor BertLayer::backward(const Tensor& dy) {
  Tensor g = ffn_res_.end_backward(dy.view({B_ * T_, d_}));
  g = ffn_res_.begin_backward(ffn_.backward(g));
  Tensor ga = attn_res_.end_backward(g);
  Tensor dh = attn_.backward(ga.view({B_, T_, d_}), nullptr).view({B_ * T_, d_});
  return attn_res_.begin_backward(dh).view({B_, T_, d_});
}

}  // namespace rotor::nn
