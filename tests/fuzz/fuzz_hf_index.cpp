// The shard index of a Hugging Face checkpoint (checkpoint/hf_index.h): the
// input is model.safetensors.index.json. A parsed index must list only shard
// names inside the directory; shards that hold exactly what its weight_map
// says must match it back; a tensor the map does not list, one in two shards
// and one its shard lacks must each be refused.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/hf_index.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  checkpoint::HfShardIndex index;
  if (!fuzz::accepts(
          [&] { index = checkpoint::parse_hf_index(fuzz::as_text(data, size), "index.json"); }))
    return 0;
  fuzz::require(!index.weight_map.empty() && !index.shards.empty(), "an empty index parsed");
  for (const auto& s : index.shards)
    fuzz::require(!s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
                      s.find('\0') == std::string::npos,
                  "a shard name that leaves the directory parsed: " + s);

  // The shards as the map has them, then one change at a time.
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [tensor, shard] : index.weight_map) shards[shard].push_back(tensor);
  const auto path_of = [](const std::string& s) { return "dir/" + s; };
  const auto match = [&](const std::map<std::string, std::vector<std::string>>& content) {
    return checkpoint::match_hf_shards(
        index,
        [&](const std::string& s) {
          return content.count(s) ? content.at(s) : std::vector<std::string>{};
        },
        path_of);
  };
  std::map<std::string, std::string> found;
  if (!fuzz::accepts([&] { found = match(shards); }))
    fuzz::fail("shards holding exactly the weight_map were refused");
  fuzz::require(found == index.weight_map, "the match differs from the weight_map");

  const std::string& first = index.shards.front();
  const std::string& tensor = index.weight_map.begin()->first;
  const std::string& home = index.weight_map.begin()->second;

  auto unlisted = shards;
  std::string extra = tensor + "#";
  while (index.weight_map.count(extra)) extra += "#";
  unlisted[first].push_back(extra);
  fuzz::require(!fuzz::accepts([&] { (void)match(unlisted); }), "an unlisted tensor was accepted");

  auto missing = shards;
  auto& list = missing[home];
  list.erase(std::find(list.begin(), list.end(), tensor));
  fuzz::require(!fuzz::accepts([&] { (void)match(missing); }), "a missing tensor was accepted");

  if (index.shards.size() > 1) {
    auto twice = shards;
    const std::string& other = index.shards[index.shards.front() == home ? 1 : 0];
    twice[other].push_back(tensor);
    fuzz::require(!fuzz::accepts([&] { (void)match(twice); }),
                  "a tensor in two shards was accepted");
  }
  return 0;
}
