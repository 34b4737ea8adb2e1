// model.position: deberta -- DeBERTa's disentangled attention (He et al.
// 2021, with DeBERTa-v2's log buckets and shared projections): nothing is
// added to the embeddings and nothing rotates; every layer's score of query
// i and key j is
//   (q_i . k_j + q_i . K_r[row(i - j)] + k_j . Q_r[row(i - j)]) / sqrt(3 D)
// with K_r, Q_r the layer's own key and query projections of relative
// embeddings shared by the encoder's layers (nn/deberta.h) and row() the
// log-bucketed, clamped distance (core/deberta_bias.h; model.deberta's
// settings). Built for the BERT encoder; the terms reach the materialized
// core as a dense bias, on the CPU so far. Exports as (and initializes from)
// Hugging Face DebertaV2ForMaskedLM / ForSequenceClassification with
// relative_attention, share_att_key, pos_att_type p2c|c2p, norm_rel_ebd
// layer_norm and no position_biased_input.
#include "nn/position.h"

namespace rotor::nn {

extern const PositionScheme kDebertaPositions;
constinit const PositionScheme kDebertaPositions{
    .name = "deberta",
    .disentangled = true,
    .bert_encoder_only = true,
    .hf = {.family = "bert",
           .model_type = "deberta-v2",
           .imports = "DeBERTa-v2's disentangled attention",
           .export_note = "",
           .causal_lm = "",
           .no_export = ""},
};

}  // namespace rotor::nn
