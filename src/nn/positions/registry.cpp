// The registered position encodings (nn/position.h). A new encoding is its
// file in this folder, defining `const PositionScheme kNamePositions`, and
// its entry in the list below (with its declaration beside the others).
#include <fmt/format.h>

#include "nn/position.h"

namespace rotor::nn {

extern const PositionScheme kSinusoidalPositions, kLearnedPositions, kRopePositions, kNonePositions,
    kAlibiPositions, kT5Positions, kTransformerXlPositions, kTupePositions, kDebertaPositions;

namespace {

// In the order model.position's error lists them.
constinit const PositionKind kRegistered[] = {
    PositionKind(&kSinusoidalPositions),    PositionKind(&kLearnedPositions),
    PositionKind(&kRopePositions),          PositionKind(&kNonePositions),
    PositionKind(&kAlibiPositions),         PositionKind(&kT5Positions),
    PositionKind(&kTransformerXlPositions), PositionKind(&kTupePositions),
    PositionKind(&kDebertaPositions),
};

}  // namespace

constinit const PositionKind PositionKind::Sinusoidal(&kSinusoidalPositions);
constinit const PositionKind PositionKind::Learned(&kLearnedPositions);
constinit const PositionKind PositionKind::Rope(&kRopePositions);
constinit const PositionKind PositionKind::None(&kNonePositions);

std::string_view PositionKind::name() const {
  return scheme_->name;
}

std::span<const PositionKind> position_kinds() {
  return kRegistered;
}

std::optional<PositionKind> position_kind(std::string_view name) {
  for (PositionKind k : kRegistered)
    if (k->name == name) return k;
  return std::nullopt;
}

std::optional<PositionProblem> table_length_problem(const PositionShape& s, std::string_view name) {
  if (s.max_length + s.added_tokens <= s.max_positions) return std::nullopt;
  return PositionProblem{
      std::string(s.length_key),
      fmt::format("{}{} exceeds model.max_positions = {} ({} positions)", s.max_length,
                  s.added_tokens ? " tokens + eos" : "", s.max_positions, name),
      {"model.max_positions", "model.position"}};
}

}  // namespace rotor::nn
