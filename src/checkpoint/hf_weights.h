// The tensors of a local Hugging Face model directory, read by
// model.init_from (checkpoint/import_hf.h, checkpoint/hf_lm.h):
// DIR/model.safetensors, or the shards model.safetensors.index.json lists
// (each tensor exactly in the shard its weight_map names, checkpoint/hf_index.h).
// A directory with only a pickled pytorch_model.bin is refused (unpickling runs
// code from the file), naming the conversion that makes a safetensors file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"

namespace rotor::checkpoint {

class HfWeights {
 public:
  // Throws rotor::Error naming DIR when it holds no safetensors weights.
  explicit HfWeights(const std::string& dir);
  // The entry NAME and the file that holds it, or nullptr.
  const SafetensorsEntry* find(const std::string& name, const SafetensorsFile** file) const;
  std::vector<std::string> names() const;  // sorted

 private:
  void open(const std::string& path);
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;
};

// The values of a floating-point entry (F16 and BF16 widened), or an error
// naming the file and tensor for any other dtype.
std::vector<float> hf_floats(const SafetensorsFile& file, const SafetensorsEntry& entry);

}  // namespace rotor::checkpoint
