// model.position: learned -- a [max_positions, d] parameter table added to
// the token embeddings (BERT; fairseq's learned positions).
#include <fmt/format.h>

#include "nn/position.h"

namespace rotor::nn {

namespace {

// The table has model.max_positions rows: a longer sequence has no position.
std::optional<PositionProblem> check(const PositionShape& s) {
  if (s.max_length <= s.max_positions) return std::nullopt;
  return PositionProblem{std::string(s.length_key),
                         fmt::format("{} exceeds model.max_positions = {} (learned positions)",
                                     s.max_length, s.max_positions),
                         {"model.max_positions", "model.position"}};
}

}  // namespace

extern const PositionScheme kLearnedPositions;
constinit const PositionScheme kLearnedPositions{
    .name = "learned",
    .learned_table = true,
    .hf = {.family = "bert", .imports = "learned absolute positions", .export_note = ""},
    .check = check,
};

}  // namespace rotor::nn
