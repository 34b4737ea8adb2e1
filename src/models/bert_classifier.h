// Sequence classification and regression on the BERT/RoFormer encoder
// (models/bert.h), Hugging Face BertForSequenceClassification /
// RoFormerForSequenceClassification layout, so that a fine-tuned model
// exports to, and imports from, those classes. Both read the final hidden
// state of [CLS] (position 0) and differ in the head:
//
//   BERT (positions learned, sinusoidal, none):
//     pooled = tanh(bert.pooler.dense(h_cls))          [B, d]
//     logits = classifier(dropout(pooled))             [B, C]
//   RoFormer (positions rope; Hugging Face RoFormerClassificationHead):
//     x      = act(classifier.dense(dropout(h_cls)))   act = the layers' GELU (gelu_new)
//     logits = classifier.out_proj(dropout(x))         [B, C]
//
// Multiple choice (choices = N, Hugging Face's *ForMultipleChoice): the
// batch holds N rows per example ([CLS] context [SEP] choice_i [SEP]), the
// head above gives each row one score (C = 1, shared by all choices), and
// the loss is the cross-entropy over each example's N scores, viewed as
// logits [B, N]. (BERT's is BertForMultipleChoice exactly; Hugging Face's
// RoFormerForMultipleChoice pools differently, so rotor keeps its
// RoFormer head.)
//
// Label attention (model.classifier_head: label_attention; CAML, Mullenbach
// et al. 2018, with BEHRT-style tanh): every output c reads the final states
// of its example's tokens through its own attention instead of the [CLS]
// state, so that C labels are not squeezed through one d-wide vector:
//   a_c    = softmax_t(h_t . u_c)       over the example's tokens ([CLS] included)
//   v_c    = tanh(sum_t a_c,t h_t)      [E, C, d]
//   logit_c = w_c . dropout(v_c) + b_c   [E, C]
// with u_c, w_c learned per output. The attention is the materialized core
// (ops/attention.h: q = the C queries, k = v = the example's states, key
// lengths for the padding), unscaled. No Hugging Face class holds it (the
// export is refused).
//
// Parameter names (after the encoder's):
//   bert.pooler.dense.{weight [d, d], bias [d]}, classifier.{weight [C, d], bias [C]}
//   classifier.dense.{weight [d, d], bias [d]}, classifier.out_proj.{weight [C, d], bias [C]}
//   label attention: classifier.label_queries [C, d], classifier.label_weight [C, d],
//   classifier.label_bias [C] (names of their own, so that model.init_from never loads
//   a [CLS] head's classifier.weight as them)
//
// The loss is Hugging Face's: cross-entropy over C classes, for regression
// (C = 1) the squared error, or for multi-label classification (C labels,
// each present or not: problem_type "multi_label_classification") binary
// cross-entropy on each logit, averaged over the C labels,
//   loss_b = 1/C sum_c [max(z, 0) - z y + log(1 + exp(-|z|))],  z = logit, y in {0, 1}
// (the stable form of -y log s(z) - (1 - y) log(1 - s(z))). It is summed over
// the batch here, and the trainer divides by the examples of the update (the
// mean, as Hugging Face: PyTorch's BCEWithLogitsLoss for multi-label).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/bert.h"

namespace rotor::models {

struct BertClassifierOptions {
  BertOptions encoder;
  int64_t num_labels = 2;   // C; 1 with regression
  bool regression = false;  // squared error on one output instead of cross-entropy
  bool multilabel = false;  // binary cross-entropy on each of C outputs
  float dropout = 0.1f;     // the head's dropout (Hugging Face: hidden_dropout_prob)
  int64_t choices = 0;      // N rows per example scored as one (num_labels 1), or 0
  // The initial value of the output bias (classifier.bias or
  // classifier.out_proj.bias), C values; empty: zeros. Task multilabel puts
  // the label log-odds here with model.classifier_bias: prior.
  std::vector<float> output_bias;
  // Label attention instead of the [CLS] head (model.classifier_head).
  bool label_attention = false;
  // The outputs per example: N choices, else the labels.
  int64_t outputs() const { return choices > 0 ? choices : num_labels; }
  // True for RoFormer's head (dense + activation), false for BERT's pooler.
  bool roformer_head() const {
    return !label_attention && encoder.position->hf.family == "roformer";
  }
};

// Whether parameter `name` of the classifier holds a row per label (the
// output layer: classifier.weight/bias, classifier.out_proj.weight/bias;
// label attention's three), which model.init_from reads by label name
// (checkpoint/label_rows.h).
bool has_label_rows(const std::string& name);

// One batch (tensors on the model's device).
struct ClassificationBatch {
  Tensor input_ids;       // i32 [R, T], right-padded with pad_id; R = B, or B * N rows of
                          // multiple choice
  Tensor token_type_ids;  // i32 [R, T], or undefined (segment 0)
  Tensor lengths;         // i32 [R]
  Tensor age_ids;         // i32 [B, T] (EHR), or undefined
  Tensor position_ids;    // i32 [B, T]: visit positions (EHR), or undefined
  Tensor labels;          // i32 [B] class indices, or undefined (no loss)
  Tensor targets;         // f32 [B] regression values, f32 [B, C] multi-label 0/1, or
                          // undefined (no loss)
  int64_t tokens = 0;     // non-pad tokens
  // Packed examples (data.packing documents; data/classification.h): each
  // token's example index in its row, host [R*T] (-1: padding), and each
  // example's [CLS] as a flat index r * T + t, host [B]; the labels and
  // targets are then the examples', B of them. Empty: one example a row.
  std::vector<int32_t> documents, cls_positions;
  ClassificationBatch to(Device device) const;
};

struct ClassificationSums {
  double loss = 0;           // summed over the examples (0 without labels)
  int64_t examples = 0;      // B when the batch has labels, else 0
  int64_t correct = 0;       // argmax == label (classification)
  bool has_correct = false;  // classification with labels
};

class BertForSequenceClassification {
 public:
  BertForSequenceClassification(const BertClassifierOptions& options, nn::ParameterStore& store);

  // Forward, and the loss when the batch has labels or targets; keeps what
  // backward needs. `logits`, when given, receives the host logits [B * C]
  // (multiple choice: the scores [B * N]).
  ClassificationSums forward_loss(const ClassificationBatch& batch, const nn::Context& ctx,
                                  std::vector<float>* logits = nullptr);
  // Backward of forward_loss: d(loss_sum * loss_scale); accumulates into the
  // store's gradients. The batch must have had labels or targets.
  void backward(float loss_scale);

  const BertClassifierOptions& options() const { return options_; }

 private:
  Tensor head_forward(const Tensor& h_cls, const nn::Context& ctx);  // [B, d] -> [B, C]
  Tensor head_backward(const Tensor& dlogits);                       // -> dh_cls [B, d]
  // Label attention: h [R, T, d], the examples' token rows -> logits [E, C];
  // its backward scatters into dh [R * T, d].
  Tensor label_attention_forward(const Tensor& h, const std::vector<std::vector<int32_t>>& rows,
                                 const nn::Context& ctx);
  void label_attention_backward(const Tensor& dlogits, Tensor& dh);

  BertClassifierOptions options_;
  nn::ParameterStore* store_;
  BertEncoder encoder_;
  std::unique_ptr<nn::Linear> pooler_, classifier_;  // BERT
  std::unique_ptr<nn::Linear> dense_, out_proj_;     // RoFormer
  std::unique_ptr<nn::Dropout> drop_, drop2_;        // before the (last) projection(s)
  nn::Parameter *label_queries_ = nullptr, *label_weight_ = nullptr, *label_bias_ = nullptr;
  nn::ParamRange head_range_;

  // Saved for backward.
  int64_t B_ = 0, T_ = 0;  // rows (B * N with choices) and their length
  int64_t E_ = 0;          // the [CLS] states read: B_, or the packed examples
  Tensor cls_rows_;        // i32 [E]: flat indices of the [CLS] states
  Tensor pooled_;          // BERT: the tanh output [B, d] (its derivative is 1 - y^2);
                           // label attention: v [E, C, d]
  // Label attention: the gathered token ids i32 [E * Tm], the examples'
  // lengths i32 [E], the output ids i32 [E * C] (c for each example), the
  // states [E, 1, Tm, d], the queries [E, 1, C, d], the probabilities
  // [E, 1, C, Tm], the weights w [E, C, d], dropout(v) [E, C, d] and d ones.
  Tensor la_tokens_, la_lengths_, la_outputs_, la_h_, la_q_, la_probs_, la_w_, la_v_, la_ones_;
  Tensor logits_, labels_, lse_;  // [B, C] (choices: [B, N]), i32 [B], f32 [B]
  std::vector<float> residuals_;  // regression: prediction - target [B]; multilabel:
                                  // (sigmoid - target) / C [B * C], d loss_b / d z
  nn::Context ctx_;
};

}  // namespace rotor::models
