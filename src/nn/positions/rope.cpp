// model.position: rope -- rotary position embedding (RoFormer): nothing is
// added to the embeddings; self-attention rotates q and k by their positions
// (model.rope: theta, fraction, layout, scaling), in the head split or inside the core as the
// attention plan says (nn/attention_plan.h).
#include <fmt/format.h>

#include "nn/position.h"

namespace rotor::nn {

namespace {

std::optional<PositionProblem> check(const PositionShape& s) {
  const int64_t head = s.d_model / s.n_heads;
  if (head % 2 == 0) return std::nullopt;
  return PositionProblem{"model.position",
                         fmt::format("rope rotates pairs of features and needs an even head size, "
                                     "but d_model / n_heads = {} / {} = {}",
                                     s.d_model, s.n_heads, head),
                         {"model.d_model", "model.n_heads"}};
}

}  // namespace

extern const PositionScheme kRopePositions;
constinit const PositionScheme kRopePositions{
    .name = "rope",
    .rotates_qk = true,
    .hf = {.family = "roformer",
           .model_type = "",
           .imports = "rotary positions",
           .export_note = "",
           .causal_lm = "gpt_neox",
           .no_export = ""},
    .check = check,
};

}  // namespace rotor::nn
