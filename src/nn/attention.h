// Multi-head attention as docs/design.md, "The attention block", lays it out:
//   fused QKV projection (one GEMM, bias in its epilogue)
//   -> split heads with RoPE on q and k and the 1/sqrt(d) scale on q
//   -> attention core (masks, dropout)
//   -> merge heads -> output projection.
// Cross-attention projects q from the decoder and k, v from the encoder
// output, and never rotates.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "nn/attention_core.h"
#include "nn/kinds.h"
#include "nn/layers.h"
#include "nn/linear.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "ops/heads.h"

namespace rotor::nn {

struct AttentionConfig {
  int64_t d_model = 512;
  int64_t n_heads = 8;
  bool causal = false;
  bool rope = false;
  float rope_base = 10000.0f;
  float dropout = 0.0f;  // on the attention probabilities
  AttentionImpl impl = AttentionImpl::Auto;
  // Self-attention with RoPE: the flash core rotates q and k (and dq, dk back)
  // where it can (the CPU twin, the tensor-core kernel), the head split only
  // splits; elsewhere the split rotates as usual.
  bool rope_in_kernel = false;
  // nullopt: fairseq's init (Xavier-uniform; q, k, v with gain 1/sqrt(2)).
  // A value: every projection weight N(0, std) (BERT). Biases are zero.
  std::optional<double> normal_init_std;
};

// Parameter names of the four projections (Hugging Face conventions differ
// between BART/Marian and BERT/RoFormer).
struct AttentionNames {
  std::string q, k, v, out;
};

class MultiHeadAttention {
 public:
  MultiHeadAttention(ParameterStore& store, const AttentionNames& names,
                     const AttentionConfig& config, bool cross);

  // Self: x [B, T, d], memory unused, key_lengths i32 [B] of x (or undefined).
  // Cross: x [B, Tq, d], memory [B, Tk, d], key_lengths of memory.
  // Returns [B, Tq, d].
  Tensor forward(const Tensor& x, const Tensor& memory, const Tensor& key_lengths,
                 const Context& ctx);
  // Returns dx; for cross-attention adds the memory gradient into d_memory.
  Tensor backward(const Tensor& dy, Tensor* d_memory);

  // Incremental decoding. Self: cache k, v [B, H, Tmax, D] holding rotated
  // keys; the new query sits at `position`. Cross: k, v of the memory are
  // computed on the first step and reused.
  struct Cache {
    Tensor k, v;
    int64_t length = 0;
  };
  Tensor step(const Tensor& x, const Tensor& memory, const Tensor& key_lengths, Cache& cache,
              int64_t position, int64_t max_length, const Context& ctx);

  const AttentionConfig& config() const { return config_; }

 private:
  // The head split's options; RoPE on q and k of a self-attention unless the
  // core rotates them (core_rotates).
  ops::SplitHeadsOptions split_options(bool self_qkv, int64_t offset,
                                       bool core_rotates = false) const;
  // The core of this call (nn/attention_core.h: the device, head dim and
  // sequence length choose for Auto); `options` are the core's options.
  AttentionCore choose_core(const Tensor& q, const Tensor& k,
                            const ops::AttentionOptions& options) const;
  // Whether this call's core (core_, attn_options_ set) rotates q and k itself
  // (attention.rope_in_kernel); logs once why not where asked for.
  bool rope_in_core(const Tensor& q) const;

  AttentionConfig config_;
  bool cross_;
  int64_t head_dim_;
  uint32_t layer_id_;
  std::unique_ptr<Linear> qkv_;  // self: [3d, d]
  std::unique_ptr<Linear> q_;    // cross: [d, d]
  std::unique_ptr<Linear> kv_;   // cross: [2d, d]
  std::unique_ptr<Linear> out_;
  // Saved for backward.
  Tensor q_h_, k_h_, v_h_, probs_;  // [B, H, Tq|Tk, D], probs [B, H, Tq, Tk] (reference core)
  Tensor o_h_, lse_;                // flash and cuDNN cores: out [B, H, Tq, D], lse f32 [B, H, Tq]
  AttentionCore core_ = AttentionCore::Reference;  // the core the saved tensors belong to
  bool rope_in_core_ = false;  // this call's RoPE is the core's, not the head split's
  ops::AttentionOptions attn_options_;
  int64_t B_ = 0, Tq_ = 0, Tk_ = 0;
};

}  // namespace rotor::nn
