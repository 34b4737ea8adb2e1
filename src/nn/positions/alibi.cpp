// model.position: alibi -- attention with linear biases (Press, Smith & Lewis
// 2022): nothing is added to the embeddings and nothing rotates; each head of
// self-attention adds -slope_h * (i - j) to its causal scores (decoder-only LM,
// translation decoder) or -slope_h * |i - j| to an encoder's, with the paper's
// geometric slopes (core/alibi.h). The cores compute the bias themselves
// (ops::AttentionOptions::alibi): the attention plan chooses only cores that
// can, and attention.kind linear cannot. Cross-attention adds none.
#include "nn/position.h"

namespace rotor::nn {

extern const PositionScheme kAlibiPositions;
constinit const PositionScheme kAlibiPositions{
    .name = "alibi",
    .alibi = true,
    .hf = {.family = "bert",
           .model_type = "",
           .imports = "",
           .export_note = "",
           .causal_lm = "",
           .no_export = "Hugging Face BERT, RoFormer, GPT-NeoX and GPT-2 have no ALiBi attention"},
};

}  // namespace rotor::nn
