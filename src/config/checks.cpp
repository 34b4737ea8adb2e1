// The rules that involve more than one key or the task, checked at load
// (docs/design.md, "Config"): before `rotor train` touches its run directory
// and under --dump-config. Each task's own rules and metrics are its row
// (src/tasks/NAME/spec.cpp, config/tasks.h TaskSpec).
#include <algorithm>
#include <string_view>
#include <tuple>

#include "config/tasks.h"
#include "core/error.h"
#include "core/io.h"
#include "core/t5_bias.h"
#include "nn/attention_kind.h"
#include "nn/position.h"
#include "ops/linear_attention.h"

namespace rotor {
namespace {

// model.rope's keys: set only under a rotating position encoding, each one
// doing something, and a whole even number of rotated dimensions.
std::optional<ConfigProblem> rope_problem(const ModelConfig& m) {
  const rope::Params& r = m.rope;
  const rope::Params defaults;
  if (!m.position->rotates_qk) {
    const std::pair<bool, const char*> keys[] = {
        {r.theta != defaults.theta, "model.rope.theta"},
        {r.fraction != defaults.fraction, "model.rope.fraction"},
        {r.layout != defaults.layout, "model.rope.layout"},
        {r.scaling != defaults.scaling, "model.rope.scaling"},
        {r.factor != defaults.factor, "model.rope.factor"},
        {r.original_max_positions != defaults.original_max_positions,
         "model.rope.original_max_positions"},
        {r.low_freq_factor != defaults.low_freq_factor, "model.rope.low_freq_factor"},
        {r.high_freq_factor != defaults.high_freq_factor, "model.rope.high_freq_factor"},
    };
    for (const auto& [set, key] : keys)
      if (set)
        return ConfigProblem{
            key,
            fmt::format("a setting of model.position rope, and model.position is {}",
                        to_string(m.position)),
            {"model.position"}};
    return std::nullopt;
  }
  const int64_t head = m.d_model / m.n_heads;
  rope::Params p;
  p.fraction = r.fraction;
  const int64_t rotated = rope::rotated_dims(p, head);
  const bool ntk = r.scaling == rope::Scaling::Ntk || r.scaling == rope::Scaling::DynamicNtk;
  if (rotated < 2 || rotated % 2 != 0 || (ntk && rotated < 4))
    return ConfigProblem{
        "model.rope.fraction",
        fmt::format("rotates int({} x {}) = {} dimensions of each head; RoPE rotates pairs, so the "
                    "count must be even and at least {}",
                    head, r.fraction, rotated, ntk ? "4 under NTK scaling" : "2"),
        {"model.d_model", "model.n_heads", "model.rope.scaling"}};
  const bool uses_context = r.scaling == rope::Scaling::DynamicNtk ||
                            r.scaling == rope::Scaling::Yarn || r.scaling == rope::Scaling::Llama3;
  const bool llama3 = r.scaling == rope::Scaling::Llama3;
  for (const auto& [value, fallback, key] :
       {std::tuple{r.low_freq_factor, defaults.low_freq_factor, "model.rope.low_freq_factor"},
        std::tuple{r.high_freq_factor, defaults.high_freq_factor, "model.rope.high_freq_factor"}})
    if (!llama3 && value != fallback)
      return ConfigProblem{key,
                           fmt::format("{} is read by model.rope.scaling llama3 only, and "
                                       "model.rope.scaling is {}",
                                       value, to_string(r.scaling)),
                           {"model.rope.scaling"}};
  if (llama3 && !(r.high_freq_factor > r.low_freq_factor))
    return ConfigProblem{"model.rope.high_freq_factor",
                         fmt::format("{} must be above model.rope.low_freq_factor = {} (llama3 "
                                     "blends the pairs between them)",
                                     r.high_freq_factor, r.low_freq_factor),
                         {"model.rope.low_freq_factor"}};
  if (r.scaling == rope::Scaling::None && r.factor != defaults.factor)
    return ConfigProblem{"model.rope.factor",
                         fmt::format("{} scales nothing: model.rope.scaling is none", r.factor),
                         {"model.rope.scaling"}};
  if (!uses_context && r.original_max_positions != 0)
    return ConfigProblem{"model.rope.original_max_positions",
                         fmt::format("{} is read by model.rope.scaling dynamic_ntk, yarn and "
                                     "llama3 only, and model.rope.scaling is {}",
                                     r.original_max_positions, to_string(r.scaling)),
                         {"model.rope.scaling"}};
  return std::nullopt;
}

// model.t5's keys: set only under model.position t5, and a log-spaced range
// that is not empty (T5's buckets: the exact ones reach half the buckets of
// a causal stack, and max_distance must lie beyond them).
std::optional<ConfigProblem> t5_problem(const ModelConfig& m) {
  const ModelConfig::T5Bias defaults;
  if (m.tupe.relative && !m.position->untied_correlation)
    return ConfigProblem{"model.tupe.relative",
                         fmt::format("a setting of model.position tupe, and model.position is {}",
                                     to_string(m.position)),
                         {"model.position"}};
  if (!m.position->relative_bias && !m.tupe.relative) {
    const std::pair<bool, const char*> keys[] = {
        {m.t5.buckets != defaults.buckets, "model.t5.buckets"},
        {m.t5.max_distance != defaults.max_distance, "model.t5.max_distance"},
    };
    for (const auto& [set, key] : keys)
      if (set)
        return ConfigProblem{key,
                             fmt::format("a setting of model.position t5 (or tupe with "
                                         "model.tupe.relative), and model.position is {}",
                                         to_string(m.position)),
                             {"model.position"}};
    return std::nullopt;
  }
  if (m.t5.buckets % 2 != 0)
    return ConfigProblem{
        "model.t5.buckets",
        fmt::format("{} is odd; an encoder gives half the buckets to each side", m.t5.buckets),
        {}};
  if (m.t5.max_distance <= m.t5.buckets / 2)
    return ConfigProblem{"model.t5.max_distance",
                         fmt::format("{} does not exceed the {} distances with a bucket each "
                                     "(half of model.t5.buckets = {}); the log-spaced buckets "
                                     "need room beyond them",
                                     m.t5.max_distance, m.t5.buckets / 2, m.t5.buckets),
                         {"model.t5.buckets"}};
  return std::nullopt;
}

// model.deberta's keys: only under model.position deberta; with buckets,
// an even count whose log-spaced part reaches beyond its exact half.
std::optional<ConfigProblem> deberta_problem(const ModelConfig& m) {
  const ModelConfig::Deberta defaults;
  if (!m.position->disentangled) {
    const std::pair<bool, const char*> keys[] = {
        {m.deberta.position_buckets != defaults.position_buckets, "model.deberta.position_buckets"},
        {m.deberta.max_relative_positions != defaults.max_relative_positions,
         "model.deberta.max_relative_positions"},
    };
    for (const auto& [set, key] : keys)
      if (set)
        return ConfigProblem{
            key,
            fmt::format("a setting of model.position deberta, and model.position is {}",
                        to_string(m.position)),
            {"model.position"}};
    return std::nullopt;
  }
  const int buckets = m.deberta.position_buckets;
  if (buckets > 0 && (buckets % 2 != 0 || buckets < 4))
    return ConfigProblem{"model.deberta.position_buckets",
                         fmt::format("{}: 0 (no buckets) or an even count of at least 4", buckets),
                         {}};
  if (buckets > 0 && m.deberta.max_relative_positions <= buckets / 2 + 1)
    return ConfigProblem{"model.deberta.max_relative_positions",
                         fmt::format("{} does not reach beyond the {} exact distances of "
                                     "model.deberta.position_buckets = {}",
                                     m.deberta.max_relative_positions, buckets / 2, buckets),
                         {"model.deberta.position_buckets"}};
  return std::nullopt;
}

// Keys that do nothing for the chosen task, kind or feature map are refused.
// The rule (docs/design.md, "Config"): such a key set to anything but its
// default is a mistake, refused with the reason; written out at its default
// it is accepted, since a default changes nothing and shared configs spell
// them. The attention kinds' keys are in attention_problem, RoPE's in
// rope_problem, the SentencePiece keys under data.tokenizer bytes in
// tokenizer_problem.
std::optional<ConfigProblem> unused_model_key(const Config& c, const TaskSpec& task) {
  const ModelConfig& m = c.model;
  const ModelConfig defaults;
  const std::string name(to_string(c.task));
  const bool bert = task.model == ModelFamily::BertEncoder;
  const bool decoder_only = task.model == ModelFamily::Decoder;
  if (decoder_only && m.encoder_layers != defaults.encoder_layers)
    return ConfigProblem{"model.encoder_layers",
                         fmt::format("{} counts encoder layers, and task {} builds a decoder-only "
                                     "model: its layers are model.decoder_layers",
                                     m.encoder_layers, name),
                         {"task"}};
  if (bert && m.decoder_layers != defaults.decoder_layers)
    return ConfigProblem{"model.decoder_layers",
                         fmt::format("{} counts decoder layers, and task {} builds a BERT/RoFormer "
                                     "encoder: its layers are model.encoder_layers",
                                     m.decoder_layers, name),
                         {"task"}};
  if (bert && m.share_embeddings != defaults.share_embeddings)
    return ConfigProblem{"model.share_embeddings",
                         fmt::format("task {} builds BERT/RoFormer, whose masked-LM head is always "
                                     "tied to the token embedding (and a classifier has none)",
                                     name),
                         {"task"}};
  if (bert && m.scale_embeddings != defaults.scale_embeddings)
    return ConfigProblem{"model.scale_embeddings",
                         fmt::format("task {} builds BERT/RoFormer, which never scales its token "
                                     "embeddings",
                                     name),
                         {"task"}};
  if (!bert && m.type_vocab_size != defaults.type_vocab_size)
    return ConfigProblem{"model.type_vocab_size",
                         fmt::format("token types are read by the BERT/RoFormer encoders of tasks "
                                     "mlm, classification and multilabel; task {} has none",
                                     name),
                         {"task"}};
  if (!bert && m.init_std != defaults.init_std)
    return ConfigProblem{"model.init_std",
                         fmt::format("initializes the BERT/RoFormer encoders of tasks mlm, "
                                     "classification and multilabel; task {} initializes its "
                                     "model as its own family does",
                                     name),
                         {"task"}};
  if (m.time2vec_dim != defaults.time2vec_dim && m.age_embedding != AgeEmbedding::Time2Vec)
    return ConfigProblem{
        "model.time2vec_dim",
        m.age_vocab_size == 0
            ? fmt::format("{} sizes Time2Vec ages (model.age_embedding time2vec), and the model "
                          "has no age embedding (model.age_vocab_size 0)",
                          m.time2vec_dim)
            : fmt::format("{} sizes Time2Vec ages, and model.age_embedding is {}", m.time2vec_dim,
                          to_string(m.age_embedding)),
        {"model.age_embedding", "model.age_vocab_size"}};
  return std::nullopt;
}

// Memory a size key would take, refused at load when no device could hold
// it (rather than an allocation failure that names no key, later).
constexpr double kMaxKeyBytes = 1099511627776.0;  // 1 TiB

std::string bytes_text(double bytes) {
  if (bytes >= 1e12) return fmt::format("{:.1f} TB", bytes / 1e12);
  if (bytes >= 1e9) return fmt::format("{:.1f} GB", bytes / 1e9);
  return fmt::format("{:.1f} MB", bytes / 1e6);
}

// The tokens of one training batch (parallel text: data.max_tokens, padding
// counted; the other tasks: train.batch_size sequences of data.seq_len).
double batch_tokens(const Config& c) {
  if (c.task->parallel_text) return static_cast<double>(c.data.max_tokens);
  return static_cast<double>(c.train.batch_size) * static_cast<double>(c.data.seq_len);
}

std::optional<ConfigProblem> size_problem(const Config& c, const TaskSpec& task) {
  const ModelConfig& m = c.model;
  const double d = m.d_model, heads = m.n_heads, tokens = batch_tokens(c);
  const double layers = task.model == ModelFamily::Decoder ? m.decoder_layers
                        : task.model == ModelFamily::BertEncoder
                            ? m.encoder_layers
                            : m.encoder_layers + 2.0 * m.decoder_layers;
  if (m.age_embedding == AgeEmbedding::Time2Vec) {
    // The (k + 1) x d_model projection with its gradient and two Adam
    // moments, and the k + 1 features of every token of a batch (kept for
    // the backward) and their gradients.
    const double k1 = m.time2vec_dim + 1.0;
    const double bytes = 4.0 * (4.0 * k1 * (d + 3.0) + 2.0 * tokens * k1);
    if (bytes > kMaxKeyBytes)
      return ConfigProblem{
          "model.time2vec_dim",
          fmt::format("{} periodic terms would need about {} (a {} x {} projection with its "
                      "gradient and Adam moments, and {} features for each of the {:.0f} tokens "
                      "of a batch), more than any device holds",
                      m.time2vec_dim, bytes_text(bytes), m.time2vec_dim + 1, m.d_model,
                      m.time2vec_dim + 1, tokens),
          {"model.d_model", "train.batch_size", "data.seq_len"}};
  }
  const AttentionConfig& a = c.attention;
  if (a.kind == *nn::attention_kind("linear") && a.feature_map == ops::LinearFeatureMap::Favor &&
      a.features > 0) {
    // Per layer: the M x D projection of a draw, and phi(q), phi(k) of every
    // head and token of a batch, kept for the backward.
    const double M = a.features, D = d / heads;
    const double bytes = 4.0 * layers * (M * D + 2.0 * tokens * heads * M);
    if (bytes > kMaxKeyBytes)
      return ConfigProblem{
          "attention.features",
          fmt::format("{} random features would need about {} ({:.0f} layers x (a {} x {:.0f} "
                      "projection, and {} features of q and of k for each of {} heads and "
                      "{:.0f} tokens of a batch)), more than any device holds",
                      a.features, bytes_text(bytes), layers, a.features, D, a.features, m.n_heads,
                      tokens),
          {"model.d_model", "model.n_heads", "train.batch_size", "data.seq_len"}};
  }
  return std::nullopt;
}

// The model's shape, the positions and the attention core, whatever the task
// (the family of the task's model decides what applies).
std::optional<ConfigProblem> model_problem(const Config& c, const TaskSpec& task) {
  const ModelConfig& m = c.model;
  const bool encoder_decoder = task.model == ModelFamily::EncoderDecoder;
  if (m.d_model % m.n_heads != 0)
    return ConfigProblem{
        "model.n_heads",
        fmt::format("{} heads do not divide model.d_model = {}", m.n_heads, m.d_model),
        {"model.d_model"}};
  if (m.kv_heads > 0 && m.n_heads % m.kv_heads != 0)
    return ConfigProblem{
        "model.kv_heads",
        fmt::format("{} key/value heads do not divide model.n_heads = {}", m.kv_heads, m.n_heads),
        {"model.n_heads"}};
  if (m.kv_heads > 0 && m.kv_heads != m.n_heads && m.position->disentangled)
    return ConfigProblem{"model.kv_heads",
                         "DeBERTa's relative terms project the shared positions with every "
                         "head's own key projection; grouped key/value heads have none",
                         {"model.position", "model.n_heads"}};
  // The position encoding's own rule (nn/positions/NAME.cpp).
  if (m.position->check) {
    // A translation's sentence takes one more position (eos on the source,
    // bos on the target).
    const nn::PositionShape shape{m.d_model,           m.n_heads,       m.max_positions,
                                  c.data.*task.length, task.length_key, encoder_decoder ? 1 : 0};
    if (auto p = m.position->check(shape)) return ConfigProblem{p->key, p->message, p->related};
  }
  if (auto p = rope_problem(m)) return p;
  if (auto p = t5_problem(m)) return p;
  if (auto p = deberta_problem(m)) return p;
  if (c.data.format == DataFormat::Ehr && !c.task->reads_ehr) {
    std::string readers;
    for (const Task& t : task_kinds())
      if (t->reads_ehr) readers += (readers.empty() ? "" : " and ") + std::string(t.name());
    return ConfigProblem{
        "data.format",
        fmt::format("ehr data feeds tasks {}; task {} reads text", readers, to_string(c.task)),
        {"task"}};
  }
  if (c.data.format == DataFormat::Ehr && !c.data.labels.empty())
    return ConfigProblem{"data.labels",
                         "the labels of EHR data are the codes of its vocab.txt; leave "
                         "data.labels out",
                         {"data.format"}};
  if (c.data.format != DataFormat::Ehr && m.position_source == PositionSource::Visit)
    return ConfigProblem{"model.position_source",
                         "visit positions need EHR data (data.format: ehr)",
                         {"data.format"}};
  if (c.data.format != DataFormat::Ehr && m.age_vocab_size > 0)
    return ConfigProblem{"model.age_vocab_size",
                         "an age embedding needs EHR data (data.format: ehr)",
                         {"data.format"}};
  if (m.classifier_bias == ClassifierBias::Prior && c.task->labels != LabelMode::Multi)
    return ConfigProblem{"model.classifier_bias",
                         "prior starts a multi-label head (task multilabel) at the label "
                         "log-odds; task " +
                             std::string(to_string(c.task)) + " has no such head",
                         {"task"}};
  if (m.classifier_head != ClassifierHead::Cls && c.task->labels == LabelMode::None)
    return ConfigProblem{"model.classifier_head",
                         std::string(to_string(m.classifier_head)) +
                             " is a head of tasks classification and multilabel; task " +
                             std::string(to_string(c.task)) + " has no classifier",
                         {"task"}};
  if (m.age_embedding == AgeEmbedding::Time2Vec && m.age_vocab_size == 0)
    return ConfigProblem{"model.age_embedding",
                         "time2vec reads ages as age id / model.age_vocab_size, which is 0 (no "
                         "ages)",
                         {"model.age_vocab_size"}};
  if (m.position_source == PositionSource::Visit && m.position->rotates_qk &&
      c.attention.kind != nn::AttentionKind::Softmax)
    return ConfigProblem{"model.position_source",
                         fmt::format("visit positions rotate q and k in the head split; attention "
                                     "kind {} rotates in its own core",
                                     c.attention.kind.name()),
                         {"attention.kind", "model.position"}};
  if (m.position_source == PositionSource::Visit && m.position->alibi)
    return ConfigProblem{"model.position_source",
                         "visit positions are not read by ALiBi's bias, which counts tokens "
                         "(model.position alibi)",
                         {"model.position"}};
  if (m.position_source == PositionSource::Visit && m.position->xl_terms)
    return ConfigProblem{"model.position_source",
                         "visit positions are not read by Transformer-XL's relative terms, which "
                         "count tokens (model.position transformer_xl)",
                         {"model.position"}};
  if (m.position_source == PositionSource::Visit && m.position->untied_correlation)
    return ConfigProblem{"model.position_source",
                         "visit positions are not read by TUPE's positional correlation, which "
                         "counts tokens (model.position tupe)",
                         {"model.position"}};
  if (m.position_source == PositionSource::Visit && m.position->relative_bias)
    return ConfigProblem{"model.position_source",
                         "visit positions are not read by T5's relative bias, which counts tokens "
                         "(model.position t5)",
                         {"model.position"}};
  if (m.position_source == PositionSource::Visit && m.position->disentangled)
    return ConfigProblem{"model.position_source",
                         "visit positions are not read by DeBERTa's relative positions, which "
                         "count tokens (model.position deberta)",
                         {"model.position"}};
  // ALiBi's bias is added inside rotor's attention cores (CPU and CUDA);
  // cuDNN's attention has no such bias.
  if (m.position->alibi && c.attention.impl == nn::AttentionImpl::Cudnn)
    return ConfigProblem{"attention.impl",
                         "cudnn is cuDNN's attention, which does not add ALiBi's bias "
                         "(model.position alibi); use auto, rotor or reference",
                         {"model.position"}};
  // Transformer-XL's terms, TUPE's correlation and DeBERTa's terms reach the
  // materialized core as a dense bias, on the CPU and on CUDA; they compute
  // in f32 in every precision (nn/attention.cpp).
  if (m.position->xl_terms || m.position->untied_correlation || m.position->disentangled) {
    const std::string name(to_string(m.position));
    const char* what = m.position->xl_terms             ? "Transformer-XL's relative terms"
                       : m.position->untied_correlation ? "TUPE's positional correlation"
                                                        : "DeBERTa's disentangled terms";
    if (c.attention.impl == nn::AttentionImpl::Cudnn ||
        c.attention.impl == nn::AttentionImpl::Rotor)
      return ConfigProblem{"attention.impl",
                           fmt::format("{} does not add {} (model.position {}), a dense bias that "
                                       "only the materialized core adds; use auto or reference",
                                       to_string(c.attention.impl), what, name),
                           {"model.position"}};
  }
  // TUPE unties [CLS], the first token of the BERT encoder's tasks; the
  // decoders' incremental steps carry no TUPE term.
  if (m.position->disentangled && task.model != ModelFamily::BertEncoder)
    return ConfigProblem{"model.position",
                         fmt::format("deberta is built for the BERT encoder so far (tasks mlm, "
                                     "classification, multilabel); task {} builds {}",
                                     to_string(c.task),
                                     task.model == ModelFamily::Decoder ? "a decoder-only LM"
                                                                        : "an encoder-decoder"),
                         {"task"}};
  if (m.position->untied_correlation && task.model != ModelFamily::BertEncoder)
    return ConfigProblem{"model.position",
                         fmt::format("tupe is built for the BERT encoder, whose first token is "
                                     "[CLS] (tasks mlm, classification, multilabel); task {} "
                                     "builds {}",
                                     to_string(c.task),
                                     task.model == ModelFamily::Decoder ? "a decoder-only LM"
                                                                        : "an encoder-decoder"),
                         {"task"}};
  // T5's bias is added, and its gradient summed, by the materialized core
  // (CPU and CUDA), the flash core's CPU twin and rotor's CUDA flash kernels
  // (which hold the table in shared memory up to t5::kFlashMaxDistance);
  // not by cuDNN.
  if (m.position->relative_bias && c.attention.impl == nn::AttentionImpl::Cudnn)
    return ConfigProblem{"attention.impl",
                         "cudnn is cuDNN's attention, which does not add T5's relative bias "
                         "(model.position t5); use auto or reference",
                         {"model.position"}};
  if (m.position->relative_bias && c.attention.impl == nn::AttentionImpl::Rotor &&
      c.device.rfind("cuda", 0) == 0 && m.t5.max_distance > t5::kFlashMaxDistance)
    return ConfigProblem{"attention.impl",
                         fmt::format("rotor's CUDA flash kernels hold T5's table for "
                                     "model.t5.max_distance up to {}, not {}; use auto or "
                                     "reference on a GPU",
                                     t5::kFlashMaxDistance, m.t5.max_distance),
                         {"model.t5.max_distance", "device"}};
  if (task.model == ModelFamily::BertEncoder && m.norm != NormPlacement::Post)
    return ConfigProblem{"model.norm",
                         fmt::format("task {} builds BERT/RoFormer, which are post-LN; got {}",
                                     to_string(c.task), to_string(m.norm)),
                         {"task"}};
  {
    // The size of the model, before anything is allocated: a shape that
    // cannot be held is a config error, not an allocation failure later.
    const double d = m.d_model, ff = m.d_ff, v = c.data.vocab_size, pos = m.max_positions;
    // A causal LM's layers (task.model Decoder) are encoder layers with a
    // causal mask, counted by model.decoder_layers.
    const bool decoder_only = task.model == ModelFamily::Decoder;
    const int encoder_layers = decoder_only ? m.decoder_layers : m.encoder_layers;
    const double enc = encoder_layers * (4 * d * d + 2 * d * ff);
    const int decoder_layers = encoder_decoder ? m.decoder_layers : 0;
    const double dec = decoder_layers * (8 * d * d + 2 * d * ff);
    const double params = enc + dec + 2 * v * d + pos * d;
    if (params > 1e11)
      return ConfigProblem{
          "model.d_model",
          fmt::format("the model would have about {:.3g} parameters (d_model {}, d_ff {}, {} + "
                      "{} layers, vocabulary {}), more than rotor can hold",
                      params, m.d_model, m.d_ff, encoder_layers, decoder_layers, c.data.vocab_size),
          {"model.d_ff", "model.encoder_layers", "model.decoder_layers", "data.vocab_size"}};
  }
  if (!m.init_from.empty() && hf_init_target(task.model) == nullptr) {
    // "TARGET (task A or B), ..." in the order of the task table.
    std::vector<std::pair<std::string, std::string>> targets;
    for (const Task& t : task_kinds()) {
      const char* target = hf_init_target(t->model);
      if (!target) continue;
      auto it = std::find_if(targets.begin(), targets.end(),
                             [&](const auto& e) { return e.first == target; });
      if (it == targets.end())
        targets.emplace_back(target, t.name());
      else
        it->second += " or " + std::string(t.name());
    }
    std::string what;
    for (const auto& [target, tasks] : targets)
      what += fmt::format("{}{} (task {})", what.empty() ? "" : ", ", target, tasks);
    return ConfigProblem{"model.init_from",
                         fmt::format("initializes {}; task {} has none", what, to_string(c.task)),
                         {"task"}};
  }
  // cuDNN's attention runs on a GPU only; device auto may still find none,
  // which the attention core reports when it is chosen.
  if (c.attention.impl == nn::AttentionImpl::Cudnn && c.device == "cpu")
    return ConfigProblem{"attention.impl",
                         "cudnn is cuDNN's attention on a GPU, and device is cpu (use auto, "
                         "rotor or reference)",
                         {"device"}};
  // cuDNN's attention computes in f16 and bf16: with fp32 every training
  // forward would fail. (Under fp16 and bf16, the f32 forwards of validation
  // and inference take auto's core: nn/attention_kinds/softmax.cpp.) Under
  // attention.kind linear, attention_problem names the kind instead.
  if (c.attention.impl == nn::AttentionImpl::Cudnn && c.precision == Precision::FP32 &&
      c.attention.kind == nn::AttentionKind::Softmax)
    return ConfigProblem{"attention.impl",
                         "cudnn is cuDNN's attention, which computes in fp16 or bf16, and "
                         "precision is fp32 (use precision fp16 or bf16, or attention.impl auto)",
                         {"precision"}};
  return std::nullopt;
}

// attention.kind and the linear kind's keys.
std::optional<ConfigProblem> attention_problem(const Config& c) {
  const AttentionConfig& a = c.attention;
  const AttentionConfig defaults;
  const nn::AttentionKind linear = *nn::attention_kind("linear");
  if (a.kind != linear) {
    // The linear kind's keys do nothing under another kind: set to anything
    // but their defaults, they are a mistake.
    const std::pair<bool, const char*> keys[] = {
        {a.feature_map != defaults.feature_map, "attention.feature_map"},
        {a.features != defaults.features, "attention.features"},
        {a.feature_redraw != defaults.feature_redraw, "attention.feature_redraw"},
        {a.linear_rope != defaults.linear_rope, "attention.linear_rope"},
        {a.linear_eps != defaults.linear_eps, "attention.linear_eps"},
    };
    for (const auto& [set, key] : keys)
      if (set)
        return ConfigProblem{key,
                             fmt::format("a key of attention.kind linear, and attention.kind is {}",
                                         to_string(a.kind)),
                             {"attention.kind"}};
    return std::nullopt;
  }
  if (c.model.position->alibi)
    return ConfigProblem{"attention.kind",
                         "linear attention has no scores to add ALiBi's bias to "
                         "(model.position alibi); use attention.kind softmax",
                         {"model.position"}};
  if (c.model.position->disentangled)
    return ConfigProblem{"attention.kind",
                         "linear attention has no scores to add DeBERTa's disentangled terms to "
                         "(model.position deberta); use attention.kind softmax",
                         {"model.position"}};
  if (c.model.position->untied_correlation)
    return ConfigProblem{"attention.kind",
                         "linear attention has no scores to add TUPE's positional correlation "
                         "to (model.position tupe); use attention.kind softmax",
                         {"model.position"}};
  if (c.model.position->xl_terms)
    return ConfigProblem{"attention.kind",
                         "linear attention has no scores to add Transformer-XL's relative terms "
                         "to (model.position transformer_xl); use attention.kind softmax",
                         {"model.position"}};
  if (c.model.position->relative_bias)
    return ConfigProblem{"attention.kind",
                         "linear attention has no scores to add T5's relative bias to "
                         "(model.position t5); use attention.kind softmax",
                         {"model.position"}};
  if (a.feature_map != ops::LinearFeatureMap::Favor) {
    // elu1 and relu map each head's D dimensions to D features: nothing random.
    const std::pair<bool, const char*> keys[] = {
        {a.features != defaults.features, "attention.features"},
        {a.feature_redraw != defaults.feature_redraw, "attention.feature_redraw"},
    };
    for (const auto& [set, key] : keys)
      if (set)
        return ConfigProblem{key,
                             fmt::format("a key of FAVOR+'s random features "
                                         "(attention.feature_map favor), and attention.feature_map "
                                         "is {}, whose features are the head's dimensions",
                                         ops::linear_feature_map_name(a.feature_map)),
                             {"attention.feature_map"}};
  }
  if (!c.model.position->rotates_qk && a.linear_rope != defaults.linear_rope)
    return ConfigProblem{"attention.linear_rope",
                         fmt::format("places RoPE in linear attention, and model.position is {}, "
                                     "which rotates nothing",
                                     to_string(c.model.position)),
                         {"model.position"}};
  if (a.impl == nn::AttentionImpl::Rotor || a.impl == nn::AttentionImpl::Cudnn)
    return ConfigProblem{
        "attention.impl",
        fmt::format("{} is a core of softmax attention; attention.kind linear runs "
                    "its own (use auto or reference)",
                    to_string(a.impl)),
        {"attention.kind"}};
  if (c.model.attention_dropout > 0)
    return ConfigProblem{"model.attention_dropout",
                         fmt::format("{} drops attention probabilities, which attention.kind "
                                     "linear does not have: set it to 0",
                                     c.model.attention_dropout),
                         {"attention.kind"}};
  if (a.feature_map == ops::LinearFeatureMap::Favor && a.features % 2 != 0 &&
      c.model.position->rotates_qk && a.linear_rope == ops::LinearRope::AfterFeatureMap)
    return ConfigProblem{"attention.features",
                         fmt::format("{} is odd, and RoPE after the feature map "
                                     "(attention.linear_rope) rotates pairs of features",
                                     a.features),
                         {"attention.linear_rope", "model.position", "attention.feature_map"}};
  for (ValidMetric m : c.train.valid_metrics)
    if (m == ValidMetric::Bleu || m == ValidMetric::Chrf)
      return ConfigProblem{"train.valid_metrics",
                           fmt::format("{} decodes with the cached-key step, which attention.kind "
                                       "linear does not have yet",
                                       to_string(m)),
                           {"attention.kind"}};
  return std::nullopt;
}

// data.tokenizer bytes has no SentencePiece model: the keys of one, set to
// anything but their defaults, are a mistake.
std::optional<ConfigProblem> tokenizer_problem(const Config& c) {
  const DataConfig& d = c.data;
  if (d.tokenizer != TokenizerType::Bytes) return std::nullopt;
  const DataConfig defaults;
  if (d.vocab_size != defaults.vocab_size)
    return ConfigProblem{"data.vocab_size",
                         fmt::format("{} sizes a SentencePiece model; data.tokenizer bytes has a "
                                     "fixed vocabulary (256 bytes after the special ids): leave "
                                     "data.vocab_size out",
                                     d.vocab_size),
                         {"data.tokenizer"}};
  const std::pair<bool, const char*> keys[] = {
      {!d.spm_model.empty(), "data.spm_model"},
      {d.spm_model_type != defaults.spm_model_type, "data.spm_model_type"},
      {d.character_coverage != defaults.character_coverage, "data.character_coverage"},
  };
  for (const auto& [set, key] : keys)
    if (set)
      return ConfigProblem{key,
                           "a key of the SentencePiece tokenizer, and data.tokenizer is bytes",
                           {"data.tokenizer"}};
  return std::nullopt;
}

// What validations report and what the best checkpoint follows.
std::optional<ConfigProblem> metrics_problem(const Config& c) {
  const TrainConfig& t = c.train;
  for (ValidMetric m : t.valid_metrics)
    if (std::string why = metric_unavailable(c, m); !why.empty())
      return ConfigProblem{"train.valid_metrics", why};
  if (std::string why = metric_unavailable(c, t.best_metric); !why.empty())
    return ConfigProblem{"train.best_metric", why};
  const bool listed = std::find(t.valid_metrics.begin(), t.valid_metrics.end(), t.best_metric) !=
                      t.valid_metrics.end();
  if (t.best_metric != ValidMetric::Loss && !listed && !metric_always_reported(c, t.best_metric))
    return ConfigProblem{
        "train.best_metric",
        fmt::format("{} is not computed: add it to train.valid_metrics", to_string(t.best_metric)),
        {"train.valid_metrics"}};
  // Without a validation set these would silently do nothing.
  if (c.data.valid.empty() && t.best_metric != ValidMetric::Loss)
    return ConfigProblem{"train.best_metric",
                         fmt::format("{} picks checkpoints/best by validation, but data.valid is "
                                     "empty; set data.valid or drop train.best_metric",
                                     to_string(t.best_metric)),
                         {"data.valid"}};
  if (c.data.valid.empty() && t.patience > 0)
    return ConfigProblem{"train.patience",
                         fmt::format("{} counts validations without improvement, but data.valid "
                                     "is empty; set data.valid or train.patience: 0",
                                     t.patience),
                         {"data.valid"}};
  return std::nullopt;
}

std::optional<ConfigProblem> find_problem(const Config& c) {
  const TaskSpec& task = task_spec(c.task);
  if (auto p = model_problem(c, task)) return p;
  if (auto p = attention_problem(c)) return p;
  if (auto p = unused_model_key(c, task)) return p;
  if (auto p = size_problem(c, task)) return p;
  if (auto p = tokenizer_problem(c)) return p;
  if (c.data.choices != 0 && c.task->labels != LabelMode::Single)
    return ConfigProblem{"data.choices",
                         fmt::format("a multiple-choice head is task classification's; task is {}",
                                     to_string(c.task)),
                         {"task"}};
  if (c.data.packing == Packing::Documents && !task.packs_documents)
    return ConfigProblem{"data.packing",
                         fmt::format("documents packs the lines, patients, examples or "
                                     "sentence pairs of tasks lm, mlm, classification, "
                                     "multilabel and translation; task {} keeps its own "
                                     "batches (stream)",
                                     to_string(c.task)),
                         {"task"}};
  if (c.data.document_separator == DocumentSeparator::BlankLine &&
      (c.data.packing != Packing::Documents || c.data.format != DataFormat::Text ||
       (std::string_view(task.name) != "lm" && std::string_view(task.name) != "mlm")))
    return ConfigProblem{
        "data.document_separator",
        fmt::format("blank_line makes paragraphs the documents of tasks lm and mlm on text with "
                    "data.packing documents; here task {}, data.format {}, data.packing {}",
                    to_string(c.task), to_string(c.data.format), to_string(c.data.packing)),
        {"data.packing", "task", "data.format"}};
  if (c.data.packing == Packing::Documents && c.model.position->untied_correlation)
    return ConfigProblem{"data.packing",
                         "documents cannot carry TUPE's positional correlation (model.position "
                         "tupe), which is one table per block, not per document",
                         {"model.position"}};
  if (task.rules)
    if (auto p = task.rules(c)) return p;
  if (auto p = metrics_problem(c)) return p;
  const std::string& r = c.dist.rendezvous;
  if (r != "auto" && r != "mpi" && !(r.rfind("file:", 0) == 0 && r.size() > 5))
    return ConfigProblem{
        "dist.rendezvous",
        "expected auto, mpi or file:DIR (a directory every rank reaches), got " + json_quote(r)};
  // fp16/bf16 on the CPU are emulated (train/precision.h): allowed.
  return std::nullopt;
}

// "LOCATION: KEY: what", LOCATION naming the key's line or --set argument.
[[noreturn]] void fail(const Config& c, const ConfigProblem& p) {
  std::vector<std::string> keys{p.key};
  keys.insert(keys.end(), p.related.begin(), p.related.end());
  const std::string where = c.origins.locate(keys);
  if (where.empty()) ROTOR_FAIL("{}: {}", p.key, p.message);
  ROTOR_FAIL("{}: {}: {}", where, p.key, p.message);
}

}  // namespace

void validate(const Config& config) {
  if (auto p = find_problem(config)) fail(config, *p);
}

void validate_for_training(const Config& config) {
  validate(config);
  if (config.output_dir.empty())
    fail(config, {"output_dir", "empty; name the directory the run writes into"});
  for (const RequiredData& d : task_spec(config.task).required_data)
    if ((config.data.*d.value).empty())
      fail(config, {d.key, fmt::format("required for training task {}: {}", to_string(config.task),
                                       d.what)});
}

}  // namespace rotor
