// model.position: none -- no position information at all (a bag of tokens
// to the encoder; the decoder's causal mask still orders its own).
#include "nn/position.h"

namespace rotor::nn {

extern const PositionScheme kNonePositions;
constinit const PositionScheme kNonePositions{
    .name = "none",
    .hf = {.family = "bert",
           .model_type = "",
           .imports = "",
           .export_note = "position none exported as a zero position_embeddings table",
           .causal_lm = "",
           .no_export = ""},
};

}  // namespace rotor::nn
