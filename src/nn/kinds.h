// The kinds a layer is configured with. Their YAML spellings (the config
// keys model.position and attention.impl) live with the rest of the user
// contract in config/config.h.
#pragma once

namespace rotor::nn {

// How a model knows token positions: added to the embeddings (Sinusoidal,
// Learned), rotated into queries and keys inside self-attention (Rope), or
// not at all (None).
enum class PositionKind { Sinusoidal, Learned, Rope, None };

// Whether the kind adds rows of a [max_positions, d] table, which bounds a
// sequence's length (RoPE and none have no such bound).
constexpr bool has_position_table(PositionKind k) {
  return k == PositionKind::Sinusoidal || k == PositionKind::Learned;
}

// Which attention core a layer runs.
//   Reference: ops::attention_forward/backward, saves the [Tq, Tk] probabilities.
//   Rotor:     ops::flash_attention_forward/backward, saves out and the lse.
//   Cudnn:     ops::cudnn_attention_forward/backward (cuDNN's fused SDPA), saves out and the lse.
//   Auto:      per device and case (nn/attention_plan.h, plan_attention).
enum class AttentionImpl { Auto, Rotor, Cudnn, Reference };

}  // namespace rotor::nn
