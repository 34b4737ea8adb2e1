// model.position: t5 -- T5's relative position bias (Raffel et al. 2020,
// section 2.1): nothing is added to the embeddings and nothing rotates; each
// head of self-attention adds a learned scalar per bucket of the relative
// position (key - query), log-spaced beyond half the buckets and shared from
// model.t5.max_distance on (core/t5_bias.h). The table is one per stack of
// layers, shared by its layers (nn/relative_bias.h): bidirectional in
// encoders, causal in decoders. The cores add it themselves
// (ops::AttentionOptions::rel_bias): the attention plan chooses only cores
// that can, and attention.kind linear cannot. Cross-attention adds none.
#include "nn/position.h"

namespace rotor::nn {

extern const PositionScheme kT5Positions;
constinit const PositionScheme kT5Positions{
    .name = "t5",
    .relative_bias = true,
    .hf = {.family = "bert",
           .model_type = "",
           .imports = "",
           .export_note = "",
           .causal_lm = "",
           .no_export = "Hugging Face BERT, RoFormer, GPT-NeoX and GPT-2 have no T5 relative bias"},
};

}  // namespace rotor::nn
