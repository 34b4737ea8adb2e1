// model.position: learned -- a [max_positions, d] parameter table added to
// the token embeddings (BERT; fairseq's learned positions).
#include "nn/position.h"

namespace rotor::nn {

namespace {

std::optional<PositionProblem> check(const PositionShape& s) {
  return table_length_problem(s, "learned");
}

}  // namespace

extern const PositionScheme kLearnedPositions;
constinit const PositionScheme kLearnedPositions{
    .name = "learned",
    .learned_table = true,
    .hf = {.family = "bert",
           .model_type = "",
           .imports = "learned absolute positions",
           .export_note = "",
           .causal_lm = "gpt2",
           .no_export = ""},
    .check = check,
};

}  // namespace rotor::nn
