// The experiment config (docs/design.md, "Config"): YAML -> these typed structs.
//
// THE KEY NAMES, THEIR NESTING AND THE ENUM SPELLINGS BELOW ARE THE
// USER-FACING CONTRACT: they appear in every configs/*.yaml, in --set
// overrides, in --dump-config output and in the config saved with every
// checkpoint. Rename nothing without a migration; add keys with defaults.
//
// Loading validates every key: an unknown key, a wrong type or an
// out-of-range / bad enum value is a rotor::Error that names the key path and
// the file line, e.g.
//   configs/x.yaml:12: train.max_updates: expected a positive integer, got "abc"
// and an override's error names the override:
//   --set model.d_modle=256: unknown key model.d_modle (did you mean model.d_model?)
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/task_kind.h"
#include "core/rope.h"
#include "nn/kinds.h"
#include "ops/gemm.h"
#include "ops/linear_attention.h"
#include "optim/schedule.h"

namespace rotor {

enum class Precision { FP32, FP16, BF16 };
enum class LogLevel { Trace, Debug, Info, Warn, Error };
enum class NormPlacement { Post, Pre };
// model.norm_type: layer normalization, or RMSNorm (Zhang & Sennrich 2019;
// T5's and Llama's: no mean subtracted, no bias) for every norm of the model.
enum class NormType { LayerNorm, RmsNorm };
enum class SpmModelType { Bpe, Unigram };
// data.tokenizer: a SentencePiece model (trained or named), or UTF-8 bytes.
enum class TokenizerType { SentencePiece, Bytes };
// What data.train/valid/test name: text (raw or `rotor prepare`d), or EHR
// patient sequences made by `rotor prepare-ehr` (data/ehr.h).
enum class DataFormat { Text, Ehr };
// How tasks lay their data into rows (data.packing, data/lm.h, data/mlm.h,
// data/classification.h): one token stream cut into blocks (a classifier's
// and EHR's: one example a row), or whole lines, EHR patients or a
// classifier's examples as documents packed into rows with positions
// restarting per document and a block-diagonal mask (translation: each
// batch's sentence pairs end to end, one row per side, without padding).
enum class Packing { Stream, Documents };
// What a packed document of task lm is (data.document_separator, data/lm.h):
// a line, or a paragraph (the lines between blank ones).
enum class DocumentSeparator { Line, BlankLine };
// What positions count (model.position_source): tokens, or visits as in BEHRT.
enum class PositionSource { Token, Visit };
// How ages enter the EHR encoder (model.age_embedding): a table of age ids,
// or Time2Vec of the age (nn/time2vec.h).
enum class AgeEmbedding { Table, Time2Vec };
// How the output bias of task multilabel's head starts (model.classifier_bias):
// zero, or each label's log-odds in the training labels (models/bert_classifier.h).
enum class ClassifierBias { Zero, Prior };
// What the classifier's outputs read (model.classifier_head): the [CLS]
// state through BERT's pooler or RoFormer's head, or each output its own
// attention over the example's tokens (models/bert_classifier.h).
enum class ClassifierHead { Cls, LabelAttention };
enum class OptimizerName { Adam, AdamW };
// What a validation reports (train.valid_metrics) and what the best
// checkpoint and early stopping follow (train.best_metric). f1, mcc, pearson
// and spearman are GLUE's scores of task classification, on its 0-100 scale;
// ap and auroc are task multilabel's average precision and ROC AUC averaged
// over examples (eval/multilabel_metrics.h), in [0, 1].
enum class ValidMetric { Loss, Accuracy, Bleu, Chrf, F1, Mcc, Pearson, Spearman, Ap, Auroc };

// The spelling of every enum value in YAML.
template <class E>
struct EnumNames;
#define ROTOR_ENUM_NAMES(E, ...)                                             \
  template <>                                                                \
  struct EnumNames<E> {                                                      \
    static constexpr std::pair<E, std::string_view> items[] = {__VA_ARGS__}; \
  }
ROTOR_ENUM_NAMES(Precision, {Precision::FP32, "fp32"}, {Precision::FP16, "fp16"},
                 {Precision::BF16, "bf16"});
ROTOR_ENUM_NAMES(LogLevel, {LogLevel::Trace, "trace"}, {LogLevel::Debug, "debug"},
                 {LogLevel::Info, "info"}, {LogLevel::Warn, "warn"}, {LogLevel::Error, "error"});
// model.activation: ops::Activation::None is not a feed-forward activation,
// so it has no spelling here.
ROTOR_ENUM_NAMES(ops::Activation, {ops::Activation::ReLU, "relu"}, {ops::Activation::GELU, "gelu"},
                 {ops::Activation::SiLU, "silu"});
ROTOR_ENUM_NAMES(NormPlacement, {NormPlacement::Post, "post"}, {NormPlacement::Pre, "pre"});
ROTOR_ENUM_NAMES(NormType, {NormType::LayerNorm, "layer_norm"}, {NormType::RmsNorm, "rms_norm"});
ROTOR_ENUM_NAMES(nn::AttentionImpl, {nn::AttentionImpl::Auto, "auto"},
                 {nn::AttentionImpl::Rotor, "rotor"}, {nn::AttentionImpl::Cudnn, "cudnn"},
                 {nn::AttentionImpl::Reference, "reference"});
ROTOR_ENUM_NAMES(ops::LinearFeatureMap, {ops::LinearFeatureMap::Elu1, "elu1"},
                 {ops::LinearFeatureMap::Relu, "relu"}, {ops::LinearFeatureMap::Favor, "favor"});
// attention.linear_rope: where RoPE goes when the model rotates (None is the
// op's placement without RoPE, not a choice).
ROTOR_ENUM_NAMES(ops::LinearRope, {ops::LinearRope::AfterFeatureMap, "after_feature_map"},
                 {ops::LinearRope::BeforeFeatureMap, "before_feature_map"});
// model.rope.layout and model.rope.scaling (core/rope.h).
ROTOR_ENUM_NAMES(rope::Layout, {rope::Layout::Interleaved, "interleaved"},
                 {rope::Layout::Half, "half"});
ROTOR_ENUM_NAMES(rope::Scaling, {rope::Scaling::None, "none"}, {rope::Scaling::Linear, "linear"},
                 {rope::Scaling::Ntk, "ntk"}, {rope::Scaling::DynamicNtk, "dynamic_ntk"},
                 {rope::Scaling::Yarn, "yarn"}, {rope::Scaling::Llama3, "llama3"});
ROTOR_ENUM_NAMES(SpmModelType, {SpmModelType::Bpe, "bpe"}, {SpmModelType::Unigram, "unigram"});
ROTOR_ENUM_NAMES(TokenizerType, {TokenizerType::SentencePiece, "sentencepiece"},
                 {TokenizerType::Bytes, "bytes"});
ROTOR_ENUM_NAMES(DataFormat, {DataFormat::Text, "text"}, {DataFormat::Ehr, "ehr"});
ROTOR_ENUM_NAMES(Packing, {Packing::Stream, "stream"}, {Packing::Documents, "documents"});
ROTOR_ENUM_NAMES(DocumentSeparator, {DocumentSeparator::Line, "line"},
                 {DocumentSeparator::BlankLine, "blank_line"});
ROTOR_ENUM_NAMES(PositionSource, {PositionSource::Token, "token"},
                 {PositionSource::Visit, "visit"});
ROTOR_ENUM_NAMES(AgeEmbedding, {AgeEmbedding::Table, "table"},
                 {AgeEmbedding::Time2Vec, "time2vec"});
ROTOR_ENUM_NAMES(ClassifierBias, {ClassifierBias::Zero, "zero"}, {ClassifierBias::Prior, "prior"});
ROTOR_ENUM_NAMES(ClassifierHead, {ClassifierHead::Cls, "cls"},
                 {ClassifierHead::LabelAttention, "label_attention"});
ROTOR_ENUM_NAMES(OptimizerName, {OptimizerName::Adam, "adam"}, {OptimizerName::AdamW, "adamw"});
ROTOR_ENUM_NAMES(ValidMetric, {ValidMetric::Loss, "loss"}, {ValidMetric::Accuracy, "accuracy"},
                 {ValidMetric::Bleu, "bleu"}, {ValidMetric::Chrf, "chrf"}, {ValidMetric::F1, "f1"},
                 {ValidMetric::Mcc, "mcc"}, {ValidMetric::Pearson, "pearson"},
                 {ValidMetric::Spearman, "spearman"}, {ValidMetric::Ap, "ap"},
                 {ValidMetric::Auroc, "auroc"});
ROTOR_ENUM_NAMES(optim::ScheduleKind, {optim::ScheduleKind::InverseSqrt, "inverse_sqrt"},
                 {optim::ScheduleKind::Linear, "linear"},
                 {optim::ScheduleKind::Constant, "constant"});
#undef ROTOR_ENUM_NAMES

// The spellings of a registry's kinds (model.position: the registered
// position encodings, nn/position.h; attention.kind: the registered attention
// kinds, nn/attention_kind.h) are their names, in registry order -- read from
// the registry when iterated, so that a new kind needs no line here.
template <class K, std::span<const K> (*List)()>
struct RegistryNames {
  struct iterator {
    const K* at;
    std::pair<K, std::string_view> operator*() const { return {*at, at->name()}; }
    iterator& operator++() {
      ++at;
      return *this;
    }
    bool operator!=(const iterator& o) const { return at != o.at; }
  };
  iterator begin() const { return {List().data()}; }
  iterator end() const { return {List().data() + List().size()}; }
};
template <>
struct EnumNames<nn::PositionKind> {
  static constexpr RegistryNames<nn::PositionKind, nn::position_kinds> items{};
};
template <>
struct EnumNames<nn::AttentionKind> {
  static constexpr RegistryNames<nn::AttentionKind, nn::attention_kinds> items{};
};
// task: the registered tasks (config/task_kind.h).
template <>
struct EnumNames<Task> {
  static constexpr RegistryNames<Task, task_kinds> items{};
};

template <class E>
concept ConfigEnum = requires {
  EnumNames<E>::items;
};

template <ConfigEnum E>
std::string_view to_string(E e) {
  for (const auto& [v, name] : EnumNames<E>::items)
    if (v == e) return name;
  return "?";
}

// Exact (lower-case) spelling -> value; nullopt otherwise.
template <ConfigEnum E>
std::optional<E> enum_from_string(std::string_view s) {
  for (const auto& [v, name] : EnumNames<E>::items)
    if (name == s) return v;
  return std::nullopt;
}

// "relu | gelu": the accepted spellings, for messages.
template <ConfigEnum E>
std::string enum_choices() {
  std::string out;
  for (const auto& [v, name] : EnumNames<E>::items) {
    if (!out.empty()) out += " | ";
    out += name;
  }
  return out;
}

// model.rope: rotary position embedding's settings under model.position rope
// (core/rope.h rope::Params, whose fields are the keys; docs/design.md, "RoPE
// parameters"). The deprecated key model.rope_base still sets theta.

struct ModelConfig {
  int encoder_layers = 6;  // ignored for task lm
  int decoder_layers = 6;  // ignored for tasks mlm and classification; task lm's layer count
  int d_model = 512;
  int n_heads = 8;
  int d_ff = 2048;
  ops::Activation activation = ops::Activation::ReLU;
  // The feed-forward as GLU (nn/feed_forward.h): act(x W_gate) * x W_1, then
  // fc2; with activation silu this is Llama's SwiGLU.
  bool gated_ffn = false;
  // The attention projections and the feed-forward have biases (false:
  // Llama's bias-free layers; norms, embeddings and heads keep theirs).
  bool bias = true;
  // Grouped-query attention: key/value heads, dividing n_heads (0: n_heads;
  // nn/attention.h MultiHeadAttentionOptions::kv_heads).
  int kv_heads = 0;
  double dropout = 0.1;
  double attention_dropout = 0.0;
  double activation_dropout = 0.0;
  NormPlacement norm = NormPlacement::Post;
  NormType norm_type = NormType::LayerNorm;
  double layer_norm_eps = 1e-5;  // the epsilon of either norm type
  nn::PositionKind position = nn::PositionKind::Sinusoidal;
  rope::Params rope;  // model.rope.*; original_max_positions 0: max_positions
  // model.t5.*: T5's relative bias (model.position t5, core/t5_bias.h): the
  // buckets per head, half of them for keys after the query in an encoder,
  // and the distance from which every distance shares the last bucket.
  struct T5Bias {
    int buckets = 32;
    int max_distance = 128;
    bool operator==(const T5Bias&) const = default;
  } t5;
  // model.tupe.*: TUPE (model.position tupe); relative adds T5's bucketed
  // bias with model.t5's settings (TUPE-R), false is TUPE-A.
  struct Tupe {
    bool relative = false;
    bool operator==(const Tupe&) const = default;
  } tupe;
  // model.deberta.*: DeBERTa's relative positions (model.position deberta,
  // core/deberta_bias.h): log buckets (0: none, distances clamped at
  // max_relative_positions) and the reach of the last bucket.
  struct Deberta {
    int position_buckets = 256;
    int max_relative_positions = 512;
    bool operator==(const Deberta&) const = default;
  } deberta;
  int max_positions = 1024;
  // Source, target and output projection share one matrix (task lm: the
  // output projection is the token embedding).
  bool share_embeddings = true;
  bool scale_embeddings = true;  // token embeddings times sqrt(d_model)
  int type_vocab_size = 2;       // mlm segment embeddings (EHR: the visit segment, 0/1)
  // EHR (data.format ehr): an age embedding of this many age ids (at least
  // the prepared data's age_vocab_size); 0 = none.
  int age_vocab_size = 0;
  // table: an embedding row per age id; time2vec: a linear and time2vec_dim
  // periodic learned functions of age id / age_vocab_size, projected to
  // d_model (nn/time2vec.h). Either needs age_vocab_size > 0.
  AgeEmbedding age_embedding = AgeEmbedding::Table;
  int time2vec_dim = 16;
  // token: position t is the t-th token; visit: the visit index (BEHRT; [CLS]
  // shares 0 with the first visit), for sinusoidal, learned and rope; EHR only.
  PositionSource position_source = PositionSource::Token;
  double init_std = 0.02;  // mlm (BERT) init; translation uses the fairseq init
  // Task multilabel: the head's output bias starts at zero (sigmoid 0.5 for
  // every label) or at each label's log-odds log(p / (1 - p)), p its share of
  // the training examples (clipped to [0.5 / N, 1 - 0.5 / N]), so that the
  // first updates need not drive hundreds of rare labels down through the
  // encoder (docs/results.md, issue 42).
  ClassifierBias classifier_bias = ClassifierBias::Zero;
  // Tasks classification and multilabel: cls reads the [CLS] state (BERT's
  // pooler, RoFormer's head; what Hugging Face exports); label_attention
  // gives each output its own attention over the example's tokens, which
  // multi-label EHR prediction needs (docs/results.md, issue 42).
  ClassifierHead classifier_head = ClassifierHead::Cls;
  // A local Hugging Face BERT/RoFormer directory (config.json and
  // model.safetensors) whose weights initialize the encoder of task mlm or
  // classification (and whichever head it holds); "" = random init.
  std::string init_from;
  bool operator==(const ModelConfig&) const = default;
};

struct AttentionConfig {
  nn::AttentionImpl impl = nn::AttentionImpl::Auto;
  // RoPE rotated by the attention core as it loads q and k (rotor's flash
  // core: the CPU twin and the tensor-core CUDA kernel) instead of by the
  // head split; where the chosen core cannot, the split rotates (logged once).
  bool rope_in_kernel = false;
  // What self-attention computes: softmax, or linear attention (RoFormer
  // section 3.3 / 4.4; CPU only so far). Cross-attention is always softmax.
  nn::AttentionKind kind = nn::AttentionKind::Softmax;
  // The linear kind's keys (an error with kind softmax, unless left at their
  // defaults; config/checks.cpp).
  ops::LinearFeatureMap feature_map = ops::LinearFeatureMap::Elu1;
  int features = 0;               // FAVOR+ M; 0: floor(D ln D) of head dim D (even where rotated)
  int64_t feature_redraw = 1000;  // training updates between FAVOR+ draws; 0: never redrawn
  ops::LinearRope linear_rope =
      ops::LinearRope::AfterFeatureMap;  // RoPE after phi (eq. 19) or before
  double linear_eps = 1e-6;              // added to the denominator
  bool operator==(const AttentionConfig&) const = default;
};

struct DataConfig {
  std::string src_lang = "en";
  std::string tgt_lang = "de";
  // Raw text prefix (PREFIX.src_lang / PREFIX.tgt_lang, or for mlm a text
  // file) or a prefix prepared by `rotor prepare`. Required for training.
  std::string train;
  std::string valid;
  std::string test;
  // bytes: UTF-8 bytes (260 ids, 263 for mlm and classification with
  // [MASK] [CLS] [SEP]); no SentencePiece model is trained or read, and the
  // SentencePiece keys below must stay at their defaults. Task lm then reads
  // its text as one byte stream, line breaks included (docs/design.md).
  TokenizerType tokenizer = TokenizerType::SentencePiece;
  std::string spm_model;                 // "" -> OUTPUT_DIR/spm.model, trained when missing
  DataFormat format = DataFormat::Text;  // ehr: train/valid/test are rotor prepare-ehr splits
  int vocab_size = 8000;
  SpmModelType spm_model_type = SpmModelType::Bpe;
  double character_coverage = 1.0;
  int max_len = 256;
  double max_len_ratio = 1.5;
  int64_t max_tokens = 4096;  // per batch, padding counted
  int seq_len = 128;          // mlm block length; lm block length (inputs, targets shifted by one)
  Packing packing = Packing::Stream;  // stream blocks (one example a row) or packed documents
  DocumentSeparator document_separator =
      DocumentSeparator::Line;  // lm's documents: lines or paragraphs
  double mask_prob = 0.15;
  double mask_token_prob = 0.8;
  double random_token_prob = 0.1;
  // Random replacements drawn from the whole vocabulary, specials included
  // (Hugging Face's collator); false keeps them to the maskable ids (data/mlm.h).
  bool random_token_special = false;
  int prefetch = 2;
  // Task classification: GLUE-style TSV files (tab-separated, no quoting).
  // The columns are named by the header row, or by their 0-based index when
  // header is false. sentence2_column "" = single sentences; labels lists
  // the class labels as written in the label column (class i = labels[i]);
  // regression: true reads the label column as a number instead.
  // Task multilabel reads the same layout, its label column a list of
  // labels separated by label_separator (one character; "" in the column:
  // no labels); labels, when given, is its label vocabulary, else the sorted
  // labels of data.train (data/tsv.h).
  std::string sentence1_column = "sentence";
  std::string sentence2_column;
  std::string label_column = "label";
  bool header = true;
  std::vector<std::string> labels;
  bool regression = false;
  std::string label_separator = ",";
  // Task classification as multiple choice (Hugging Face's *ForMultipleChoice):
  // 0 = off; N >= 2 reads label<TAB>context<TAB>choice_1 ... <TAB>choice_N
  // (the label the 0-based index of the right choice; the column keys and
  // data.labels are not read), packs [CLS] context [SEP] choice_i [SEP] for
  // each i and picks by a softmax over the N scores (data/classification.h).
  int choices = 0;
  bool operator==(const DataConfig&) const = default;
};

struct TrainConfig {
  int64_t max_updates = 100000;
  int max_epochs = 0;   // 0 = unlimited
  int batch_size = 64;  // mlm sequences / classification examples per batch
  int update_freq = 1;
  double clip_norm = 0.0;  // 0 = off
  double label_smoothing = 0.1;
  int64_t log_interval = 100;
  int64_t valid_interval = 1000;
  int64_t save_interval = 5000;
  int keep_last = 5;
  int patience = 0;  // 0 = no early stopping
  // What each validation reports besides the loss: bleu and chrf decode the
  // validation set with the decode settings (translation); accuracy is the
  // masked-token accuracy (mlm, always reported there). Task classification
  // always reports what applies: accuracy, f1 (two labels) and mcc, or
  // pearson and spearman (regression); task multilabel always reports ap and
  // auroc (and their micro and macro averages, by name).
  std::vector<ValidMetric> valid_metrics = {ValidMetric::Loss};
  int64_t valid_max_sentences = 0;  // bleu/chrf decode at most this many (0 = all)
  // The metric that picks checkpoints/best and that train.patience follows
  // (lower is better for loss, higher for the others; task multilabel's
  // configs set ap).
  ValidMetric best_metric = ValidMetric::Loss;
  // Initial fp16 loss scale. The loss gradient is per token, not divided by
  // the batch's tokens before the backward (the optimizer does that), so the
  // logit gradients are bounded by the scale itself: 65536 would overflow
  // fp16 (max 65504) at once. 128, as fairseq (which also sums over tokens).
  double loss_scale = 128.0;
  int scale_window = 2000;
  // Updates in a row whose gradients are not finite (skipped) before the run
  // stops with an error instead of going on. fp16 skips a few while its loss
  // scale finds its level (each halves it); a longer run of them means the
  // model diverged.
  int max_nonfinite = 25;
  // Activation checkpointing (nn/recompute.h): each layer keeps only its
  // input in the forward and recomputes its activations in the backward, for
  // memory about a layer's input per layer instead of all its activations,
  // at the cost of a second forward of the layers. Gradients are unchanged.
  bool checkpoint_activations = false;
  bool operator==(const TrainConfig&) const = default;
};

struct OptimConfig {
  OptimizerName name = OptimizerName::Adam;
  double lr = 5e-4;
  std::array<double, 2> betas = {0.9, 0.98};
  double eps = 1e-9;
  double weight_decay = 0.0;
  optim::ScheduleKind schedule = optim::ScheduleKind::InverseSqrt;
  int64_t warmup_updates = 4000;
  double warmup_init_lr = 1e-7;
  double end_lr = 0.0;  // linear decays to end_lr at max_updates
  bool operator==(const OptimConfig&) const = default;
};

struct DecodeConfig {
  int beam = 4;
  double lenpen = 0.6;
  double max_len_a = 1.0;
  int max_len_b = 50;
  bool operator==(const DecodeConfig&) const = default;
};

struct DistConfig {
  double bucket_mb = 25.0;
  bool shard_optimizer = false;
  double timeout_s = 300.0;
  // How the ranks meet (docs/distributed.md): "auto" (mpirun -> MPI, else the
  // launcher's store or one in output_dir), "mpi", or "file:DIR" (a directory
  // every rank reaches).
  std::string rendezvous = "auto";
  bool operator==(const DistConfig&) const = default;
};

// Where each key of a loaded config came from: a line of its file or a --set
// argument, so that a rule checked after loading (validate()) names it as the
// loader names a bad value. Not part of the config's value: configs compare
// equal whatever their origins, and dump_config leaves them out. A config
// built in code has none.
class KeyOrigins {
 public:
  struct Data;  // config/loading.h
  KeyOrigins() = default;
  explicit KeyOrigins(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  // The origin of the first of `keys` that was written: "--set KEY=VALUE" or
  // "FILE:LINE"; the file alone when none was (all defaults); "" for a config
  // built in code.
  std::string locate(const std::vector<std::string>& keys) const;
  // Whether the file or a --set wrote `key` ("train.best_metric") or a
  // section holding it; false for a config built in code.
  bool written(const std::string& key) const;
  friend bool operator==(const KeyOrigins&, const KeyOrigins&) { return true; }

 private:
  std::shared_ptr<const Data> data_;
};

struct Config {
  Task task;  // the first registered: translation
  std::string output_dir = "runs/default";
  int64_t seed = 1;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N (resolve_device)
  Precision precision = Precision::FP32;
  LogLevel log_level = LogLevel::Info;
  ModelConfig model;
  AttentionConfig attention;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  DecodeConfig decode;
  DistConfig dist;
  KeyOrigins origins;  // set by load_config; not a key
  bool operator==(const Config&) const = default;
};

// Reads the YAML file at `path`, applies `overrides` ("a.b=c", as given to
// --set; the value is parsed as YAML, so lists work: "optim.betas=[0.9,0.999]";
// a list element is "optim.betas.1=0.999" or "optim.betas[1]=0.999"), converts
// and validates. Missing keys take their defaults.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The same from YAML text; `origin` names it in messages.
Config load_config_from_string(const std::string& text, const std::string& origin = "<string>",
                               const std::vector<std::string>& overrides = {});

// The fully resolved config as YAML (every key, defaults included), which
// load_config_from_string reads back to an equal Config.
std::string dump_config(const Config& config);
// The first line of dump_config's text (a run's config.yaml starts with it).
inline constexpr const char* kResolvedConfigHeader =
    "# rotor config, fully resolved (every key, defaults included)";

// Every rule that involves more than one key or the task (n_heads divides
// d_model, rope needs an even head size, the metrics a task reports, the
// rules of each task's row in config/tasks.h, ...). load_config runs them, so
// `rotor train` and `--dump-config` refuse a config before anything is
// written; call it again after changing a Config in code. Throws rotor::Error
// "LOCATION: KEY: what" (LOCATION as KeyOrigins::locate), or "KEY: what" for
// a config built in code.
void validate(const Config& config);

// What training needs beyond validate(): output_dir and the data keys the
// task requires (config/tasks.h).
void validate_for_training(const Config& config);

}  // namespace rotor
