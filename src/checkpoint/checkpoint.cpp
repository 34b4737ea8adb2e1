#include "checkpoint/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/io.h"
#include "core/json.h"
#include "checkpoint/safetensors.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

namespace {

constexpr const char* kStepPrefix = "step_";

std::string state_json(const TrainerState& s) {
  json::Value v = json::Value::object();
  v.set("format", "rotor-trainer-state-1");
  v.set("step", s.step);
  v.set("micro_step", s.micro_step);
  v.set("world_size", s.world_size);
  v.set("epoch", s.position.epoch);
  v.set("batch_index", s.position.batch_index);
  v.set("loss_scale", s.loss_scale);
  v.set("loss_scale_good_steps", s.loss_scale_good_steps);
  v.set("skipped_steps", s.skipped_steps);
  v.set("best_valid_loss", s.best_valid_loss);
  v.set("bad_validations", s.bad_validations);
  v.set("train_seconds", s.train_seconds);
  return v.dump(2) + "\n";
}

int64_t step_of(const fs::path& p) {
  std::string name = p.filename().string();
  if (name.rfind(kStepPrefix, 0) != 0) return -1;
  try {
    size_t used = 0;
    int64_t n = std::stoll(name.substr(5), &used);
    return used == name.size() - 5 ? n : -1;
  } catch (...) {
    return -1;
  }
}

void point_last(const std::string& output_dir, const std::string& target_name) {
  // A new symlink under a temporary name, renamed over the old one: atomic.
  fs::path link = fs::path(output_dir) / "checkpoint_last";
  fs::path tmp = fs::path(output_dir) / (".checkpoint_last.tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_symlink(fs::path("checkpoints") / target_name, tmp);
  fs::rename(tmp, link);
  fsync_directory(output_dir);
}

// A writer killed mid-save leaves its temporaries ("step_N.tmp-<pid>",
// "step_N.old-<pid>", ".checkpoint_last.tmp-<pid>"; core/io.h) under another
// pid, which publish_directory never reuses: the next save removes them. One
// output directory has one writer, so any such name is a dead process's.
void remove_stale_temporaries(const std::string& output_dir, const fs::path& ckpt_root) {
  std::error_code ec;
  auto is_temp = [](const std::string& name, const std::string& prefix) {
    return name.rfind(prefix, 0) == 0 &&
           (name.find(".tmp-") != std::string::npos || name.find(".old-") != std::string::npos);
  };
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(ckpt_root, ec))
    if (is_temp(e.path().filename().string(), kStepPrefix)) stale.push_back(e.path());
  for (const auto& e : fs::directory_iterator(output_dir, ec))
    if (is_temp(e.path().filename().string(), ".checkpoint_last")) stale.push_back(e.path());
  for (const auto& p : stale) fs::remove_all(p, ec);
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

std::string save_checkpoint(const std::string& output_dir, const CheckpointContents& c,
                            int keep_last) {
  ROTOR_CHECK(c.params != nullptr, "checkpoint without parameters");
  fs::path ckpt_root = fs::path(output_dir) / "checkpoints";
  ensure_directory(ckpt_root.string());
  const std::string name = kStepPrefix + std::to_string(c.state.step);
  const fs::path dir = ckpt_root / name;
  publish_directory(dir.string(), [&](const std::string& tmp) {
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
  });
  point_last(output_dir, name);
  remove_stale_temporaries(output_dir, ckpt_root);
  // Keep the newest keep_last step directories.
  std::vector<std::pair<int64_t, fs::path>> all;
  for (const auto& e : fs::directory_iterator(ckpt_root))
    if (e.is_directory() && step_of(e.path()) >= 0) all.emplace_back(step_of(e.path()), e.path());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep_last, 1)) < all.size(); ++i)
    fs::remove_all(all[i].second);
  return dir.string();
}

std::string resolve_checkpoint(const std::string& path) {
  fs::path p(path);
  if (fs::exists(p / "model.safetensors")) return p.string();
  if (fs::exists(p / "checkpoint_last" / "model.safetensors"))
    return fs::canonical(p / "checkpoint_last").string();
  ROTOR_FAIL("{}: no checkpoint there (expected model.safetensors or checkpoint_last/)", path);
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
    p->value.copy_from(file.load(p->name));
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
  json::Value v = json::parse(read_file(path), path);
  TrainerState s;
  try {
    s.step = v.at("step").as_int();
    s.micro_step = v.at("micro_step").as_int();
    if (const json::Value* w = v.find("world_size")) s.world_size = static_cast<int>(w->as_int());
    s.position.epoch = static_cast<uint64_t>(v.at("epoch").as_int());
    s.position.batch_index = static_cast<uint64_t>(v.at("batch_index").as_int());
    s.loss_scale = v.at("loss_scale").as_double();
    if (const json::Value* g = v.find("loss_scale_good_steps"))
      s.loss_scale_good_steps = g->as_int();
    s.skipped_steps = v.at("skipped_steps").as_int();
    s.best_valid_loss = v.at("best_valid_loss").as_double();
    s.bad_validations = v.at("bad_validations").as_int();
    s.train_seconds = v.at("train_seconds").as_double();
  } catch (const std::exception& e) {
    ROTOR_FAIL("{}: not a rotor trainer state ({})", path, e.what());
  }
  return s;
}

}  // namespace rotor::checkpoint
