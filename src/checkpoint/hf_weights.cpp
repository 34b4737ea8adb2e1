#include "checkpoint/hf_weights.h"

#include <filesystem>

#include "checkpoint/hf_index.h"
#include "core/error.h"
#include "core/io.h"
#include "core/json_io.h"

namespace fs = std::filesystem;

namespace rotor::checkpoint {

HfWeights::HfWeights(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) {
    open(single.string());
  } else if (fs::exists(index, ec)) {
    const HfShardIndex idx =
        parse_hf_index(read_file(index.string(), json_io::kMaxJsonFileBytes), index.string());
    std::map<std::string, size_t> file_of;
    for (const auto& s : idx.shards) {
      file_of[s] = files_.size();
      files_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / s).string()));
    }
    const auto tensors_of = [&](const std::string& s) {
      std::vector<std::string> names;
      for (const auto& e : files_[file_of.at(s)]->entries()) names.push_back(e.name);
      return names;
    };
    const auto path_of = [&](const std::string& s) { return files_[file_of.at(s)]->path(); };
    for (const auto& [name, shard] : match_hf_shards(idx, tensors_of, path_of))
      where_[name] = file_of.at(shard);
  } else if (fs::exists(fs::path(dir) / "pytorch_model.bin", ec) ||
             fs::exists(fs::path(dir) / "pytorch_model.bin.index.json", ec)) {
    ROTOR_FAIL(
        "model.init_from {}: only pytorch_model.bin (a pickle, which runs code when it is "
        "loaded) is there; rotor reads model.safetensors: convert it where you trust the file, "
        "e.g. AutoModel.from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True)",
        dir);
  } else {
    ROTOR_FAIL("model.init_from {}: no model.safetensors (nor model.safetensors.index.json)", dir);
  }
}

const SafetensorsEntry* HfWeights::find(const std::string& name,
                                        const SafetensorsFile** file) const {
  auto it = where_.find(name);
  if (it == where_.end()) return nullptr;
  *file = files_[it->second].get();
  return (*file)->find(name);
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, i] : where_) out.push_back(name);
  return out;
}

void HfWeights::open(const std::string& path) {
  files_.push_back(std::make_unique<SafetensorsFile>(path));
  for (const auto& e : files_.back()->entries()) where_[e.name] = files_.size() - 1;
}

std::vector<float> hf_floats(const SafetensorsFile& file, const SafetensorsEntry& e) {
  if (e.dtype != DType::F32 && e.dtype != DType::F16 && e.dtype != DType::BF16)
    ROTOR_FAIL("{}: {} is {}, expected a floating-point tensor", file.path(), e.name,
               dtype_name(e.dtype));
  return file.load(e.name).to_floats();
}

}  // namespace rotor::checkpoint
