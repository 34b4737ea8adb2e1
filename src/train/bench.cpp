#include "train/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "config/tasks.h"
#include "core/allocator.h"
#include "core/cuda_context.h"
#include "core/error.h"
#include "core/json_io.h"
#include "core/logging.h"
#include "nn/attention_plan.h"
#include "nn/context.h"
#include "nn/parameters.h"
#include "nn/position.h"
#include "tasks/data.h"
#include "tasks/task.h"
#include "train/scheduler.h"
#include "train/session.h"
#include "train/step.h"

namespace rotor::train {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t max_rss_bytes() {
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

// The activation peak (BenchResult::activation_peak_bytes): the allocator's
// high-water mark is reset where each micro-batch's forward begins and read
// where its backward ends; the run's overall peak is kept across the resets.
struct MemoryWatch {
  explicit MemoryWatch(Device d) : device(d) {}
  void forward_begins() {
    peak = std::max(peak, peak_bytes(device));
    start = bytes_in_use(device);
    base = std::max(base, start);
    reset_peak_bytes(device);
  }
  void backward_ends() {
    const size_t p = peak_bytes(device);
    peak = std::max(peak, p);
    activations = std::max(activations, p > start ? p - start : 0);
  }
  size_t overall() const { return std::max(peak, peak_bytes(device)); }

  Device device;
  size_t peak = 0, activations = 0, base = 0, start = 0;
};

// Splits wall-clock time into phases at the marks of the update step and
// the task. With `sync`, every mark first waits for the device, so that a
// phase's GPU work is charged to that phase. With a `memory` watch, each
// micro-batch's activation peak is taken too.
class PhaseClock : public StepPhases {
 public:
  PhaseClock(Device device, bool sync, std::vector<BenchBatch>* batches,
             MemoryWatch* memory = nullptr)
      : device_(device), sync_(sync), batches_(batches), memory_(memory) {}

  void update_begins() override {
    wait();
    last_ = Clock::now();
  }
  void micro_batch_begins() override { lap(phases.optimizer); }  // zeroing the gradients
  void forward_begins(int64_t sequences, int64_t src_len, int64_t tgt_len) override {
    lap(phases.data);
    batch_ = BenchBatch{sequences, src_len, tgt_len, 0, 0};
    ++marks_;
    if (memory_) memory_->forward_begins();
  }
  void backward_begins() override {
    lap(phases.forward);
    ++marks_;
  }
  void micro_batch_ends(const tasks::TaskSums& s) override {
    lap(phases.backward);
    if (memory_) memory_->backward_ends();
    if (marks_ != 2) ROTOR_FAIL("the task does not mark its phases (nn::PhaseHook)");
    marks_ = 0;
    if (batches_) {
      batch_.tokens = s.tokens;
      batch_.all_tokens = s.all_tokens;
      batches_->push_back(batch_);
    }
  }
  void optimizer_ends() override { lap(phases.optimizer); }

  BenchPhases phases;  // accumulated ms

 private:
  void lap(double& into) {
    wait();
    const auto now = Clock::now();
    into += ms_between(last_, now);
    last_ = now;
  }
  void wait() const {
    if (sync_ && device_.is_cuda()) cuda::synchronize(device_.index);
  }
  Device device_;
  bool sync_;
  std::vector<BenchBatch>* batches_;
  MemoryWatch* memory_;
  Clock::time_point last_;
  BenchBatch batch_;  // the shape of the current micro-batch
  int64_t marks_ = 0;
};

}  // namespace

BenchResult run_train_bench(const Config& c, const BenchOptions& opts) {
  if (opts.steps < 1) ROTOR_FAIL("--steps must be at least 1, got {}", opts.steps);
  if (opts.warmup < 0) ROTOR_FAIL("--warmup must be 0 or more, got {}", opts.warmup);
  validate_for_training(c);
  tasks::check_data(c);  // fail before preparing anything
  // The run `rotor train` makes (train/session.h): this rank's device, the
  // communicator, the task, the initialization (model.init_from included),
  // the precision policy and the very update step. A plain bench runs alone
  // (the local backend); under a launcher it joins the job, so that `rotor
  // launch -n 1 -- bench train` measures the data-parallel path's cost at
  // world size 1.
  Session session(c);
  session.build();
  const Device device = session.device();
  nn::ParameterStore& store = session.params();
  UpdateStep& step = session.step();
  const Scheduler& schedule = session.scheduler();
  tasks::TrainingTask& task = session.task();
  checkpoint::TrainerState state;

  BenchResult r;
  r.task = std::string(to_string(c.task));
  r.device = device.str();
  if (device.is_cuda())
    for (const auto& d : cuda::devices())
      if (d.index == device.index) r.device_name = d.name;
  r.precision = std::string(to_string(c.precision));
  r.parameters = store.numel();
  r.vocab_size = task.vocab_size();
  r.steps = opts.steps;
  r.warmup = opts.warmup;
  r.update_freq = c.train.update_freq;
  r.phase_sync = device.is_cuda();
  r.checkpoint_activations = c.train.checkpoint_activations;

  // The bench times its --steps whatever train.max_updates says; the data
  // must last for them.
  auto update = [&](PhaseClock& clock) {
    if (schedule.epochs_done(task.position().epoch))
      ROTOR_FAIL("train.max_epochs ends the data before the bench's updates");
    const UpdateResult u = step.run(state, &clock);
    if (schedule.after_update(u.sums.tokens) == StopReason::NoTokens)
      ROTOR_FAIL("an update of the bench found no tokens to train on");
    return u;
  };

  reset_peak_bytes(device);
  {
    PhaseClock warm(device, false, nullptr);
    for (int64_t i = 0; i < opts.warmup; ++i) update(warm);
  }

  // Throughput: no synchronization inside an update (on the CPU there is
  // nothing to synchronize, so this pass gives the phases too).
  MemoryWatch memory(device);
  PhaseClock clock(device, false, &r.batches, &memory);
  std::vector<double> step_ms;
  if (device.is_cuda()) cuda::synchronize(device.index);
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < opts.steps; ++i) {
    const auto s0 = Clock::now();
    const UpdateResult u = update(clock);
    r.tokens += u.sums.tokens;
    r.all_tokens += u.sums.all_tokens;
    r.losses.push_back(u.sums.loss / static_cast<double>(u.sums.tokens));
    step_ms.push_back(ms_between(s0, Clock::now()));
  }
  if (device.is_cuda()) cuda::synchronize(device.index);
  r.seconds = ms_between(t0, Clock::now()) / 1000.0;
  r.step_ms = r.seconds * 1000.0 / static_cast<double>(opts.steps);

  BenchPhases phases = clock.phases;
  if (r.phase_sync) {
    // The phase split: the same number of updates, the device synchronized
    // at every mark.
    PhaseClock synced(device, true, nullptr, &memory);
    step_ms.clear();
    for (int64_t i = 0; i < opts.steps; ++i) {
      const double before = synced.phases.total();
      update(synced);
      step_ms.push_back(synced.phases.total() - before);
    }
    phases = synced.phases;
  }
  const double n = static_cast<double>(opts.steps);
  r.phases_ms = {phases.data / n, phases.forward / n, phases.backward / n, phases.optimizer / n};
  r.phase_step_ms = r.phases_ms.total();
  r.step_ms_min = *std::min_element(step_ms.begin(), step_ms.end());
  r.step_ms_max = *std::max_element(step_ms.begin(), step_ms.end());
  if (opts.profile) {
    // Each op's self time, in a pass of its own after the measured ones.
    PhaseClock profiled(device, false, nullptr);
    profile::take();  // nothing from before
    // On a GPU each op waits for its kernels (the times are then the
    // kernels', one op at a time); the profiled update is that much slower.
    static int sync_device = 0;
    sync_device = device.index;
    if (device.is_cuda()) profile::set_sync(+[] { cuda::synchronize(sync_device); });
    profile::set_enabled(true);
    const auto p0 = Clock::now();
    for (int64_t i = 0; i < opts.steps; ++i) update(profiled);
    if (device.is_cuda()) cuda::synchronize(device.index);
    r.profile_step_ms = ms_between(p0, Clock::now()) / n;
    profile::set_enabled(false);
    profile::set_sync(nullptr);
    r.profile = profile::take();
  }
  r.peak_bytes = memory.overall();
  r.activation_peak_bytes = memory.activations;
  r.base_bytes = memory.base;
  r.max_rss_bytes = max_rss_bytes();
  return r;
}

CheckpointComparison run_checkpoint_comparison(const Config& c, const BenchOptions& opts) {
  CheckpointComparison out;
  Config off = c, on = c;
  off.train.checkpoint_activations = false;
  on.train.checkpoint_activations = true;
  out.off = run_train_bench(off, opts);
  out.on = run_train_bench(on, opts);
  return out;
}

namespace {

double mib(size_t bytes) {
  return static_cast<double>(bytes) / 1048576.0;
}

double percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

// What the tokens of a bench line count (config/tasks.h TaskSpec).
const char* token_kind(const std::string& task) {
  const std::optional<Task> t = task_kind(task);
  return t ? (*t)->loss_tokens : "target";
}

const char* all_kind(const std::string& task) {
  const std::optional<Task> t = task_kind(task);
  return t ? (*t)->read_tokens : "source + target";
}

// The token slots of the timed micro-batches (rows x padded length, source
// and target), and the share of them padding fills: what a batch without
// padding (packing, variable-length attention) would not compute.
int64_t padded_slots(const BenchResult& r) {
  int64_t slots = 0;
  for (const auto& b : r.batches) slots += b.sequences * (b.src_len + b.tgt_len);
  return slots;
}

double padding_fraction(const BenchResult& r) {
  const int64_t slots = padded_slots(r);
  int64_t real = 0;
  for (const auto& b : r.batches) real += b.all_tokens;
  return slots > 0 ? std::max(0.0, 1.0 - static_cast<double>(real) / static_cast<double>(slots))
                   : 0.0;
}

// The --profile table: per update, each op's calls, self time, its share of
// the profiled update, and the rate of the FLOPs and bytes it declares.
std::string format_profile(const BenchResult& r) {
  const double n = static_cast<double>(std::max<int64_t>(r.steps, 1));
  double ops_ms = 0;
  for (const auto& row : r.profile) ops_ms += row.seconds * 1e3 / n;
  std::string out = fmt::format(
      "profile: {} more updates, each op timed: {:.2f} ms per update, {:.2f} ms of it in ops "
      "(self times; the rest is the model's own code between them){}\n",
      r.steps, r.profile_step_ms, ops_ms,
      r.device.rfind("cuda", 0) == 0 ? "; on a GPU these are launch times, not kernel times" : "");
  out += fmt::format("  {:<28} {:>9} {:>10} {:>6} {:>10} {:>9}\n", "op", "calls/upd", "ms/update",
                     "%", "GFLOP/s", "GB/s");
  for (const auto& row : r.profile) {
    const double ms = row.seconds * 1e3 / n;
    const std::string gflops = row.flops > 0 && row.seconds > 0
                                   ? fmt::format("{:.1f}", row.flops / row.seconds / 1e9)
                                   : "";
    const std::string gbs = row.bytes > 0 && row.seconds > 0
                                ? fmt::format("{:.1f}", row.bytes / row.seconds / 1e9)
                                : "";
    out += fmt::format("  {:<28} {:>9.1f} {:>10.3f} {:>5.1f}% {:>10} {:>9}\n", row.op,
                       static_cast<double>(row.calls) / n, ms, percent(ms, r.profile_step_ms),
                       gflops, gbs);
  }
  return out;
}

}  // namespace

std::string format_bench(const BenchResult& r, const std::string& config_path) {
  std::string out;
  const std::string where =
      r.device_name.empty() ? r.device : r.device + " (" + r.device_name + ")";
  out += fmt::format("rotor bench train {}: task {} on {}, precision {}\n", config_path, r.task,
                     where, r.precision);
  out += fmt::format(
      "model: {} parameters, vocabulary {}; {} warmup + {} timed updates of {} micro-batch(es)\n",
      r.parameters, r.vocab_size, r.warmup, r.steps, r.update_freq);
  if (r.phase_sync)
    out +=
        "timing: tokens/s and step time from updates without synchronization; the phase split "
        "from as many more updates with the device synchronized at every phase boundary (the "
        "bench only: training never synchronizes inside an update)\n";
  else
    out +=
        "timing: wall clock; phases end at the marks the task places (no device to "
        "synchronize on the CPU)\n";
  const double seqs = [&] {
    double s = 0;
    for (const auto& b : r.batches) s += static_cast<double>(b.sequences);
    return s / static_cast<double>(std::max<int64_t>(r.steps, 1));
  }();
  out += fmt::format("throughput: {:.0f} {} tokens/s | {:.0f} tokens/s ({})\n", r.tokens_per_s(),
                     token_kind(r.task), r.all_tokens_per_s(), all_kind(r.task));
  out +=
      fmt::format("per update: {:.1f} sequences, {:.0f} {} tokens, {:.0f} tokens\n", seqs,
                  static_cast<double>(r.tokens) / static_cast<double>(r.steps), token_kind(r.task),
                  static_cast<double>(r.all_tokens) / static_cast<double>(r.steps));
  out += fmt::format(
      "padding: {:.1f}% of the {:.0f} token slots per update (rows x padded length) hold no "
      "token; tokens/s above count real tokens\n",
      100.0 * padding_fraction(r),
      static_cast<double>(padded_slots(r)) / static_cast<double>(std::max<int64_t>(r.steps, 1)));
  out += fmt::format("step: {:.2f} ms mean (min {:.2f}, max {:.2f}{})\n", r.step_ms, r.step_ms_min,
                     r.step_ms_max, r.phase_sync ? ", synchronized" : "");
  const double whole = r.phase_step_ms;
  auto line = [&](const char* name, double ms) {
    out += fmt::format("  {:<10} {:9.2f} ms {:5.1f}%\n", name, ms, percent(ms, whole));
  };
  line("data", r.phases_ms.data);
  line("forward", r.phases_ms.forward);
  line("backward", r.phases_ms.backward);
  line("optimizer", r.phases_ms.optimizer);
  if (r.phase_sync) out += fmt::format("  {:<10} {:9.2f} ms (synchronized)\n", "total", whole);
  out += fmt::format(
      "memory: peak {:.1f} MiB held by rotor's {} allocator | process max RSS {:.1f} MiB\n",
      mib(r.peak_bytes), r.device.rfind("cuda", 0) == 0 ? "CUDA pool" : "CPU",
      mib(r.max_rss_bytes));
  out += fmt::format(
      "activations: peak {:.1f} MiB in a micro-batch's forward and backward, above the {:.1f} MiB "
      "held when it began (train.checkpoint_activations {})\n",
      mib(r.activation_peak_bytes), mib(r.base_bytes), r.checkpoint_activations ? "on" : "off");
  if (!r.profile.empty()) out += format_profile(r);
  return out;
}

std::string format_checkpoint_comparison(const CheckpointComparison& c,
                                         const std::string& config_path) {
  std::string out = "--- train.checkpoint_activations: false\n";
  out += format_bench(c.off, config_path);
  out += "--- train.checkpoint_activations: true\n";
  out += format_bench(c.on, config_path);
  const auto change = [](double on, double off) {
    return off > 0 ? fmt::format("{:+.1f}%", 100.0 * (on - off) / off) : std::string("n/a");
  };
  out += "--- activation checkpointing (off -> on)\n";
  out += fmt::format("  activation peak  {:9.1f} MiB -> {:9.1f} MiB ({})\n",
                     mib(c.off.activation_peak_bytes), mib(c.on.activation_peak_bytes),
                     change(static_cast<double>(c.on.activation_peak_bytes),
                            static_cast<double>(c.off.activation_peak_bytes)));
  out += fmt::format(
      "  peak memory      {:9.1f} MiB -> {:9.1f} MiB ({})\n", mib(c.off.peak_bytes),
      mib(c.on.peak_bytes),
      change(static_cast<double>(c.on.peak_bytes), static_cast<double>(c.off.peak_bytes)));
  out += fmt::format("  update time      {:9.2f} ms  -> {:9.2f} ms  ({})\n", c.off.step_ms,
                     c.on.step_ms, change(c.on.step_ms, c.off.step_ms));
  out += fmt::format("  backward         {:9.2f} ms  -> {:9.2f} ms  ({})\n",
                     c.off.phases_ms.backward, c.on.phases_ms.backward,
                     change(c.on.phases_ms.backward, c.off.phases_ms.backward));
  return out;
}

nlohmann::ordered_json checkpoint_comparison_json(const CheckpointComparison& c,
                                                  const Config& config,
                                                  const std::string& config_path) {
  Config off = config, on = config;
  off.train.checkpoint_activations = false;
  on.train.checkpoint_activations = true;
  json_io::Json out = json_io::Json::object();
  out["compare"] = "train.checkpoint_activations";
  out["off"] = bench_json(c.off, off, config_path);
  out["on"] = bench_json(c.on, on, config_path);
  return out;
}

nlohmann::ordered_json bench_json(const BenchResult& r, const Config& c,
                                  const std::string& config_path) {
  using Value = json_io::Json;
  const auto& m = c.model;
  Value model = Value::object();
  // The layers the task's model has (config/tasks.h): the causal LM's are
  // counted by model.decoder_layers, the BERT/RoFormer encoder's by
  // model.encoder_layers.
  const ModelFamily family = task_spec(c.task).model;
  model["encoder_layers"] = family == ModelFamily::Decoder ? 0 : m.encoder_layers;
  model["decoder_layers"] = family == ModelFamily::BertEncoder ? 0 : m.decoder_layers;
  model["d_model"] = m.d_model;
  model["n_heads"] = m.n_heads;
  model["d_ff"] = m.d_ff;
  model["vocab_size"] = r.vocab_size;
  model["activation"] = to_string(m.activation);
  model["norm"] = to_string(m.norm);
  model["position"] = to_string(m.position);
  model["rope"]["theta"] = m.rope.theta;
  model["rope"]["fraction"] = m.rope.fraction;
  model["rope"]["layout"] = to_string(m.rope.layout);
  model["rope"]["scaling"] = to_string(m.rope.scaling);
  model["rope"]["factor"] = m.rope.factor;
  model["rope"]["original_max_positions"] = m.rope.original_max_positions;
  model["max_positions"] = m.max_positions;
  model["share_embeddings"] = m.share_embeddings;
  model["scale_embeddings"] = m.scale_embeddings;
  model["type_vocab_size"] = m.type_vocab_size;
  model["dropout"] = m.dropout;
  model["attention_dropout"] = m.attention_dropout;
  model["activation_dropout"] = m.activation_dropout;
  model["layer_norm_eps"] = m.layer_norm_eps;
  // What self-attention computes (the peers pick their twin by it):
  // attention.kind, and for linear attention its feature map, the feature
  // count M the layers use (nn::linear_feature_count), the redraw interval,
  // where RoPE goes and the denominator's eps.
  model["attention"]["kind"] = std::string(c.attention.kind.name());
  if (c.attention.kind != nn::AttentionKind::Softmax) {
    nn::LinearKindOptions l;
    l.feature_map = c.attention.feature_map;
    l.features = c.attention.features;
    const ops::LinearRope placement =
        m.position->rotates_qk ? c.attention.linear_rope : ops::LinearRope::None;
    model["attention"]["feature_map"] = to_string(c.attention.feature_map);
    model["attention"]["features"] = nn::linear_feature_count(l, m.d_model / m.n_heads, placement);
    model["attention"]["feature_redraw"] = c.attention.feature_redraw;
    model["attention"]["linear_rope"] = to_string(c.attention.linear_rope);
    model["attention"]["linear_eps"] = c.attention.linear_eps;
  }

  Value train = Value::object();
  train["update_freq"] = r.update_freq;
  train["label_smoothing"] = c.task->label_smoothing ? c.train.label_smoothing : 0.0;
  train["clip_norm"] = c.train.clip_norm;
  train["max_tokens"] = c.data.max_tokens;
  train["batch_size"] = c.train.batch_size;
  train["seq_len"] = c.data.seq_len;
  train["mask_prob"] = c.data.mask_prob;
  train["optimizer"] = to_string(c.optim.name);
  train["betas"] = Value::array({c.optim.betas[0], c.optim.betas[1]});
  train["eps"] = c.optim.eps;
  train["weight_decay"] = c.optim.weight_decay;
  train["lr"] = c.optim.lr;
  train["checkpoint_activations"] = c.train.checkpoint_activations;

  Value phases = Value::object();
  auto phase = [&](const char* name, double ms) {
    Value p = Value::object();
    p["ms"] = ms;
    p["percent"] = percent(ms, r.phase_step_ms);
    phases[name] = std::move(p);
  };
  phase("data", r.phases_ms.data);
  phase("forward", r.phases_ms.forward);
  phase("backward", r.phases_ms.backward);
  phase("optimizer", r.phases_ms.optimizer);

  Value batches = Value::array();
  for (const auto& b : r.batches) {
    Value v = Value::object();
    v["sequences"] = b.sequences;
    v["src_len"] = b.src_len;
    v["tgt_len"] = b.tgt_len;
    v["tokens"] = b.tokens;
    v["all_tokens"] = b.all_tokens;
    batches.push_back(std::move(v));
  }

  Value out = Value::object();
  out["producer"] = std::string("rotor ") + ROTOR_VERSION;
  out["config"] = config_path;
  out["task"] = r.task;
  out["device"] = r.device;
  out["device_name"] = r.device_name;
  out["precision"] = r.precision;
  out["parameters"] = r.parameters;
  out["warmup"] = r.warmup;
  out["steps"] = r.steps;
  out["phase_sync"] = r.phase_sync;
  out["seconds"] = r.seconds;
  out["tokens"] = r.tokens;
  out["all_tokens"] = r.all_tokens;
  out["tokens_per_s"] = r.tokens_per_s();
  out["all_tokens_per_s"] = r.all_tokens_per_s();
  out["padded_slots"] = padded_slots(r);
  out["padding_fraction"] = padding_fraction(r);
  out["token_kind"] = token_kind(r.task);
  out["step_ms"] = r.step_ms;
  out["step_ms_min"] = r.step_ms_min;
  out["step_ms_max"] = r.step_ms_max;
  out["phase_step_ms"] = r.phase_step_ms;
  out["phases"] = std::move(phases);
  out["peak_bytes"] = static_cast<int64_t>(r.peak_bytes);
  out["activation_peak_bytes"] = static_cast<int64_t>(r.activation_peak_bytes);
  out["base_bytes"] = static_cast<int64_t>(r.base_bytes);
  out["peak_bytes_source"] =
      r.device.rfind("cuda", 0) == 0 ? "rotor CUDA pool allocator" : "rotor CPU allocator";
  out["max_rss_bytes"] = static_cast<int64_t>(r.max_rss_bytes);
  out["model"] = std::move(model);
  out["train"] = std::move(train);
  out["batches"] = std::move(batches);
  out["losses"] = r.losses;  // per timed update, per token: the same as `rotor train` logs
  if (!r.profile.empty()) {
    Value rows = Value::array();
    for (const auto& row : r.profile)
      rows.push_back({{"op", row.op},
                      {"calls", row.calls},
                      {"seconds", row.seconds},
                      {"flops", row.flops},
                      {"bytes", row.bytes}});
    out["profile"] = {{"updates", r.steps}, {"step_ms", r.profile_step_ms}, {"ops", rows}};
  }
  return out;
}

}  // namespace rotor::train
