// Multi-head attention as docs/design.md, "The attention block", lays it out:
//   fused QKV projection (one GEMM, bias in its epilogue)
//   -> split heads with RoPE on q and k and the 1/sqrt(d) scale on q
//   -> attention core (masks, dropout)
//   -> merge heads -> output projection.
// Cross-attention projects q from the decoder and k, v from the encoder
// output, never rotates, adds no ALiBi or T5 bias and is always softmax attention
// (whatever kind the options name, which is self-attention's).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/attention_plan.h"
#include "nn/deberta.h"
#include "nn/kinds.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "nn/relative_bias.h"
#include "nn/tupe.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "ops/heads.h"

namespace rotor::nn {

struct MultiHeadAttentionOptions {
  int64_t d_model = 512;
  int64_t n_heads = 8;
  bool causal = false;
  bool rope = false;
  rope::Params rope_params{};  // model.rope's settings (core/rope.h)
  // ALiBi (core/alibi.h): the core adds head h's -slope * distance to the
  // scores, causal or symmetric as `causal` says; the decoding steps add it at
  // the query's position. Self-attention only (cross-attention drops it).
  bool alibi = false;
  // T5's relative bias (nn/relative_bias.h), shared by the stack's layers and
  // prepared by the model before they run; null: none. Self-attention only.
  RelativeBias* relative_bias = nullptr;
  // Transformer-XL's relative terms (model.position transformer_xl; Dai et
  // al. 2019, eq. 4): self-attention adds (q_i + v) . W_R R(i - j) + u . k_j
  // to its scores, with its own projection W_R (PREFIX.r_proj.weight) of
  // the distances' sinusoids and u, v per head (PREFIX.r_w_bias,
  // PREFIX.r_r_bias), PREFIX the q projection's parent. Computed here as a
  // dense bias for the materialized core (ops/xl_bias.h), in fp32, on the
  // CPU and on CUDA.
  bool xl = false;
  // TUPE's untied positional correlation (model.position tupe,
  // nn/tupe.h), shared by the stack's layers and prepared by the model: q
  // and k are scaled by 1/sqrt(2 D) and the core adds the correlation as a
  // dense bias, whose gradient each layer adds into it. Self-attention only;
  // null: none.
  TupeBias* tupe = nullptr;
  // DeBERTa's disentangled attention (model.position deberta, nn/deberta.h):
  // the shared relative embeddings, prepared by the model, which this layer
  // projects with its own query and key projections; its scores add q_i .
  // K_r[row] + k_j . Q_r[row], all three terms scaled by 1/sqrt(3 D), as the
  // materialized core's dense bias. Self-attention only; null: none.
  DebertaRelative* deberta = nullptr;
  float dropout = 0.0f;                         // on the attention probabilities
  AttentionKind kind = AttentionKind::Softmax;  // its plan rule and core (nn/attention_kind.h)
  AttentionImpl impl = AttentionImpl::Auto;
  // Self-attention with RoPE: the flash core rotates q and k (and dq, dk back)
  // where the plan says it can (the CPU twin, the tensor-core kernel), the
  // head split only splits; elsewhere the split rotates as usual.
  bool rope_in_kernel = false;
  LinearKindOptions linear;  // kind linear's settings (nn/attention_plan.h)
  // Grouped-query attention (Ainslie et al. 2023; model.kv_heads): kv_heads
  // key and value heads, query head h reading kv head h / (n_heads /
  // kv_heads), as Hugging Face's repeat_kv. The k and v projections store
  // kv_heads * D rows each, and the layer computes them as n_heads heads whose
  // rows are shared (Linear::share_rows): the parameters and checkpoints are
  // GQA's, the compute, the activations and the decoding cache those of
  // multi-head attention. 0: n_heads (no grouping).
  int64_t kv_heads = 0;
  bool bias = true;  // the four projections have biases (model.bias)
  // nullopt: fairseq's init (Xavier-uniform; q, k, v with gain 1/sqrt(2)).
  // A value: every projection weight N(0, std) (BERT). Biases are zero.
  std::optional<double> normal_init_std;
};

// Packed documents (data.packing documents, data/lm.h): several documents
// share a batch row, and attention never crosses one's boundary. Self-
// attention regroups the projected tokens so that each document is a row of
// its own, N rows of at most L tokens with key lengths (every core takes
// those), runs the core there and puts the rows back: the core's output is
// exactly that of each document run alone, positions counting from 0 in each
// (RoPE, ALiBi, T5 and Transformer-XL's relative terms alike). Cross-
// attention regroups its queries by one layout and its keys by another
// (translation's target and source sides, data.packing documents: document n
// of each is one sentence pair). The maps are host-built once per batch
// (from_segments) and read by every layer.
// Where the plan says varlen (rotor's flash core, AttentionPlan::varlen) the
// documents are not regrouped but laid end to end, FlashAttention's
// cu_seqlens: the core reads each document's rows where they are, and no
// padding slot is computed.
struct DocLayout {
  int64_t B = 0, T = 0;  // the batch
  int64_t N = 0, L = 0;  // documents (runs of one segment id in a row) and the longest
  Tensor key_lengths;    // i32 [N] on the device: each document's tokens
  Tensor gather;         // i32 [N*L]: the batch row b*T + t of each slot (padding: the doc's first)
  Tensor gather_grad;    // i32 [N*L]: as gather, padding slots -> B*T (a zero row)
  Tensor scatter;        // i32 [B*T]: the slot n*L + t of each token (padding: N*L, a zero row)
  std::vector<int32_t> gather_host;  // gather, on the host (explicit positions' regrouping)
  std::vector<int32_t> positions;  // host [B*T]: each token's position in its document (padding: 0)
  // End to end: the stream of the documents' tokens in batch order (the
  // batch's rows themselves when nothing is padding: `in_place`).
  int64_t total = 0;      // the documents' tokens
  bool in_place = false;  // no padding: stream token s is batch row s (no gather, no scatter)
  Tensor cu_seqlens;      // i32 [N + 1] on the device: document n is stream tokens [cu[n], cu[n+1])
  Tensor stream_gather;   // i32 [total]: the batch row b*T + t of each stream token
  Tensor stream_scatter;  // i32 [B*T]: each token's stream slot (padding: total, a zero row)
  std::vector<int32_t> stream_gather_host;
  std::vector<int32_t> stream_positions;  // host [total]: each token's position in its document
  // segments: host [B*T], each token's document index in its row; every
  // maximal run of one value >= 0 is a document (padding, -1, is none: its
  // tokens attend nowhere and come out of attention as zeros).
  static DocLayout from_segments(const std::vector<int32_t>& segments, int64_t B, int64_t T,
                                 Device device);
};

// Parameter names of the four projections (Hugging Face conventions differ
// between BART/Marian and BERT/RoFormer).
struct AttentionNames {
  std::string q, k, v, out;
};

class MultiHeadAttention {
 public:
  MultiHeadAttention(ParameterStore& store, const AttentionNames& names,
                     const MultiHeadAttentionOptions& options, bool cross);

  // Self: x [B, T, d], memory unused, key_lengths i32 [B] of x (or undefined).
  // Cross: x [B, Tq, d], memory [B, Tk, d], key_lengths of memory.
  // Returns [B, Tq, d]. `positions` (self-attention with RoPE; host i32
  // [B*T], or null: token t at position t) are the positions q and k are
  // rotated at (BEHRT's visit positions); the rotation then stays in the
  // head split.
  // `docs` (no key_lengths): packed documents (DocLayout), which must
  // outlive the backward; explicit positions are then the batch tokens'
  // (each document's own, BEHRT's visits) and follow them. Cross-attention
  // with `docs` (the queries' documents) takes `memory_docs`, the memory's:
  // query document n attends to memory document n only (variable-length
  // translation, cu_seqlens on both sides).
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& key_lengths,
                 const Context& ctx, const std::vector<int32_t>* positions = nullptr,
                 const DocLayout* docs = nullptr, const DocLayout* memory_docs = nullptr);
  // Returns dx; for cross-attention adds the memory gradient into d_memory.
  Tensor backward(const Tensor& dy, Tensor* d_memory);

  // Incremental decoding. Self: cache k, v [B, H, Tmax, D] holding rotated
  // keys; the new query sits at `position`. Cross: k, v of the memory are
  // computed on the first step and reused.
  struct Cache {
    Tensor k, v;  // self: [B, H, Tmax, D]; cross: [B, H, S, D]
    int64_t length = 0;
  };
  Tensor step(const Tensor& x, const Tensor& memory, const Tensor& key_lengths, Cache& cache,
              int64_t position, int64_t max_length, const Context& ctx);

  // Incremental decoding of a decoder-only model's causal self-attention, one
  // position per row (models/decoder_lm.h). prefill: the prompts x [B, T, d],
  // right padded, each row at positions 0..T-1, attend as in forward (nothing
  // is kept for a backward); their keys, rotated at their positions, and
  // values fill slots 0..T-1 of a new cache of max_length >= T slots.
  // Returns [B, T, d].
  Tensor prefill(const Tensor& x, Cache& cache, int64_t max_length, const Context& ctx);
  // x [B, 1, d]: row b's new token at positions[b] (its own sequence's
  // position, below the cache's slots). Its key is rotated once, there, and
  // cached at slot positions[b]; its query attends to slots 0..positions[b],
  // so whatever a row's slots beyond hold (a shorter prompt's padding) is
  // never seen before it is overwritten. Returns [B, 1, d].
  Tensor step_rows(const Tensor& x, Cache& cache, const std::vector<int64_t>& positions,
                   const Context& ctx);

  // Drops what forward saved for the backward (activation checkpointing);
  // a forward with the same inputs and Context saves it again, bit for bit.
  void release();

  const MultiHeadAttentionOptions& options() const { return options_; }

 private:
  // T5's prepared rows and their reach (undefined and 0 without the bias).
  Tensor rel_rows() const {
    return options_.relative_bias ? options_.relative_bias->rows() : Tensor();
  }
  int64_t rel_max() const {
    return options_.relative_bias ? options_.relative_bias->max_distance() : 0;
  }
  // The head split's options; RoPE on q and k of a self-attention where the
  // plan puts it in the split.
  // q is scaled by 1/sqrt(D) where the plan says (split_scales_q).
  ops::SplitHeadsOptions split_options(bool self_qkv, int64_t offset,
                                       RopePlacement rope = RopePlacement::HeadSplit,
                                       bool scale_q = true) const;
  // The explicit positions of the last forward (empty: none), for backward.
  std::vector<int32_t> positions_;
  // The plan of this call (nn/attention_plan.h), asked once per case; its
  // why is logged once per process.
  const AttentionPlan& plan_for(const AttentionCase& c, const Device& device);

  MultiHeadAttentionOptions options_;
  bool cross_;
  int64_t head_dim_;
  uint32_t layer_id_;
  std::unique_ptr<Linear> qkv_;  // self: [3d, d]
  std::unique_ptr<Linear> q_;    // cross: [d, d]
  std::unique_ptr<Linear> kv_;   // cross: [2d, d]
  std::unique_ptr<Linear> out_;
  // Transformer-XL's terms (options xl, self-attention): W_R, u and v.
  std::unique_ptr<Linear> r_proj_;
  Parameter *xl_u_ = nullptr, *xl_v_ = nullptr;
  // The terms as the core's dense bias for queries at q_offset + i against
  // keys 0..Tk-1 (ops::xl_bias_forward), with the projected distances it
  // read; training saves r for the backward.
  Tensor xl_bias(const Tensor& q, const Tensor& k, int64_t q_offset, const Context& ctx,
                 bool training, Tensor* r_out);
  // The decoding step's attention under Transformer-XL's terms: q [B, H, 1,
  // D] at `position` against the cache's first position + 1 keys -> o.
  void xl_step(const Tensor& q, const Cache& cache, int64_t position, Tensor& o,
               const Context& ctx);
  // DeBERTa's projected relative embeddings of the last forward, [S, d]
  // each (saved for the backward).
  Tensor deberta_qr_, deberta_kr_;  // [S, d] each
  Tensor xl_r_;  // saved: the projected distances [2 Tk - 1, d] of the last forward
  // Saved for backward.
  Tensor q_h_, k_h_, v_h_;     // [B, H, Tq|Tk, D]
  std::vector<Tensor> saved_;  // what the planned core keeps (nn/attention_kind.h)
  AttentionPlan plan_;         // of the last forward: the core the saved tensors belong to
  ops::AttentionOptions attn_options_;
  std::map<AttentionCase, AttentionPlan> plans_;
  // The random-feature draw of the last training forward, which evaluation
  // keeps using (frozen); -1: none yet in this process (then ctx.update's).
  int64_t trained_draw_ = -1;
  int64_t B_ = 0, Tq_ = 0, Tk_ = 0;
  // The core's batch, query and key length (packed: N, L; end to end: 1, total).
  int64_t Bc_ = 0, Tc_ = 0, Tkc_ = 0;
  bool varlen_ = false;                     // the plan's: packed documents end to end
  const DocLayout* docs_ = nullptr;         // the forward's packed documents
  const DocLayout* memory_docs_ = nullptr;  // cross-attention's: the memory's
};

}  // namespace rotor::nn
