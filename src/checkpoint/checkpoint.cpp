#include "checkpoint/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "core/io.h"
#include "core/json_io.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

constexpr const char* kStepPrefix = "step_";
constexpr const char* kStateFormat = "rotor-trainer-state-1";

// Doubles (the loss scale above all) are written as text that reads back
// bitwise, so that a resumed run continues exactly.
std::string state_json(const TrainerState& s) {
  json_io::Json v = json_io::Json::object();
  v["format"] = kStateFormat;
  v["step"] = s.step;
  v["micro_step"] = s.micro_step;
  v["world_size"] = s.world_size;
  v["epoch"] = s.position.epoch;
  v["batch_index"] = s.position.batch_index;
  v["loss_scale"] = s.loss_scale;
  v["loss_scale_good_steps"] = s.loss_scale_good_steps;
  v["skipped_steps"] = s.skipped_steps;
  v["has_best"] = s.has_best;
  v["best_metric"] = s.best_metric;
  v["best_score"] = s.best_score;
  v["best_step"] = s.best_step;
  v["bad_validations"] = s.bad_validations;
  v["train_seconds"] = s.train_seconds;
  return v.dump(2) + "\n";
}

// Points OUTPUT_DIR/checkpoint_last at checkpoints/<target_name>: a new
// symlink under a temporary name, renamed over the old one (atomic).
void point_last(const std::string& output_dir, const std::string& target_name) {
  const fs::path link = fs::path(output_dir) / "checkpoint_last";
  const fs::path tmp =
      fs::path(output_dir) / (".checkpoint_last.tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(fs::path("checkpoints") / target_name, tmp);
  fs::rename(tmp, link);
  fsync_directory(output_dir);
}

// Testing knob: ROTOR_TEST_KILL_AT=<point> kills the process with SIGKILL at
// that point of a save ("published": the step directory renamed into place,
// checkpoint_last not yet repointed; "pruning": a directory renamed away,
// not yet deleted), as a crash there would (tests/cpu/test_bad_inputs.cpp).
void fault_point(const char* point) {
  if (const char* v = std::getenv("ROTOR_TEST_KILL_AT"); v && std::strcmp(v, point) == 0)
    ::kill(::getpid(), SIGKILL);
}

bool is_temporary(const std::string& name) {
  return name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos;
}

}  // namespace

void save_weights(const std::string& path, const nn::ParameterStore& params,
                  const std::string& config_yaml) {
  NamedTensors tensors;
  for (const auto& p : params.parameters()) tensors.emplace_back(p->name, p->value);
  Metadata meta{{"format", "pt"}, {"producer", std::string("rotor ") + ROTOR_VERSION}};
  if (!config_yaml.empty()) meta.emplace_back("rotor_config", config_yaml);
  save_safetensors(path, tensors, meta);
}

int64_t checkpoint_step(const std::string& name) {
  if (name.rfind(kStepPrefix, 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return -1;
  int64_t n = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& output_dir) {
  std::vector<std::pair<int64_t, std::string>> all;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(output_dir) / "checkpoints", ec)) {
    const int64_t step = checkpoint_step(e.path().filename().string());
    if (step >= 0 && e.is_directory(ec) && fs::exists(e.path() / "model.safetensors", ec))
      all.emplace_back(step, e.path().string());
  }
  std::sort(all.begin(), all.end());
  return all;
}

std::string latest_checkpoint(const std::string& output_dir) {
  const auto all = list_checkpoints(output_dir);
  return all.empty() ? std::string() : all.back().second;
}

// A writer killed mid-save or mid-prune leaves its temporaries
// ("step_N.tmp-<pid>", "step_N.old-<pid>", ".checkpoint_last.tmp-<pid>"):
// any such name is a dead writer's, since a run directory has one writer.
void remove_stale_temporaries(const std::string& output_dir) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(fs::path(output_dir) / "checkpoints", ec))
    if (is_temporary(e.path().filename().string())) stale.push_back(e.path());
  for (const auto& e : fs::directory_iterator(output_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".checkpoint_last", 0) == 0 && is_temporary(name)) stale.push_back(e.path());
  }
  for (const auto& p : stale) fs::remove_all(p, ec);
}

namespace {

// A checkpoint directory's files, written into `tmp` (publish_directory).
void write_checkpoint_files(const std::string& tmp, const CheckpointContents& c) {
  save_weights(tmp + "/model.safetensors", *c.params, c.config_yaml);
  if (c.optimizer) {
    auto* opt = const_cast<optim::Optimizer*>(c.optimizer);
    save_safetensors(tmp + "/optimizer.safetensors",
                     {{"exp_avg", opt->exp_avg()}, {"exp_avg_sq", opt->exp_avg_sq()}},
                     {{"optimizer_steps", std::to_string(opt->steps())}});
  }
  atomic_write_file(tmp + "/trainer_state.json", state_json(c.state));
  atomic_write_file(tmp + "/config.yaml", c.config_yaml);
  if (!c.spm_model.empty()) atomic_write_file(tmp + "/spm.model", read_file(c.spm_model));
  for (const auto& [name, contents] : c.files) atomic_write_file(tmp + "/" + name, contents);
}

}  // namespace

std::string save_checkpoint(const std::string& output_dir, const CheckpointContents& c,
                            int keep_last) {
  ROTOR_CHECK(c.params != nullptr, "checkpoint without parameters");
  fs::path ckpt_root = fs::path(output_dir) / "checkpoints";
  ensure_directory(ckpt_root.string());
  const std::string name = kStepPrefix + std::to_string(c.state.step);
  const fs::path dir = ckpt_root / name;
  publish_directory(dir.string(), [&](const std::string& tmp) { write_checkpoint_files(tmp, c); });
  fault_point("published");
  point_last(output_dir, name);
  remove_stale_temporaries(output_dir);
  // Keep the newest keep_last step directories (the newest always). A
  // directory is renamed away (atomic) before it is deleted, so a kill in
  // between leaves a temporary that the next start removes, never a step_N
  // directory without its files.
  const auto all = list_checkpoints(output_dir);
  const size_t keep = static_cast<size_t>(std::max(keep_last, 1));
  for (size_t i = 0; i + keep < all.size(); ++i) {
    const fs::path victim(all[i].second);
    if (victim.filename() == name) continue;
    const fs::path doomed =
        ckpt_root / (victim.filename().string() + ".old-" + std::to_string(::getpid()));
    // A reader holds it (HeldCheckpoint): it stays until a later save.
    const int fd = ::open(victim.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      continue;
    }
    std::error_code ec;
    fs::rename(victim, doomed, ec);
    if (fd >= 0) ::close(fd);
    if (ec) ROTOR_FAIL("cannot prune {}: {}", victim.string(), ec.message());
    fault_point("pruning");
    fs::remove_all(doomed, ec);
  }
  return dir.string();
}

std::string save_best(const std::string& output_dir, const CheckpointContents& c) {
  ROTOR_CHECK(c.params != nullptr, "checkpoint without parameters");
  const fs::path dir = fs::path(output_dir) / "checkpoints" / "best";
  ensure_directory(dir.parent_path().string());
  CheckpointContents weights_only = c;
  weights_only.optimizer = nullptr;  // the best model is for decoding, not for resuming
  publish_directory(dir.string(),
                    [&](const std::string& tmp) { write_checkpoint_files(tmp, weights_only); });
  return dir.string();
}

std::string resolve_checkpoint(const std::string& path) {
  if (path.empty()) ROTOR_FAIL("no checkpoint given (an empty path)");
  fs::path p(path);
  std::error_code ec;
  if (fs::exists(p / "model.safetensors", ec)) return p.string();
  if (fs::exists(p / "checkpoint_last" / "model.safetensors", ec))
    return fs::canonical(p / "checkpoint_last").string();
  const std::string best = ":best";
  if (!fs::exists(p, ec) && path.size() > best.size() &&
      path.compare(path.size() - best.size(), best.size(), best) == 0) {
    const fs::path run(path.substr(0, path.size() - best.size()));
    if (fs::exists(run / "checkpoints" / "best" / "model.safetensors", ec))
      return (run / "checkpoints" / "best").string();
    ROTOR_FAIL(
        "{}: {} holds no best checkpoint (a run keeps checkpoints/best once a "
        "validation scored)",
        path, run.string());
  }
  if (!fs::exists(p, ec)) ROTOR_FAIL("{}: no such checkpoint or run directory", path);
  ROTOR_FAIL("{}: no checkpoint there (expected model.safetensors or checkpoint_last/)", path);
}

HeldCheckpoint::HeldCheckpoint(const std::string& path) {
  // A run that prunes between our resolution and our lock can do so a few
  // times in a row only if it saves that often: a handful of tries is plenty.
  for (int attempt = 0;; ++attempt) {
    // A run saving as we resolve its checkpoint_last can prune the directory
    // the link named a moment before: resolve again.
    try {
      dir_ = resolve_checkpoint(path);
    } catch (const Error&) {
      if (attempt >= 5) throw;
      continue;
    } catch (const fs::filesystem_error&) {
      if (attempt >= 5) throw;
      continue;
    }
    fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ >= 0 && ::flock(fd_, LOCK_SH) == 0) {
      // Still the directory the path names, and still whole?
      struct stat held {
      }, now{};
      std::error_code ec;
      if (::fstat(fd_, &held) == 0 && ::stat(dir_.c_str(), &now) == 0 &&
          held.st_ino == now.st_ino && held.st_dev == now.st_dev &&
          fs::exists(fs::path(dir_) / "model.safetensors", ec))
        return;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (attempt >= 5)
      ROTOR_FAIL("{}: the checkpoint {} kept vanishing while it was opened (a run pruning it)",
                 path, dir_);
  }
}

HeldCheckpoint::~HeldCheckpoint() {
  if (fd_ >= 0) ::close(fd_);  // releases the shared lock
}

void load_weights(const std::string& dir, nn::ParameterStore& params) {
  SafetensorsFile file(dir + "/model.safetensors");
  for (const auto& p : params.parameters()) {
    const SafetensorsEntry* e = file.find(p->name);
    if (!e) ROTOR_FAIL("{}/model.safetensors: parameter {} is missing", dir, p->name);
    if (e->shape != p->shape)
      ROTOR_FAIL("{}/model.safetensors: {} has shape {}, the model expects {}", dir, p->name,
                 shape_str(e->shape), shape_str(p->shape));
    if (e->dtype != DType::F32)
      ROTOR_FAIL("{}/model.safetensors: {} is {}, expected f32", dir, p->name,
                 dtype_name(e->dtype));
    Tensor w = file.load(p->name);
    const float* x = w.data<float>();
    for (int64_t i = 0, n = w.numel(); i < n; ++i)
      if (!std::isfinite(x[i]))
        ROTOR_FAIL(
            "{}/model.safetensors: {} holds a non-finite value ({} at element {}); the "
            "run that saved it diverged",
            dir, p->name, x[i], i);
    p->value.copy_from(w);
  }
}

void load_optimizer(const std::string& dir, optim::Optimizer& opt) {
  const std::string path = dir + "/optimizer.safetensors";
  SafetensorsFile file(path);
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    Tensor& dst = std::string(name) == "exp_avg" ? opt.exp_avg() : opt.exp_avg_sq();
    const SafetensorsEntry& e = file.entry(name);
    if (e.shape != dst.shape() || e.dtype != DType::F32)
      ROTOR_FAIL("{}: {} has shape {}, expected {}", path, name, shape_str(e.shape),
                 shape_str(dst.shape()));
    dst.copy_from(file.load(name));
  }
  try {
    opt.set_steps(std::stoll(file.metadata_value("optimizer_steps", "0")));
  } catch (const std::exception&) {
    ROTOR_FAIL("{}: bad optimizer_steps metadata", path);
  }
}

TrainerState load_trainer_state(const std::string& dir) {
  const std::string path = dir + "/trainer_state.json";
  // Errors name the file and the key ('PATH: missing key "step"').
  const json_io::Json v = json_io::load(path);
  using json_io::get_double, json_io::get_int;
  // A count that cannot be negative (or a world size outside [1, 2^20]) is a
  // damaged file, not a state to continue from.
  const auto count = [&](const char* key, int64_t fallback, int64_t lo = 0,
                         int64_t hi = INT64_MAX) {
    const int64_t x = v.contains(key) ? get_int(v, key, path) : fallback;
    if (x < lo || x > hi) ROTOR_FAIL("{}: \"{}\" is {}, outside [{}, {}]", path, key, x, lo, hi);
    return x;
  };
  // Another format (a newer rotor's) is not read as this one; a state
  // without the key was written before it existed.
  if (v.is_object() && v.contains("format") &&
      json_io::get_string(v, "format", path) != kStateFormat)
    ROTOR_FAIL("{}: format \"{}\"; this rotor reads {} (a checkpoint of a newer rotor?)", path,
               json_io::get_string(v, "format", path), kStateFormat);
  TrainerState s;
  s.step = count("step", get_int(v, "step", path));
  s.micro_step = count("micro_step", get_int(v, "micro_step", path));
  s.world_size = static_cast<int>(count("world_size", s.world_size, 1, int64_t{1} << 20));
  s.position.epoch = static_cast<uint64_t>(count("epoch", get_int(v, "epoch", path)));
  s.position.batch_index =
      static_cast<uint64_t>(count("batch_index", get_int(v, "batch_index", path)));
  s.loss_scale = get_double(v, "loss_scale", path);
  if (!(s.loss_scale > 0) || !std::isfinite(s.loss_scale))
    ROTOR_FAIL("{}: \"loss_scale\" is {}, not a positive finite number", path, s.loss_scale);
  s.loss_scale_good_steps = count("loss_scale_good_steps", s.loss_scale_good_steps);
  s.skipped_steps = count("skipped_steps", get_int(v, "skipped_steps", path));
  if (v.contains("best_metric")) {
    s.has_best = json_io::get_bool(v, "has_best", path);
    s.best_metric = json_io::get_string(v, "best_metric", path);
    s.best_score = get_double(v, "best_score", path);
    s.best_step = get_int(v, "best_step", path);
  } else {  // written before best_metric existed: the best loss, 0 for none
    s.best_score = get_double(v, "best_valid_loss", path);
    s.has_best = s.best_score != 0;
  }
  s.bad_validations = count("bad_validations", get_int(v, "bad_validations", path));
  if (s.best_step < 0) ROTOR_FAIL("{}: \"best_step\" is {}, negative", path, s.best_step);
  s.train_seconds = get_double(v, "train_seconds", path);
  return s;
}

std::string labels_file_text(const std::vector<std::string>& labels) {
  std::string text;
  for (const auto& l : labels) text += l + "\n";
  return text;
}

std::vector<std::string> read_labels_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    ROTOR_FAIL("{}: missing (a task-multilabel checkpoint holds its label vocabulary there)", path);
  const std::string text = read_file(path, kMaxConfigBytes);
  std::vector<std::string> labels;
  size_t line = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line;
    labels.push_back(text.substr(start, end - start));
    if (labels.back().empty()) ROTOR_FAIL("{}:{}: an empty label", path, line);
    start = end + 1;
  }
  if (labels.empty()) ROTOR_FAIL("{}: no labels", path);
  return labels;
}

}  // namespace rotor::checkpoint
