// model.position: tupe -- TUPE's untied positional encoding (Ke, He & Liu
// 2021): the positions leave the token embeddings; every layer adds a
// positional correlation of its own projections of a learned table, with the
// content term scaled alike by 1/sqrt(2 D), and [CLS] untied from the
// positions (nn/tupe.h). model.tupe.relative adds T5's bucketed bias
// (TUPE-R; model.t5's settings); left false, the model is TUPE-A. It is built
// for the BERT encoder, whose first token is [CLS]; its correlation reaches
// the materialized core as a dense bias, on the CPU so far.
#include "nn/position.h"

namespace rotor::nn {

namespace {

std::optional<PositionProblem> check(const PositionShape& s) {
  return table_length_problem(s, "tupe");
}

}  // namespace

extern const PositionScheme kTupePositions;
constinit const PositionScheme kTupePositions{
    .name = "tupe",
    .untied_correlation = true,
    .bert_encoder_only = true,
    .hf = {.family = "bert",
           .model_type = "",
           .imports = "",
           .export_note = "",
           .causal_lm = "",
           .no_export = "Hugging Face BERT, RoFormer, GPT-NeoX and GPT-2 have no TUPE attention"},
    .check = check,
};

}  // namespace rotor::nn
