#include "checkpoint/hf_index.h"

#include <set>

#include "core/error.h"
#include "core/json_io.h"

namespace rotor::checkpoint {

HfShardIndex parse_hf_index(std::string_view text, const std::string& path) {
  const json_io::Json j = json_io::parse(text, path);
  if (!j.is_object()) ROTOR_FAIL("{}: not a shard index (expected a JSON object)", path);
  const json_io::Json& map = json_io::at(j, "weight_map", path);
  if (!map.is_object())
    ROTOR_FAIL("{}: weight_map is {}, expected an object", path, json_io::type_name(map));
  HfShardIndex index;
  index.path = path;
  std::set<std::string> shards;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it.key().empty()) ROTOR_FAIL("{}: weight_map has an empty tensor name", path);
    const std::string& shard =
        json_io::as_string(it.value(), path + ": weight_map[\"" + it.key() + "\"]");
    if (shard.empty() || shard == "." || shard == ".." ||
        shard.find_first_of(std::string("/\\\0", 3)) != std::string::npos)
      ROTOR_FAIL(
          "{}: weight_map[\"{}\"] names the shard \"{}\", which is not a file name in "
          "the directory",
          path, it.key(), shard);
    index.weight_map.emplace(it.key(), shard);
    shards.insert(shard);
  }
  if (index.weight_map.empty()) ROTOR_FAIL("{}: weight_map lists no tensor", path);
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

std::map<std::string, std::string> match_hf_shards(
    const HfShardIndex& index,
    const std::function<std::vector<std::string>(const std::string& shard)>& tensors_of,
    const std::function<std::string(const std::string& shard)>& shard_path) {
  std::map<std::string, std::string> found;
  for (const std::string& shard : index.shards) {
    for (const std::string& name : tensors_of(shard)) {
      auto [at, fresh] = found.emplace(name, shard);
      if (!fresh)
        ROTOR_FAIL("{}: tensor {} is also in {}; a tensor must be in one shard", shard_path(shard),
                   name, shard_path(at->second));
      auto listed = index.weight_map.find(name);
      if (listed == index.weight_map.end())
        ROTOR_FAIL("{}: tensor {} is not in the weight_map of {}", shard_path(shard), name,
                   index.path);
      if (listed->second != shard)
        ROTOR_FAIL("{}: tensor {} is here, but {} puts it in {}", shard_path(shard), name,
                   index.path, listed->second);
    }
  }
  for (const auto& [name, shard] : index.weight_map)
    if (!found.count(name))
      ROTOR_FAIL("{}: tensor {} is missing (the weight_map of {} puts it there)", shard_path(shard),
                 name, index.path);
  return found;
}

}  // namespace rotor::checkpoint
