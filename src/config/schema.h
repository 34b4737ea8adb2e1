// The config schema: every key once, with its type and range, for loading
// (config/loader.cpp) and dumping (config/dump.cpp) alike. A new key is one
// line here, a field in config/config.h and an entry in
// tests/cpu/test_config_audit.cpp.
#pragma once

#include <cstdint>
#include <limits>

#include "config/config.h"

namespace rotor::config_detail {

struct IntRange {
  int64_t min;
  const char* what;
  int64_t max = std::numeric_limits<int64_t>::max();
};
struct FloatRange {
  double lo, hi;
  bool lo_open, hi_open;
  const char* what;
  bool contains(double x) const {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr IntRange kNonNegative{0, "an integer >= 0"};
constexpr IntRange kPositive{1, "a positive integer"};
constexpr IntRange kPositions{2, "an integer >= 2 (a sequence takes at least 2 positions)"};
constexpr FloatRange kPositiveF{0, kInf, true, true, "a number > 0"};
constexpr FloatRange kNonNegativeF{0, kInf, false, true, "a number >= 0"};
constexpr FloatRange kUnit{0, 1, false, false, "a number in [0, 1]"};
constexpr FloatRange kUnitOpenTop{0, 1, false, true, "a number in [0, 1)"};
constexpr FloatRange kUnitOpenBottom{0, 1, true, false, "a number in (0, 1]"};
constexpr FloatRange kAtLeastOne{1, kInf, false, true, "a number >= 1"};
// The decode keys take what `rotor translate` takes on its command line.
constexpr IntRange kT5Buckets{4, "an integer from 4 to 1024", 1024};
constexpr IntRange kT5MaxDistance{2, "an integer from 2 to 65536", 65536};
constexpr IntRange kDebertaBuckets{0, "an integer from 0 to 4096", 4096};
constexpr IntRange kDebertaReach{1, "an integer from 1 to 65536", 65536};
constexpr IntRange kBeam{1, "an integer from 1 to 1024", 1024};
constexpr IntRange kMaxLenB{0, "an integer from 0 to 1000000", 1'000'000};
constexpr FloatRange kLenpen{-10, 10, false, false, "a number from -10 to 10"};
constexpr FloatRange kMaxLenA{0, 1000, false, false, "a number from 0 to 1000"};

// V is a Loader (C = Config) or a Dumper (C = const Config).
template <class C, class V>
void visit_config(C& c, V& v) {
  v.enumeration("task", c.task);
  v.string("output_dir", c.output_dir);
  v.integer("seed", c.seed, kNonNegative);
  v.device("device", c.device);
  v.enumeration("precision", c.precision);
  v.enumeration("log_level", c.log_level);
  v.section("model", [&] {
    auto& m = c.model;
    v.integer("encoder_layers", m.encoder_layers, kNonNegative);
    v.integer("decoder_layers", m.decoder_layers, kNonNegative);
    v.integer("d_model", m.d_model, kPositive);
    v.integer("n_heads", m.n_heads, kPositive);
    v.integer("d_ff", m.d_ff, kPositive);
    v.enumeration("activation", m.activation);
    v.boolean("gated_ffn", m.gated_ffn);
    v.boolean("bias", m.bias);
    v.integer("kv_heads", m.kv_heads, kNonNegative);
    v.floating("dropout", m.dropout, kUnitOpenTop);
    v.floating("attention_dropout", m.attention_dropout, kUnitOpenTop);
    v.floating("activation_dropout", m.activation_dropout, kUnitOpenTop);
    v.enumeration("norm", m.norm);
    v.enumeration("norm_type", m.norm_type);
    v.floating("layer_norm_eps", m.layer_norm_eps, kPositiveF);
    v.enumeration("position", m.position);
    v.section("rope", [&] {
      v.floating("theta", m.rope.theta, kPositiveF);
      v.floating("fraction", m.rope.fraction, kUnitOpenBottom);
      v.enumeration("layout", m.rope.layout);
      v.enumeration("scaling", m.rope.scaling);
      v.floating("factor", m.rope.factor, kAtLeastOne);
      v.integer("original_max_positions", m.rope.original_max_positions, kNonNegative);
      v.floating("low_freq_factor", m.rope.low_freq_factor, kPositiveF);
      v.floating("high_freq_factor", m.rope.high_freq_factor, kPositiveF);
    });
    v.section("tupe", [&] { v.boolean("relative", m.tupe.relative); });
    v.section("deberta", [&] {
      v.integer("position_buckets", m.deberta.position_buckets, kDebertaBuckets);
      v.integer("max_relative_positions", m.deberta.max_relative_positions, kDebertaReach);
    });
    v.section("t5", [&] {
      v.integer("buckets", m.t5.buckets, kT5Buckets);
      v.integer("max_distance", m.t5.max_distance, kT5MaxDistance);
    });
    // Read (never dumped): the old spelling of model.rope.theta.
    v.deprecated_floating("rope_base", "model.rope.theta", m.rope.theta, kPositiveF);
    v.integer("max_positions", m.max_positions, kPositions);
    v.boolean("share_embeddings", m.share_embeddings);
    v.boolean("scale_embeddings", m.scale_embeddings);
    v.integer("type_vocab_size", m.type_vocab_size, kNonNegative);
    v.integer("age_vocab_size", m.age_vocab_size, kNonNegative);
    v.enumeration("age_embedding", m.age_embedding);
    v.integer("time2vec_dim", m.time2vec_dim, kPositive);
    v.enumeration("position_source", m.position_source);
    v.floating("init_std", m.init_std, kPositiveF);
    v.enumeration("classifier_bias", m.classifier_bias);
    v.enumeration("classifier_head", m.classifier_head);
    v.string("init_from", m.init_from);
  });
  v.section("attention", [&] {
    v.enumeration("impl", c.attention.impl);
    v.boolean("rope_in_kernel", c.attention.rope_in_kernel);
    v.enumeration("kind", c.attention.kind);
    v.enumeration("feature_map", c.attention.feature_map);
    v.integer("features", c.attention.features, kNonNegative);
    v.integer("feature_redraw", c.attention.feature_redraw, kNonNegative);
    v.enumeration("linear_rope", c.attention.linear_rope);
    v.floating("linear_eps", c.attention.linear_eps, kPositiveF);
  });
  v.section("data", [&] {
    auto& d = c.data;
    v.string("src_lang", d.src_lang);
    v.string("tgt_lang", d.tgt_lang);
    v.string("train", d.train);
    v.string("valid", d.valid);
    v.string("test", d.test);
    v.enumeration("tokenizer", d.tokenizer);
    v.string("spm_model", d.spm_model);
    v.enumeration("format", d.format);
    v.integer("vocab_size", d.vocab_size, kPositive);
    v.enumeration("spm_model_type", d.spm_model_type);
    v.floating("character_coverage", d.character_coverage, kUnitOpenBottom);
    v.integer("max_len", d.max_len, kPositive);
    v.floating("max_len_ratio", d.max_len_ratio, kPositiveF);
    v.integer("max_tokens", d.max_tokens, kPositive);
    v.integer("seq_len", d.seq_len, kPositive);
    v.enumeration("packing", d.packing);
    v.enumeration("document_separator", d.document_separator);
    v.floating("mask_prob", d.mask_prob, kUnit);
    v.floating("mask_token_prob", d.mask_token_prob, kUnit);
    v.floating("random_token_prob", d.random_token_prob, kUnit);
    v.boolean("random_token_special", d.random_token_special);
    v.integer("prefetch", d.prefetch, kNonNegative);
    v.string("sentence1_column", d.sentence1_column);
    v.string("sentence2_column", d.sentence2_column);
    v.string("label_column", d.label_column);
    v.boolean("header", d.header);
    v.string_list("labels", d.labels);
    v.boolean("regression", d.regression);
    v.string("label_separator", d.label_separator);
    v.integer("choices", d.choices, kNonNegative);
  });
  v.section("train", [&] {
    auto& t = c.train;
    v.integer("max_updates", t.max_updates, kPositive);
    v.integer("max_epochs", t.max_epochs, kNonNegative);
    v.integer("batch_size", t.batch_size, kPositive);
    v.integer("update_freq", t.update_freq, kPositive);
    v.floating("clip_norm", t.clip_norm, kNonNegativeF);
    v.floating("label_smoothing", t.label_smoothing, kUnitOpenTop);
    v.integer("log_interval", t.log_interval, kPositive);
    v.integer("valid_interval", t.valid_interval, kNonNegative);
    v.integer("save_interval", t.save_interval, kNonNegative);
    v.integer("keep_last", t.keep_last, kPositive);
    v.integer("patience", t.patience, kNonNegative);
    v.enum_list("valid_metrics", t.valid_metrics);
    v.integer("valid_max_sentences", t.valid_max_sentences, kNonNegative);
    v.enumeration("best_metric", t.best_metric);
    v.floating("loss_scale", t.loss_scale, kPositiveF);
    v.integer("scale_window", t.scale_window, kPositive);
    v.integer("max_nonfinite", t.max_nonfinite, kPositive);
    v.boolean("checkpoint_activations", t.checkpoint_activations);
  });
  v.section("optim", [&] {
    auto& o = c.optim;
    v.enumeration("name", o.name);
    v.floating("lr", o.lr, kPositiveF);
    v.float_pair("betas", o.betas, kUnitOpenTop);
    v.floating("eps", o.eps, kPositiveF);
    v.floating("weight_decay", o.weight_decay, kNonNegativeF);
    v.enumeration("schedule", o.schedule);
    v.integer("warmup_updates", o.warmup_updates, kNonNegative);
    v.floating("warmup_init_lr", o.warmup_init_lr, kNonNegativeF);
    v.floating("end_lr", o.end_lr, kNonNegativeF);
  });
  v.section("decode", [&] {
    auto& d = c.decode;
    v.integer("beam", d.beam, kBeam);
    v.floating("lenpen", d.lenpen, kLenpen);
    v.floating("max_len_a", d.max_len_a, kMaxLenA);
    v.integer("max_len_b", d.max_len_b, kMaxLenB);
  });
  v.section("dist", [&] {
    auto& d = c.dist;
    v.floating("bucket_mb", d.bucket_mb, kPositiveF);
    v.boolean("shard_optimizer", d.shard_optimizer);
    v.floating("timeout_s", d.timeout_s, kPositiveF);
    v.string("rendezvous", d.rendezvous);  // its form is checked with the other rules
  });
}

}  // namespace rotor::config_detail
