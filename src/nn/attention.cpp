#include "nn/attention.h"

#include <fmt/format.h>

#include <cmath>

#include "nn/attention_kind.h"
#include "ops/deberta_bias.h"
#include "ops/decode.h"
#include "ops/elementwise.h"
#include "ops/gemm.h"
#include "ops/reduce.h"
#include "ops/xl_bias.h"

namespace rotor::nn {

namespace {
// t in f32: t itself, or an f32 copy of 16-bit activations. Transformer-XL's
// and DeBERTa's terms compute in f32 whatever the training precision: from
// f32 copies of q and k, their gradients added to f32 copies of dq and dk
// that are rounded back once (f32_back).
Tensor f32_of(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor c = Tensor::empty(t.shape(), DType::F32, t.device());  // [shape of t]
  ops::cast(t, c);
  return c;
}

// An f32_of copy back into its 16-bit origin (nothing where it is the origin).
void f32_back(const Tensor& copy, Tensor& origin) {
  if (origin.dtype() != DType::F32) ops::cast(copy, origin);
}
}  // namespace

MultiHeadAttention::MultiHeadAttention(ParameterStore& store, const AttentionNames& names,
                                       const MultiHeadAttentionOptions& options, bool cross)
    : options_(options), cross_(cross) {
  // Cross-attention stays softmax attention (and never rotates).
  if (cross) options_.kind = AttentionKind::Softmax;
  if (cross) options_.alibi = false;            // ALiBi biases self-attention only
  if (cross) options_.relative_bias = nullptr;  // and so does T5's
  if (cross) options_.xl = false;               // and Transformer-XL's terms
  if (cross) options_.tupe = nullptr;           // and TUPE's correlation
  if (cross) options_.deberta = nullptr;        // and DeBERTa's terms
  ROTOR_CHECK(options.d_model % options.n_heads == 0, "n_heads {} does not divide d_model {}",
              options.n_heads, options.d_model);
  head_dim_ = options.d_model / options.n_heads;
  ROTOR_CHECK(!options.rope || head_dim_ % 2 == 0, "RoPE needs an even head dimension, got {}",
              head_dim_);
  layer_id_ = store.next_layer_id();
  const int64_t d = options.d_model;
  // fairseq initializes q, k, v with gain 1/sqrt(2) (they share one fan).
  const std::optional<double>& std = options.normal_init_std;
  const Init qkv_init = std ? Init::normal(*std) : Init::xavier_uniform(1.0 / std::sqrt(2.0));
  const Init out_init = std ? Init::normal(*std) : Init::xavier_uniform();
  const int64_t H = options.n_heads, D = head_dim_;
  const int64_t kv_heads = options.kv_heads > 0 ? options.kv_heads : H;
  ROTOR_CHECK(H % kv_heads == 0, "kv_heads {} does not divide n_heads {}", kv_heads, H);
  const int64_t dkv = kv_heads * D;  // the stored rows of k and of v
  // GQA: the rows each of the H key (then value) heads reads, from `first`.
  const auto grouped = [&](int64_t first, std::vector<int32_t>& rows) {
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < D; ++j)
        rows.push_back(static_cast<int32_t>(first + h / (H / kv_heads) * D + j));
  };
  const bool bias = options.bias;
  if (!cross) {
    qkv_ = std::make_unique<Linear>(store, std::vector<std::string>{names.q, names.k, names.v}, d,
                                    std::vector<int64_t>{d, dkv, dkv}, bias, qkv_init);
    if (kv_heads != H) {
      std::vector<int32_t> rows;
      for (int64_t r = 0; r < d; ++r) rows.push_back(static_cast<int32_t>(r));
      grouped(d, rows);
      grouped(d + dkv, rows);
      qkv_->share_rows(rows);
    }
  } else {
    q_ = std::make_unique<Linear>(store, std::vector<std::string>{names.q}, d,
                                  std::vector<int64_t>{d}, bias, qkv_init);
    kv_ = std::make_unique<Linear>(store, std::vector<std::string>{names.k, names.v}, d,
                                   std::vector<int64_t>{dkv, dkv}, bias, qkv_init);
    if (kv_heads != H) {
      std::vector<int32_t> rows;
      grouped(0, rows);
      grouped(dkv, rows);
      kv_->share_rows(rows);
    }
  }
  ROTOR_CHECK(kv_heads == H || !options_.deberta,
              "DeBERTa's relative terms need every head's own key projection (kv_heads {} of {})",
              kv_heads, H);
  out_ = std::make_unique<Linear>(store, names.out, d, d, bias, out_init);
  if (options_.xl) {
    const std::string prefix = names.q.substr(0, names.q.rfind('.'));
    r_proj_ = std::make_unique<Linear>(store, prefix + ".r_proj", d, d, false, qkv_init);
    const Init uv = Init::normal(std ? *std : 0.02);
    xl_u_ = store.add(prefix + ".r_w_bias", {options.n_heads, head_dim_}, uv, true);
    xl_v_ = store.add(prefix + ".r_r_bias", {options.n_heads, head_dim_}, uv, true);
  }
}

Tensor MultiHeadAttention::xl_bias(const Tensor& q, const Tensor& k, int64_t q_offset,
                                   const Context& ctx, bool training, Tensor* r_out) {
  const int64_t Tq = q.size(2), Tk = k.size(2);
  // One projected sinusoid per distance from -(Tk - 1) to q_offset + Tq - 1,
  // in f32 with the f32 master W_R whatever the activations' dtype.
  const Tensor table =  // [L, d], L = q_offset + Tq + Tk - 1
      ops::xl_distance_table(q_offset + Tq + Tk - 1, -(Tk - 1), options_.d_model).to(q.device());
  Context c32 = ctx;
  c32.dtype = DType::F32;
  Tensor r = training ? r_proj_->forward(table, c32) : r_proj_->apply(table, c32);  // f32 [L, d]
  Tensor bias =
      Tensor::empty({q.size(0), q.size(1), Tq, Tk}, DType::F32, q.device());  // [B, H, Tq, Tk]
  ops::xl_bias_forward(f32_of(q), f32_of(k), r, xl_u_->value, xl_v_->value,
                       1.0f / std::sqrt(static_cast<float>(head_dim_)), q_offset, bias);
  if (r_out) *r_out = r;
  return bias;
}

ops::SplitHeadsOptions MultiHeadAttention::split_options(bool self_qkv, int64_t offset,
                                                         RopePlacement rope, bool scale_q) const {
  ops::SplitHeadsOptions o;
  o.n_heads = options_.n_heads;
  o.rope_parts = (self_qkv && options_.rope && rope == RopePlacement::HeadSplit) ? 2 : 0;
  o.rope = options_.rope_params;
  o.position_offset = offset;
  // TUPE scales the content term by 1/sqrt(2 D), as its positional one.
  // DeBERTa scales its three terms by 1/sqrt(3 D).
  const float dims =
      static_cast<float>(head_dim_) * (options_.tupe ? 2.0f : (options_.deberta ? 3.0f : 1.0f));
  o.part0_scale = scale_q ? 1.0f / std::sqrt(dims) : 1.0f;
  return o;
}

const AttentionPlan& MultiHeadAttention::plan_for(const AttentionCase& c, const Device& device) {
  auto it = plans_.find(c);
  if (it != plans_.end()) return it->second;
  // Translation batches bring new shapes at almost every step: keep the
  // memo bounded.
  if (plans_.size() >= 4096) plans_.clear();
  const AttentionPlan plan = plan_attention(c, ops::attention_device(device));
  // Logged where the choice is the plan's (auto on a GPU) or the user asked
  // for RoPE inside the core; an explicit impl, or auto on the CPU, says
  // nothing new. A kind other than softmax says what its core runs.
  if ((plan.on_gpu && c.impl == AttentionImpl::Auto) || (c.rope && c.rope_in_kernel) ||
      c.kind != AttentionKind::Softmax || c.alibi || c.rel_bias || c.score_bias)
    log_once(plan.why);
  return plans_.emplace(c, plan).first->second;
}

DocLayout DocLayout::from_segments(const std::vector<int32_t>& segments, int64_t B, int64_t T,
                                   Device device) {
  ROTOR_CHECK(static_cast<int64_t>(segments.size()) == B * T && B > 0 && T > 0,
              "DocLayout: {} segment ids for a batch [{}, {}]", segments.size(), B, T);
  struct Run {
    int64_t start, length;  // batch rows start .. start + length - 1
  };
  std::vector<Run> runs;
  DocLayout l;
  l.B = B;
  l.T = T;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T;) {
      int64_t e = t + 1;
      while (e < T && segments[b * T + e] == segments[b * T + t]) ++e;
      if (segments[b * T + t] >= 0) {  // padding is no document
        runs.push_back({b * T + t, e - t});
        l.L = std::max(l.L, e - t);
      }
      t = e;
    }
  l.N = static_cast<int64_t>(runs.size());
  ROTOR_CHECK(l.N > 0, "DocLayout: a batch [{}, {}] of padding only", B, T);
  // Padding tokens read slot N*L, a zero row the forward appends.
  std::vector<int32_t> gather(static_cast<size_t>(l.N * l.L)), grad(gather.size()),
      scatter(static_cast<size_t>(B * T), static_cast<int32_t>(l.N * l.L)),
      lengths(static_cast<size_t>(l.N));
  l.positions.assign(static_cast<size_t>(B * T), 0);
  for (int64_t n = 0; n < l.N; ++n) {
    const Run& r = runs[static_cast<size_t>(n)];
    lengths[n] = static_cast<int32_t>(r.length);
    for (int64_t t = 0; t < l.L; ++t) {
      const bool real = t < r.length;
      gather[n * l.L + t] = static_cast<int32_t>(real ? r.start + t : r.start);
      grad[n * l.L + t] = static_cast<int32_t>(real ? r.start + t : B * T);
      if (!real) continue;
      scatter[r.start + t] = static_cast<int32_t>(n * l.L + t);
      l.positions[static_cast<size_t>(r.start + t)] = static_cast<int32_t>(t);
    }
  }
  // End to end: the runs in batch order, each contiguous in the flat batch.
  std::vector<int32_t> cu(static_cast<size_t>(l.N + 1), 0),
      stream_scatter(static_cast<size_t>(B * T));
  for (int64_t n = 0; n < l.N; ++n) cu[n + 1] = cu[n] + static_cast<int32_t>(runs[n].length);
  l.total = cu[static_cast<size_t>(l.N)];
  l.in_place = l.total == B * T;
  std::fill(stream_scatter.begin(), stream_scatter.end(), static_cast<int32_t>(l.total));
  l.stream_gather_host.resize(static_cast<size_t>(l.total));
  l.stream_positions.resize(static_cast<size_t>(l.total));
  for (int64_t n = 0; n < l.N; ++n)
    for (int64_t t = 0; t < runs[n].length; ++t) {
      const int64_t s = cu[n] + t, row = runs[n].start + t;
      l.stream_gather_host[s] = static_cast<int32_t>(row);
      l.stream_positions[s] = static_cast<int32_t>(t);
      stream_scatter[row] = static_cast<int32_t>(s);
    }
  l.cu_seqlens = Tensor::from_ints(cu, {l.N + 1}).to(device);
  l.stream_gather = Tensor::from_ints(l.stream_gather_host, {l.total}).to(device);
  l.stream_scatter = Tensor::from_ints(stream_scatter, {B * T}).to(device);
  l.key_lengths = Tensor::from_ints(lengths, {l.N}).to(device);
  l.gather = Tensor::from_ints(gather, {l.N * l.L}).to(device);
  l.gather_grad = Tensor::from_ints(grad, {l.N * l.L}).to(device);
  l.scatter = Tensor::from_ints(scatter, {B * T}).to(device);
  l.gather_host = std::move(gather);
  return l;
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& memory, const Tensor& key_lengths,
                                   const Context& ctx, const std::vector<int32_t>* positions,
                                   const DocLayout* docs, const DocLayout* memory_docs) {
  const int64_t d = options_.d_model, H = options_.n_heads, D = head_dim_;
  B_ = x.size(0);
  Tq_ = x.size(1);
  Tk_ = cross_ ? memory.size(1) : Tq_;
  docs_ = docs;
  memory_docs_ = cross_ ? memory_docs : nullptr;
  if (docs) {
    ROTOR_CHECK(!key_lengths.defined() && !options_.tupe,
                "attention: packed documents take no key lengths or TUPE");
    ROTOR_CHECK(docs->B == B_ && docs->T == Tq_,
                "attention: packed documents of a batch [{}, {}], input [{}, {}]", docs->B, docs->T,
                B_, Tq_);
    if (cross_) {
      ROTOR_CHECK(
          memory_docs && memory_docs->N == docs->N && memory_docs->B == B_ && memory_docs->T == Tk_,
          "cross-attention: packed queries need the memory's documents, one per query "
          "document, of a batch [{}, {}]",
          B_, Tk_);
    }
  }
  ROTOR_CHECK(!memory_docs || (cross_ && docs),
              "attention: the memory's documents are for cross-attention with packed queries");
  // Packed: the key side's documents (the memory's in cross-attention).
  const DocLayout* key_docs = memory_docs_ ? memory_docs_ : docs;
  Bc_ = docs ? docs->N : B_;
  Tc_ = docs ? docs->L : Tq_;
  Tkc_ = key_docs ? key_docs->L : Tk_;  // the core's key length
  attn_options_ = ops::AttentionOptions{};
  attn_options_.scale = 1.0f;  // q is pre-scaled by the split
  attn_options_.causal = options_.causal;
  attn_options_.key_lengths = memory_docs_ ? memory_docs_->key_lengths
                              : docs       ? docs->key_lengths
                                           : key_lengths;
  // The materialized core computes only each document's live block: [len,
  // len] in self-attention, [target len, source len] in cross-attention.
  attn_options_.packed_rows = docs != nullptr;
  if (memory_docs_) attn_options_.query_lengths = docs->key_lengths;
  if (ctx.training && options_.dropout > 0.0f) {
    attn_options_.dropout = options_.dropout;
    attn_options_.seed = ctx.seed;
    attn_options_.stream = ctx.stream(layer_id_, RngPurpose::AttentionDropout);
  }
  // The plan comes before the split: where the core rotates q and k itself,
  // the split only splits.
  AttentionCase c;
  c.kind = options_.kind;
  c.impl = options_.impl;
  c.rope = options_.rope && !cross_;
  c.alibi = options_.alibi;
  c.rel_bias = options_.relative_bias != nullptr;
  c.rel_max = c.rel_bias ? rel_max() : 0;
  c.score_bias = options_.xl || options_.tupe || options_.deberta;
  // Explicit positions are rotated in the head split (the cores count tokens).
  const bool explicit_positions = positions && c.rope;
  c.rope_in_kernel = options_.rope_in_kernel && !explicit_positions;
  c.rope_interleaved_full = rope::interleaved_full(options_.rope_params, D);
  c.causal = options_.causal;
  c.key_padding = attn_options_.key_lengths.defined();
  c.dropout = attn_options_.dropout > 0.0f;
  c.packed = docs != nullptr;
  c.training = ctx.training;
  c.dtype = ctx.dtype;
  c.B = Bc_;
  c.H = H;
  c.Tq = Tc_;
  c.Tk = Tkc_;
  c.D = D;
  c.linear = options_.linear;
  plan_ = plan_for(c, ctx.device);
  varlen_ = plan_.varlen;
  if (varlen_) {  // the documents end to end: one row of every token, cu_seqlens
    attn_options_.key_lengths = attn_options_.query_lengths = Tensor();
    attn_options_.packed_rows = false;
    attn_options_.cu_seqlens_q = docs->cu_seqlens;
    attn_options_.cu_seqlens_k = key_docs->cu_seqlens;
    attn_options_.max_seqlen_q = docs->L;
    attn_options_.max_seqlen_k = key_docs->L;
    Bc_ = 1;
    Tc_ = docs->total;
    Tkc_ = key_docs->total;
  }
  const int64_t Tkc = Tkc_;
  q_h_ = ctx.empty({Bc_, H, Tc_, D});
  k_h_ = ctx.empty({Bc_, H, Tkc, D});
  v_h_ = ctx.empty({Bc_, H, Tkc, D});
  positions_.clear();
  if (explicit_positions) {
    if (plan_.rope == RopePlacement::Core)
      ROTOR_FAIL(
          "attention {}: explicit (visit) positions need RoPE in the head split, but the {} core "
          "rotates itself",
          options_.kind.name(), plan_.str());
    ROTOR_CHECK(static_cast<int64_t>(positions->size()) == B_ * Tq_,
                "attention: {} explicit positions for a batch [{}, {}]", positions->size(), B_,
                Tq_);
    if (docs) {  // each document's row (or the stream) reads its tokens' positions
      const std::vector<int32_t>& gather = varlen_ ? docs->stream_gather_host : docs->gather_host;
      positions_.resize(gather.size());
      for (size_t i = 0; i < positions_.size(); ++i)
        positions_[i] = (*positions)[static_cast<size_t>(gather[i])];
    } else {
      positions_ = *positions;
    }
  } else if (varlen_ && plan_.rope == RopePlacement::HeadSplit) {
    positions_ = docs->stream_positions;  // the stream's tokens, from 0 in each document
  }
  // Random features (FAVOR+) are redrawn by the update in training and
  // frozen in evaluation at the last training forward's draw.
  AttentionCall call{layer_id_, 0};
  if (ctx.training) {
    call.draw = feature_draw(options_.linear.feature_redraw, ctx.update);
    trained_draw_ = static_cast<int64_t>(call.draw);
  } else {
    call.draw = trained_draw_ >= 0 ? static_cast<uint64_t>(trained_draw_)
                                   : feature_draw(options_.linear.feature_redraw, ctx.update);
  }
  attn_options_.flash_kernel = plan_.kernel;
  attn_options_.alibi = options_.alibi;
  if (options_.relative_bias) {  // the rows the model prepared for this forward
    attn_options_.rel_bias = options_.relative_bias->rows();
    attn_options_.rel_max = options_.relative_bias->max_distance();
    attn_options_.rel_bias_grad = options_.relative_bias->rows_grad();  // read by backward only
  }
  if (plan_.rope == RopePlacement::Core) {
    attn_options_.rope = true;
    attn_options_.rope_params = options_.rope_params;
    attn_options_.rope_q_offset = attn_options_.rope_k_offset = 0;
  }
  if (!cross_) {
    Tensor qkv = qkv_->forward(x.view({B_ * Tq_, d}), ctx);  // [B*T, 3d]
    if (docs && !(varlen_ && docs->in_place)) {  // each document a row, or the stream: [N*L, 3d]
      Tensor packed = ctx.empty({Bc_ * Tc_, 3 * d});  // [N*L, 3d]
      ops::index_select(qkv, varlen_ ? docs->stream_gather : docs->gather, packed);
      qkv = packed;
    }
    std::vector<Tensor> parts{q_h_, k_h_, v_h_};
    ops::SplitHeadsOptions so = split_options(true, 0, plan_.rope, plan_.split_scales_q);
    if (!positions_.empty()) so.positions = &positions_;
    ops::split_heads_forward(qkv.view({Bc_, Tc_, 3 * d}), parts, so);
  } else {
    Tensor q = q_->forward(x.view({B_ * Tq_, d}), ctx);         // [B*Tq, d]
    Tensor kv = kv_->forward(memory.view({B_ * Tk_, d}), ctx);  // [B*Tk, 2d]
    if (docs) {  // query document n and memory document n, each a row (or end to end)
      if (!(varlen_ && docs->in_place)) {
        Tensor qd = ctx.empty({Bc_ * Tc_, d});  // [N*Lq, d]
        ops::index_select(q, varlen_ ? docs->stream_gather : docs->gather, qd);
        q = qd;
      }
      if (!(varlen_ && memory_docs_->in_place)) {
        Tensor kvd = ctx.empty({Bc_ * Tkc, 2 * d});  // [N*Lk, 2d]
        ops::index_select(kv, varlen_ ? memory_docs_->stream_gather : memory_docs_->gather, kvd);
        kv = kvd;
      }
    }
    std::vector<Tensor> qp{q_h_};
    ops::split_heads_forward(q.view({Bc_, Tc_, d}), qp, split_options(false, 0));
    std::vector<Tensor> kvp{k_h_, v_h_};
    ops::SplitHeadsOptions o = split_options(false, 0);
    o.part0_scale = 1.0f;
    ops::split_heads_forward(kv.view({Bc_, Tkc, 2 * d}), kvp, o);
  }
  if (options_.xl) {  // Transformer-XL's terms, as the core's dense bias
    attn_options_.score_bias = xl_bias(q_h_, k_h_, 0, ctx, true, &xl_r_);
    attn_options_.score_bias_grad =
        Tensor::empty(attn_options_.score_bias.shape(), DType::F32, q_h_.device());
  }
  if (options_.deberta) {  // DeBERTa's disentangled terms, as a dense bias
    const Tensor& le = options_.deberta->embeddings();  // f32 [S, d]
    ROTOR_CHECK(plan_.split_scales_q, "DeBERTa's terms need q scaled by the head split");
    const int64_t S = le.size(0);
    const Device dev = q_h_.device();
    const Tensor w = qkv_->weight(DType::F32), b = qkv_->bias(DType::F32);  // [3d, d], [3d]
    deberta_qr_ = Tensor::empty({S, d}, DType::F32, dev);                   // [S, d]
    deberta_kr_ = Tensor::empty({S, d}, DType::F32, dev);                   // [S, d]
    for (int part = 0; part < 2; ++part) {  // the layer's query, then key projection
      Tensor& out = part == 0 ? deberta_qr_ : deberta_kr_;  // [S, d] = le W_part^T + b_part
      ops::GemmOptions o;
      o.trans_b = true;
      if (b.defined()) o.bias = b.narrow(part * d, d);
      ops::gemm(le, w.narrow(part * d, d), out, o);
    }
    attn_options_.score_bias =
        Tensor::empty({Bc_, H, Tc_, Tkc}, DType::F32, dev);  // [B, H, Tq, Tk]
    ops::deberta_bias_forward(
        f32_of(q_h_), f32_of(k_h_), deberta_kr_, deberta_qr_, options_.deberta->rows(),
        1.0f / std::sqrt(3.0f * static_cast<float>(D)), attn_options_.score_bias);
    attn_options_.score_bias_grad =
        Tensor::empty({Bc_, H, Tc_, Tkc}, DType::F32, dev);  // [B, H, Tq, Tk]
  }
  if (options_.tupe) {  // TUPE's correlation, as the model prepared it for this batch
    attn_options_.score_bias = options_.tupe->bias();
    ROTOR_CHECK(attn_options_.score_bias.shape() == (Shape{B_, H, Tq_, Tk_}),
                "TUPE's correlation {} does not match the attention [{}, {}, {}, {}]",
                attn_options_.score_bias.str(), B_, H, Tq_, Tk_);
    attn_options_.score_bias_grad =
        Tensor::empty(attn_options_.score_bias.shape(), DType::F32, q_h_.device());
  }
  Tensor o = ctx.empty({Bc_, H, Tc_, D});  // [B, H, Tq, D]
  plan_.kind->forward(plan_, q_h_, k_h_, v_h_, attn_options_, o, saved_, ctx, call);
  // Packed: the documents' rows and a zero row that padding tokens read.
  const bool unpack = docs && !(varlen_ && docs->in_place);
  Tensor rows = ctx.empty({Bc_ * Tc_ + (unpack ? 1 : 0), d});     // [B*Tq (+1), d]
  Tensor merged = rows.narrow(0, Bc_ * Tc_).view({Bc_, Tc_, d});  // [B, Tq, d]
  ops::merge_heads_forward(o, merged);
  if (unpack) {                               // the documents' rows back into the batch's: [B*T, d]
    Tensor zero = rows.narrow(Bc_ * Tc_, 1);  // [1, d]
    zero.zero_();
    Tensor back = ctx.empty({B_ * Tq_, d});  // [B*T, d]
    ops::index_select(rows, varlen_ ? docs->stream_scatter : docs->scatter, back);
    merged = back;
  }
  return out_->forward(merged.view({B_ * Tq_, d}), ctx).view({B_, Tq_, d});
}

Tensor MultiHeadAttention::backward(const Tensor& dy, Tensor* d_memory) {
  const int64_t d = options_.d_model, H = options_.n_heads, D = head_dim_;
  const DType dt = dy.dtype();
  const Device dev = dy.device();
  Tensor dmerged = out_->backward(dy.view({B_ * Tq_, d}));  // [B*Tq, d]
  if (docs_ && varlen_ && !docs_->in_place) {               // into the stream: [total, d]
    Tensor packed = Tensor::empty({Tc_, d}, dt, dev);       // [total, d]
    ops::index_select(dmerged, docs_->stream_gather, packed);
    dmerged = packed;
  } else if (docs_ && !varlen_) {  // into the documents' rows, their padding slots zero: [N*L, d]
    Tensor ext = Tensor::empty({B_ * Tq_ + 1, d}, dt, dev);  // [B*T + 1, d]
    Tensor rows = ext.narrow(0, B_ * Tq_);                   // [B*T, d]
    rows.copy_from(dmerged);
    Tensor zero = ext.narrow(B_ * Tq_, 1);  // [1, d]
    zero.zero_();
    Tensor packed = Tensor::empty({Bc_ * Tc_, d}, dt, dev);  // [N*L, d]
    ops::index_select(ext, docs_->gather_grad, packed);
    dmerged = packed;
  }
  Tensor d_o = Tensor::empty({Bc_, H, Tc_, D}, dt, dev);  // [B, H, Tq, D]
  ops::merge_heads_backward(dmerged.view({Bc_, Tc_, d}), d_o);
  // dq [B, H, Tq, D]; dk, dv [B, H, Tk, D]
  Tensor dq = Tensor::empty(q_h_.shape(), dt, dev), dk = Tensor::empty(k_h_.shape(), dt, dev),
         dv = Tensor::empty(v_h_.shape(), dt, dev);
  plan_.kind->backward(plan_, q_h_, k_h_, v_h_, saved_, d_o, attn_options_, dq, dk, dv);
  if (options_.xl) {  // the terms' gradients: into dq, dk, u, v and W_R
    Tensor dr = Tensor::empty(xl_r_.shape(), DType::F32, dev);  // [2 Tq - 1, d]
    Tensor dq32 = f32_of(dq), dk32 = f32_of(dk);                // [B, H, T, D] each
    ops::xl_bias_backward(f32_of(q_h_), f32_of(k_h_), xl_r_, xl_u_->value, xl_v_->value,
                          1.0f / std::sqrt(static_cast<float>(head_dim_)), 0,
                          attn_options_.score_bias_grad, dq32, dk32, dr, xl_u_->grad, xl_v_->grad);
    f32_back(dq32, dq);
    f32_back(dk32, dk);
    r_proj_->backward(dr, false);
    xl_r_ = attn_options_.score_bias = attn_options_.score_bias_grad = Tensor();
  }
  if (options_.deberta) {  // the terms' gradients: into dq, dk, the projections and the rows
    const Tensor& le = options_.deberta->embeddings();  // [S, d]
    const int64_t S = le.size(0);
    Tensor dqr = Tensor::empty({S, d}, DType::F32, dev);  // [S, d]
    Tensor dkr = Tensor::empty({S, d}, DType::F32, dev);  // [S, d]
    Tensor dq32 = f32_of(dq), dk32 = f32_of(dk);          // [B, H, T, D] each
    ops::deberta_bias_backward(f32_of(q_h_), f32_of(k_h_), deberta_kr_, deberta_qr_,
                               options_.deberta->rows(),
                               1.0f / std::sqrt(3.0f * static_cast<float>(D)),
                               attn_options_.score_bias_grad, dq32, dk32, dkr, dqr);
    f32_back(dq32, dq);
    f32_back(dk32, dk);
    const Tensor w = qkv_->weight(DType::F32);                // [3d, d]
    Tensor wg = qkv_->weight_grad(), bg = qkv_->bias_grad();  // f32 [3d, d], [3d]
    Tensor& dle = options_.deberta->embeddings_grad();        // f32 [S, d]
    ops::GemmOptions tn;                                      // C += A^T B
    tn.trans_a = true;
    tn.beta = 1.0f;
    ops::GemmOptions acc;  // C += A B
    acc.beta = 1.0f;
    for (int part = 0; part < 2; ++part) {
      const Tensor& g = part == 0 ? dqr : dkr;  // [S, d]
      // dW_part += g^T le; db_part += column sums of g; dle += g W_part.
      Tensor wg_part = wg.narrow(part * d, d);  // [d, d]
      ops::gemm(g, le, wg_part, tn);
      ops::gemm(g, w.narrow(part * d, d), dle, acc);
      if (bg.defined()) {
        Tensor bg_part = bg.narrow(part * d, d);  // [d]
        ops::sum_rows(g, bg_part, true);
      }
    }
    deberta_qr_ = deberta_kr_ = attn_options_.score_bias = attn_options_.score_bias_grad = Tensor();
  }
  if (options_.tupe) {  // this layer's share of the shared correlation's gradient
    Tensor& shared = options_.tupe->bias_grad();  // f32 [B, H, T, T]
    ops::add(shared, attn_options_.score_bias_grad, shared);
    attn_options_.score_bias = attn_options_.score_bias_grad = Tensor();
  }
  q_h_ = k_h_ = v_h_ = Tensor();
  saved_.clear();
  if (!cross_) {
    // Packed: the documents' rows and a zero row that padding tokens read.
    const bool unpack = docs_ && !(varlen_ && docs_->in_place);
    Tensor rows = Tensor::empty({Bc_ * Tc_ + (unpack ? 1 : 0), 3 * d}, dt, dev);  // [B*Tq (+1), 3d]
    Tensor dqkv = rows.narrow(0, Bc_ * Tc_).view({Bc_, Tc_, 3 * d});              // [B, Tq, 3d]
    ops::SplitHeadsOptions so = split_options(true, 0, plan_.rope, plan_.split_scales_q);
    if (!positions_.empty()) so.positions = &positions_;
    ops::split_heads_backward({dq, dk, dv}, dqkv, so);
    if (unpack) {  // back into the batch's rows (padding slots dropped): [B*T, 3d]
      Tensor zero = rows.narrow(Bc_ * Tc_, 1);  // [1, 3d]
      zero.zero_();
      Tensor back = Tensor::empty({B_ * Tq_, 3 * d}, dt, dev);  // [B*T, 3d]
      ops::index_select(rows, varlen_ ? docs_->stream_scatter : docs_->scatter, back);
      dqkv = back;
    }
    Tensor dx = qkv_->backward(dqkv.view({B_ * Tq_, 3 * d})).view({B_, Tq_, d});  // [B, Tq, d]
    // (DeBERTa's position-to-content term reads the key bias through k_j . Q_r
    // of a row that varies with j: there it has a gradient.)
    if (!options_.rope && !options_.deberta && plan_.kind->shift_invariant) {
      // Without rotation the key bias adds q.b_k to all of a query's scores,
      // which softmax cancels: its gradient is exactly zero, and the fp32
      // round-off it would otherwise collect is what Adam (dividing by the
      // gradient's size) turns into steps of ~lr.
      if (qkv_->has_bias()) {
        const int64_t dk_rows = (qkv_->bias_grad().size(0) - d) / 2;  // kv_heads * D
        Tensor db = qkv_->bias_grad().narrow(d, dk_rows);             // f32 [kv_heads * D]
        db.zero_();
      }
    }
    return dx;
  }
  // Packed: each side's documents back into its batch rows, through a zero
  // row that the batch's padding reads ([rows + 1, width] -> [B*T, width]).
  const auto unpack = [&](const Tensor& ext, const DocLayout& l, int64_t width) {
    Tensor zero = ext.narrow(ext.size(0) - 1, 1);  // [1, width]
    zero.zero_();
    Tensor back = Tensor::empty({l.B * l.T, width}, dt, dev);  // [B*T, width]
    ops::index_select(ext, varlen_ ? l.stream_scatter : l.scatter, back);
    return back;
  };
  // Whether a side's rows go back through a scatter (and a zero row).
  const auto scattered = [&](const DocLayout* l) { return l && !(varlen_ && l->in_place); };
  const int64_t extra_q = scattered(docs_) ? 1 : 0, extra_k = scattered(memory_docs_) ? 1 : 0;
  Tensor dq_rows = Tensor::empty({Bc_ * Tc_ + extra_q, d}, dt, dev);  // [B*Tq (+1), d]
  Tensor dqp = dq_rows.narrow(0, Bc_ * Tc_).view({Bc_, Tc_, d});      // [B, Tq, d]
  ops::split_heads_backward({dq}, dqp, split_options(false, 0));
  if (extra_q) dqp = unpack(dq_rows, *docs_, d);
  Tensor dx = q_->backward(dqp.view({B_ * Tq_, d})).view({B_, Tq_, d});     // [B, Tq, d]
  Tensor dkv_rows = Tensor::empty({Bc_ * Tkc_ + extra_k, 2 * d}, dt, dev);  // [B*Tk (+1), 2d]
  Tensor dkv = dkv_rows.narrow(0, Bc_ * Tkc_).view({Bc_, Tkc_, 2 * d});     // [B, Tk, 2d]
  ops::SplitHeadsOptions o = split_options(false, 0);
  o.part0_scale = 1.0f;
  ops::split_heads_backward({dk, dv}, dkv, o);
  if (extra_k) dkv = unpack(dkv_rows, *memory_docs_, 2 * d);
  Tensor dmem = kv_->backward(dkv.view({B_ * Tk_, 2 * d})).view({B_, Tk_, d});  // [B, Tk, d]
  if (plan_.kind->shift_invariant && kv_->has_bias()) {
    // f32 [kv_heads * D], the key bias: zero gradient, as above
    Tensor dbk = kv_->bias_grad().narrow(0, kv_->bias_grad().size(0) / 2);
    dbk.zero_();
  }
  ROTOR_CHECK(d_memory && d_memory->defined(), "cross-attention backward needs d_memory");
  // Several decoder layers attend to the same memory: their gradients add up.
  ops::add(*d_memory, dmem, *d_memory);
  return dx;
}

void MultiHeadAttention::release() {
  q_h_ = k_h_ = v_h_ = Tensor();
  saved_.clear();
  attn_options_.key_lengths = attn_options_.query_lengths = Tensor();
  attn_options_.cu_seqlens_q = attn_options_.cu_seqlens_k = Tensor();
  attn_options_.rel_bias = attn_options_.rel_bias_grad = Tensor();
  attn_options_.score_bias = attn_options_.score_bias_grad = xl_r_ = Tensor();
  deberta_qr_ = deberta_kr_ = Tensor();
  for (Linear* l : {qkv_.get(), q_.get(), kv_.get(), out_.get(), r_proj_.get()})
    if (l) l->release();
}

Tensor MultiHeadAttention::step(const Tensor& x, const Tensor& memory, const Tensor& key_lengths,
                                Cache& cache, int64_t position, int64_t max_length,
                                const Context& ctx) {
  const int64_t d = options_.d_model, H = options_.n_heads, D = head_dim_;
  const int64_t B = x.size(0);
  ROTOR_CHECK(x.dim() == 3 && x.size(1) == 1, "attention step: x must be [B, 1, d], got {}",
              x.str());
  ROTOR_CHECK(options_.kind->cached_decode, "attention kind {} has no incremental decoding step",
              options_.kind.name());
  Tensor q = ctx.empty({B, H, 1, D});  // [B, H, 1, D]
  Tensor o = ctx.empty({B, H, 1, D});  // [B, H, 1, D]
  if (!cross_) {
    if (!cache.k.defined()) {
      cache.k = ctx.zeros({B, H, max_length, D});
      cache.v = ctx.zeros({B, H, max_length, D});
      cache.length = 0;
    }
    ROTOR_CHECK(position == cache.length, "attention step at {} after {} cached", position,
                cache.length);
    Tensor qkv = qkv_->apply(x.view({B, d}), ctx);                    // [B, 3d]
    Tensor k = ctx.empty({B, H, 1, D}), v = ctx.empty({B, H, 1, D});  // [B, H, 1, D] each
    std::vector<Tensor> parts{q, k, v};
    // The query is rotated at its own position; cached keys keep theirs.
    ops::split_heads_forward(qkv.view({B, 1, 3 * d}), parts, split_options(true, position));
    ops::kv_cache_write(k, cache.k, position);
    ops::kv_cache_write(v, cache.v, position);
    cache.length = position + 1;
    if (options_.xl) {
      xl_step(q, cache, position, o, ctx);
    } else {
      // ALiBi or T5's bias at the step's position: the query at `position`, key j at j.
      ops::decode_attention(q, cache.k, cache.v, cache.length, o, options_.alibi, rel_rows(),
                            rel_max());
    }
  } else {
    const int64_t S = memory.size(1);
    if (!cache.k.defined()) {
      cache.k = ctx.empty({B, H, S, D});
      cache.v = ctx.empty({B, H, S, D});
      Tensor kv = kv_->apply(memory.view({B * S, d}), ctx);  // [B*S, 2d]
      std::vector<Tensor> kvp{cache.k, cache.v};
      ops::SplitHeadsOptions so = split_options(false, 0);
      so.part0_scale = 1.0f;
      ops::split_heads_forward(kv.view({B, S, 2 * d}), kvp, so);
      cache.length = S;
    }
    Tensor qp = q_->apply(x.view({B, d}), ctx);  // [B, d]
    std::vector<Tensor> qparts{q};
    ops::split_heads_forward(qp.view({B, 1, d}), qparts, split_options(false, 0));
    ops::AttentionOptions ao;
    ao.key_lengths = key_lengths;
    Tensor probs = Tensor::empty({B, H, 1, S}, ctx.dtype, ctx.device);  // [B, H, 1, S]
    ops::attention_forward(q, cache.k, cache.v, ao, o, probs);
  }
  Tensor merged = ctx.empty({B, 1, d});  // [B, 1, d]
  ops::merge_heads_forward(o, merged);
  return out_->apply(merged.view({B, d}), ctx).view({B, 1, d});
}

Tensor MultiHeadAttention::prefill(const Tensor& x, Cache& cache, int64_t max_length,
                                   const Context& ctx) {
  const int64_t d = options_.d_model, H = options_.n_heads, D = head_dim_;
  ROTOR_CHECK(!cross_ && options_.causal, "attention prefill: causal self-attention only");
  ROTOR_CHECK(options_.kind->cached_decode, "attention kind {} has no incremental decoding step",
              options_.kind.name());
  ROTOR_CHECK(x.dim() == 3 && x.size(2) == d, "attention prefill: x must be [B, T, {}], got {}", d,
              x.str());
  const int64_t B = x.size(0), T = x.size(1);
  ROTOR_CHECK(T >= 1 && T <= max_length, "attention prefill: {} positions into a cache of {}", T,
              max_length);
  // The planned core of forward, with RoPE always in the head split: the
  // cache keeps keys rotated at their positions.
  AttentionCase c;
  c.kind = options_.kind;
  c.impl = options_.impl;
  c.rope = options_.rope;
  c.rope_in_kernel = false;
  c.alibi = options_.alibi;
  c.rel_bias = options_.relative_bias != nullptr;
  c.rel_max = c.rel_bias ? rel_max() : 0;
  c.score_bias = options_.xl || options_.tupe;
  c.causal = true;
  c.training = false;
  c.dtype = ctx.dtype;
  c.B = B;
  c.H = H;
  c.Tq = c.Tk = T;
  c.D = D;
  c.linear = options_.linear;
  const AttentionPlan plan = plan_for(c, ctx.device);
  ROTOR_CHECK(plan.rope != RopePlacement::Core, "attention prefill: the plan rotates in the core");
  Tensor q = ctx.empty({B, H, T, D});                 // [B, H, T, D]
  Tensor k = ctx.empty({B, H, T, D});                 // [B, H, T, D]
  Tensor v = ctx.empty({B, H, T, D});                 // [B, H, T, D]
  Tensor qkv = qkv_->apply(x.view({B * T, d}), ctx);  // [B*T, 3d]
  std::vector<Tensor> parts{q, k, v};
  ops::split_heads_forward(qkv.view({B, T, 3 * d}), parts,
                           split_options(true, 0, plan.rope, plan.split_scales_q));
  cache.k = ctx.zeros({B, H, max_length, D});
  cache.v = ctx.zeros({B, H, max_length, D});
  cache.length = T;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      Tensor kd = cache.k.select(b).select(h).narrow(0, T);  // [T, D]
      Tensor vd = cache.v.select(b).select(h).narrow(0, T);  // [T, D]
      kd.copy_from(k.select(b).select(h));
      vd.copy_from(v.select(b).select(h));
    }
  ops::AttentionOptions ao;
  ao.scale = 1.0f;  // as in forward: q is pre-scaled by the split where the plan says
  ao.causal = true;
  ao.alibi = options_.alibi;
  ao.rel_bias = rel_rows();
  ao.rel_max = rel_max();
  if (options_.xl) ao.score_bias = xl_bias(q, k, 0, ctx, false, nullptr);
  ao.flash_kernel = plan.kernel;
  AttentionCall call{layer_id_, 0};
  call.draw = trained_draw_ >= 0 ? static_cast<uint64_t>(trained_draw_)
                                 : feature_draw(options_.linear.feature_redraw, ctx.update);
  Tensor o = ctx.empty({B, H, T, D});  // [B, H, T, D]
  std::vector<Tensor> saved;
  plan.kind->forward(plan, q, k, v, ao, o, saved, ctx, call);
  Tensor merged = ctx.empty({B, T, d});  // [B, T, d]
  ops::merge_heads_forward(o, merged);
  return out_->apply(merged.view({B * T, d}), ctx).view({B, T, d});
}

Tensor MultiHeadAttention::step_rows(const Tensor& x, Cache& cache,
                                     const std::vector<int64_t>& positions, const Context& ctx) {
  const int64_t d = options_.d_model, H = options_.n_heads, D = head_dim_;
  ROTOR_CHECK(!cross_ && options_.causal, "attention step_rows: causal self-attention only");
  ROTOR_CHECK(x.dim() == 3 && x.size(1) == 1 && x.size(2) == d,
              "attention step_rows: x must be [B, 1, {}], got {}", d, x.str());
  const int64_t B = x.size(0);
  ROTOR_CHECK(cache.k.defined() && cache.k.size(0) == B,
              "attention step_rows: {} rows against a cache of {}", B,
              cache.k.defined() ? cache.k.str() : std::string("none (prefill first)"));
  ROTOR_CHECK(static_cast<int64_t>(positions.size()) == B,
              "attention step_rows: {} positions for {} rows", positions.size(), B);
  const int64_t slots = cache.k.size(2);
  bool same = true;
  for (int64_t p : positions) {
    ROTOR_CHECK(p >= 0 && p < slots, "attention step_rows: position {} outside the {} cached slots",
                p, slots);
    same = same && p == positions[0];
    cache.length = std::max(cache.length, p + 1);
  }
  Tensor qkv = qkv_->apply(x.view({B, d}), ctx);  // [B, 3d]
  Tensor q = ctx.empty({B, H, 1, D});             // [B, H, 1, D]
  Tensor k = ctx.empty({B, H, 1, D});             // [B, H, 1, D]
  Tensor v = ctx.empty({B, H, 1, D});             // [B, H, 1, D]
  Tensor o = ctx.empty({B, H, 1, D});             // [B, H, 1, D]
  // Rows at one position go together; otherwise each row on its own (the
  // projections above and below stay batched).
  const int64_t groups = same ? 1 : B, rows = same ? B : 1;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t p = positions[static_cast<size_t>(g * rows)];
    std::vector<Tensor> parts{q.narrow(g * rows, rows), k.narrow(g * rows, rows),
                              v.narrow(g * rows, rows)};
    // [rows, 1, 3d]
    Tensor x_g = qkv.narrow(g * rows, rows).view({rows, 1, 3 * d});
    ops::split_heads_forward(x_g, parts, split_options(true, p));
    Tensor kc = cache.k.narrow(g * rows, rows);  // [rows, H, slots, D]
    Tensor vc = cache.v.narrow(g * rows, rows);  // [rows, H, slots, D]
    ops::kv_cache_write(parts[1], kc, p);
    ops::kv_cache_write(parts[2], vc, p);
    Tensor o_g = o.narrow(g * rows, rows);  // [rows, H, 1, D]
    if (options_.xl) {
      Cache rows_cache{kc, vc, p + 1};
      xl_step(parts[0], rows_cache, p, o_g, ctx);
    } else {
      // ALiBi or T5's bias at position p
      ops::decode_attention(parts[0], kc, vc, p + 1, o_g, options_.alibi, rel_rows(), rel_max());
    }
  }
  Tensor merged = ctx.empty({B, 1, d});  // [B, 1, d]
  ops::merge_heads_forward(o, merged);
  return out_->apply(merged.view({B, d}), ctx).view({B, 1, d});
}

void MultiHeadAttention::xl_step(const Tensor& q, const Cache& cache, int64_t position, Tensor& o,
                                 const Context& ctx) {
  // The cached keys and values 0..position, contiguous: [B, H, position + 1, D].
  const int64_t B = cache.k.size(0), H = cache.k.size(1), slots = cache.k.size(2),
                D = cache.k.size(3), n = position + 1;
  ROTOR_CHECK(cache.k.dtype() == DType::F32,
              "model.position transformer_xl decodes in fp32 only so far, not {}", cache.k.str());
  Tensor k = Tensor::empty({B, H, n, D}, DType::F32, cache.k.device());  // [B, H, n, D]
  Tensor v = Tensor::empty({B, H, n, D}, DType::F32, cache.k.device());  // [B, H, n, D]
  // Each (batch, head)'s first n slots, on the cache's device.
  const Tensor kc = cache.k.view({B * H, slots * D});  // [B H, slots D]
  const Tensor vc = cache.v.view({B * H, slots * D});  // [B H, slots D]
  Tensor kn = k.view({B * H, n * D});                  // [B H, n D]
  Tensor vn = v.view({B * H, n * D});                  // [B H, n D]
  for (int64_t bh = 0; bh < B * H; ++bh) {
    Tensor kd = kn.narrow(bh, 1), vd = vn.narrow(bh, 1);  // [1, n D] each
    kd.copy_from(kc.narrow(bh, 1).view({slots * D}).narrow(0, n * D).view({1, n * D}));
    vd.copy_from(vc.narrow(bh, 1).view({slots * D}).narrow(0, n * D).view({1, n * D}));
  }
  ops::AttentionOptions ao;
  ao.scale = 1.0f;  // q is pre-scaled by the split
  ao.score_bias = xl_bias(q, k, position, ctx, false, nullptr);
  Tensor probs = Tensor::empty({B, H, 1, n}, DType::F32, k.device());  // [B, H, 1, n]
  ops::attention_forward(q, k, v, ao, o, probs);
}

}  // namespace rotor::nn
