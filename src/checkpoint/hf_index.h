// The index of a Hugging Face sharded checkpoint, model.safetensors.index.json:
//
//   {"metadata": {...}, "weight_map": {"TENSOR": "SHARD.safetensors", ...}}
//
// rotor takes the index at its word: every tensor must be in exactly the
// shard its weight_map names. A tensor the map does not list, one in another
// shard than the map says, one in two shards, or a listed one its shard lacks
// is an error naming the file and the tensor (a stale shard left beside new
// ones would otherwise win or lose by the order of the files).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rotor::checkpoint {

struct HfShardIndex {
  std::string path;                               // for messages
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> shards;                // the distinct shard names, sorted
};

// Parses the index text (`path` names it in errors). Errors: not JSON, no
// weight_map object, a value that is not a string, an empty tensor name, a
// shard name that is empty or leaves the directory ("/", "..", ".", NUL).
HfShardIndex parse_hf_index(std::string_view text, const std::string& path);

// Matches the shards' contents to the index: `tensors_of(shard)` gives the
// tensor names the shard file holds (and names its file in errors as
// `shard_path(shard)`). Returns tensor -> shard, equal to the weight_map, or
// throws rotor::Error as described above.
std::map<std::string, std::string> match_hf_shards(
    const HfShardIndex& index,
    const std::function<std::vector<std::string>(const std::string& shard)>& tensors_of,
    const std::function<std::string(const std::string& shard)>& shard_path);

}  // namespace rotor::checkpoint
