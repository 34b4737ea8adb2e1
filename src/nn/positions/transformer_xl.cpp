// model.position: transformer_xl -- Transformer-XL's relative positions (Dai
// et al. 2019, section 3.3, eq. 4): nothing is added to the embeddings and
// nothing rotates; the score of query i and key j is
//   q_i . k_j + q_i . W_R R(i - j) + u . k_j + v . W_R R(i - j)
// (all scaled by 1/sqrt(D)), R the sinusoids of the signed distance, W_R a
// projection of each layer, u and v learned per head and layer. Segment
// recurrence (the memory of earlier segments) is not part of it. Each
// self-attention computes the three position terms as a dense bias of its
// scores (ops/xl_bias.h), which the materialized core adds on the CPU;
// cross-attention adds none.
#include "nn/position.h"

namespace rotor::nn {

extern const PositionScheme kTransformerXlPositions;
constinit const PositionScheme kTransformerXlPositions{
    .name = "transformer_xl",
    .xl_terms = true,
    .hf = {.family = "bert",
           .model_type = "",
           .imports = "",
           .export_note = "",
           .causal_lm = "",
           .no_export = "Hugging Face BERT, RoFormer, GPT-NeoX and GPT-2 have no Transformer-XL "
                        "relative attention"},
};

}  // namespace rotor::nn
