// model.position: sinusoidal -- a fixed table added to the token embeddings,
// [sin(p f_i) | cos(p f_i)] with f_i = 10000^(-i/(d/2-1)) as in
// fairseq/tensor2tensor.
#include <algorithm>
#include <cmath>

#include "nn/position.h"

namespace rotor::nn {

namespace {

Tensor sinusoid(int64_t max_positions, int64_t dim) {
  const int64_t half = dim / 2;
  std::vector<float> table(static_cast<size_t>(max_positions * dim), 0.0f);
  const double step = std::log(10000.0) / static_cast<double>(std::max<int64_t>(half - 1, 1));
  for (int64_t p = 0; p < max_positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(p) * std::exp(-step * static_cast<double>(i));
      table[p * dim + i] = static_cast<float>(std::sin(angle));
      table[p * dim + half + i] = static_cast<float>(std::cos(angle));
    }
  return Tensor::from_floats(table, {max_positions, dim});
}

std::optional<PositionProblem> check(const PositionShape& s) {
  return table_length_problem(s, "sinusoidal");
}

}  // namespace

extern const PositionScheme kSinusoidalPositions;
constinit const PositionScheme kSinusoidalPositions{
    .name = "sinusoidal",
    .fixed_table = sinusoid,
    .hf = {.family = "bert",
           .model_type = "",
           .imports = "",
           .export_note = "sinusoidal positions exported as a fixed position_embeddings table",
           .causal_lm = "",
           .no_export = ""},
    .check = check,
};

}  // namespace rotor::nn
