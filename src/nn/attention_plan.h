// The attention plan: the one place that decides how an attention call runs
// (docs/design.md, The attention plan). From the attention kind, the layer's
// options, the device's facts (ops/attention_device.h), the dtype and the
// shapes the kind's plan rule (nn/attention_kind.h) picks
//   - the core: the materialized reference, rotor's flash core or cuDNN's SDPA,
//   - the kernel of rotor's flash core on a GPU: tensor-core, Volta or portable,
//   - who rotates q and k under RoPE: the head split or the core itself,
// and says why in one line. A pure function of its inputs: the layers ask it
// once per configuration (nn/attention.cpp) and log the why once; the ops
// carry the plan out and never decide again. tests/cpu/test_attention_plan.cpp
// lists the plan for CPUs and made-up sm_70, sm_80 and sm_90 devices.
//
// Each attention kind (softmax, linear) is its own file with its plan rule
// and core (nn/attention_kind.h) and rows of that kind in that test; a
// position bias (ALiBi) is a field of AttentionCase that the rules of the
// kinds honor (choosing no core that cannot add it; linear attention
// refuses it) and rows in that test.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "core/dtype.h"
#include "nn/kinds.h"
#include "ops/attention_device.h"
#include "ops/linear_attention.h"

namespace rotor::nn {

// The implementation of a kind's core; the softmax kind's are the ops named
// here, another kind's rule picks among those it implements.
enum class AttentionCore {
  Reference,  // ops::attention_forward: materialized probabilities
  Rotor,      // ops::flash_attention_forward: rotor's fused core (CPU twin or a CUDA kernel)
  Cudnn,      // ops::cudnn_attention_forward: cuDNN's fused SDPA
  Linear,     // ops::linear_attention_forward: the linear kind's core (CPU only so far)
};
const char* attention_core_name(AttentionCore core);

// Who rotates q and k of a self-attention with RoPE (RoFormer eq. 34).
enum class RopePlacement {
  None,       // no rotation: other positions, or cross-attention
  HeadSplit,  // ops::split_heads_forward rotates as it splits (and rotates dq, dk back)
  Core,       // the core rotates q and k itself (flash: AttentionOptions::rope; linear: its op)
};
const char* rope_placement_name(RopePlacement placement);

// `auto` gives cuDNN sequences of at least this many keys. Below it rotor's
// kernel is the one that measured ahead of PyTorch's flash attention, and it
// needs no graph per shape, while translation batches bring a new (B, Tq, Tk)
// at almost every step. To be revisited with the cuDNN column of
// bench_attention (scripts/gpu/measure.sh).
constexpr int64_t kCudnnMinKeys = 128;

// The linear kind's settings (config keys attention.feature_map, features,
// feature_redraw, linear_rope, linear_eps); other kinds ignore them.
struct LinearKindOptions {
  ops::LinearFeatureMap feature_map = ops::LinearFeatureMap::Elu1;
  // FAVOR+ features M; 0: floor(D ln D), rounded down to even (at least 2)
  // where the features are rotated (RoPE after the feature map).
  int64_t features = 0;
  int64_t feature_redraw = 1000;  // training updates between FAVOR+ draws; 0: one draw
  // Where RoPE goes when the model rotates q and k; the plan's placement is
  // None without RoPE.
  ops::LinearRope rope = ops::LinearRope::AfterFeatureMap;
  float eps = 1e-6f;  // added to the denominator
  uint64_t seed = 0;  // the run's seed: FAVOR+ draws are (seed, draw, layer)

  auto key() const { return std::tuple(feature_map, features, feature_redraw, rope, eps, seed); }
  bool operator==(const LinearKindOptions& o) const { return key() == o.key(); }
};

// The feature count M of the linear kind for heads of dimension D, with
// `rope` the placement the plan uses (None when the model does not rotate):
// D for elu1 and relu; for favor `features`, or floor(D ln D) rounded down
// to even (at least 2) where the features are rotated.
int64_t linear_feature_count(const LinearKindOptions& l, int64_t head_dim, ops::LinearRope rope);

// Everything a plan depends on for one attention call.
struct AttentionCase {
  AttentionKind kind = AttentionKind::Softmax;  // whose plan rule and core
  AttentionImpl impl = AttentionImpl::Auto;     // attention.impl
  bool rope = false;            // q and k are rotated: self-attention under model.position rope
  bool rope_in_kernel = false;  // attention.rope_in_kernel: rotate inside the core where it can
  // model.rope rotates interleaved pairs over the whole head
  // (rope::interleaved_full), all that the tensor-core kernel can rotate.
  bool rope_interleaved_full = true;
  bool alibi = false;  // ALiBi's bias: only a core that computes it may run the case
  // T5's learned bias (model.position t5): only a core that adds it, and
  // sums its gradient, may run the case.
  bool rel_bias = false;
  int64_t rel_max = 0;  // its table's max_distance (the flash kernels hold up to a limit)
  // A dense bias the layer computes (model.position transformer_xl): only
  // the materialized core on the CPU adds it.
  bool score_bias = false;
  bool causal = false;
  bool key_padding = false;  // key lengths given
  // Packed documents (nn::DocLayout): the layout is the plan's to choose
  // (AttentionPlan::varlen).
  bool packed = false;
  bool dropout = false;  // attention dropout in this call (training)
  // A training forward (false: validation and inference, which rotor runs
  // in f32 under every precision; attention.impl cudnn then takes auto's core).
  bool training = true;
  DType dtype = DType::F32;
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  LinearKindOptions linear;  // kind linear's

  auto key() const {
    return std::tuple(kind, impl, rope, rope_in_kernel, rope_interleaved_full, alibi, rel_bias,
                      rel_max, score_bias, causal, key_padding, packed, dropout, training, dtype, B,
                      H, Tq, Tk, D, linear.key());
  }
  bool operator<(const AttentionCase& o) const { return key() < o.key(); }
  bool operator==(const AttentionCase& o) const { return key() == o.key(); }
};

struct AttentionPlan {
  AttentionKind kind = AttentionKind::Softmax;  // the case's: it runs the core
  AttentionCore core = AttentionCore::Reference;
  ops::FlashKernel kernel = ops::FlashKernel::Portable;  // of core Rotor on a GPU
  RopePlacement rope = RopePlacement::None;
  bool alibi = false;     // the core adds ALiBi's bias (only cores that can are chosen)
  bool rel_bias = false;  // the core adds T5's bias (likewise)
  bool on_gpu = false;
  // Packed documents laid end to end for the core (FlashAttention's
  // cu_seqlens, ops::AttentionOptions::cu_seqlens_q): rotor's flash core,
  // which reads each document's rows in place. Every other core takes them
  // regrouped, one document a row of the longest's length with key lengths
  // (nn::DocLayout).
  bool varlen = false;
  // The head split multiplies q by 1/sqrt(D) (softmax); the linear core
  // scales q and k itself (LinearAttentionOptions::qk_scale).
  bool split_scales_q = true;
  // Core Linear: the case's settings with M resolved and `rope` the op's
  // placement (None where the plan's is None).
  LinearKindOptions linear;
  // One line: why this core (and kernel), and where RoPE goes when asked to
  // go into the core but it cannot.
  std::string why;
  // "rotor (tc), RoPE in the core": what runs, for logs and tests (prefixed
  // "KIND: " for a kind other than softmax).
  std::string str() const;
};

// The plan of `c` on `device`: its kind's rule. For softmax, impl reference
// and auto always have one; impl rotor or cudnn on a device that cannot run
// the case is a rotor::Error naming attention.impl and the reason.
AttentionPlan plan_attention(const AttentionCase& c, const ops::AttentionDevice& device);

// Logs `line` at info level the first time this process sees it.
void log_once(const std::string& line);

}  // namespace rotor::nn
