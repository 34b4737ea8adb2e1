// The config loader (src/config/config.h), twice per input: the whole input
// as a YAML file, then the input split into a file and --set overrides (every
// line that starts with "--set " is an override, the other lines are the
// file). A config that loads must dump to YAML that loads back to an equal
// config: that text is what every checkpoint saves and --resume reads.
#include <string>
#include <vector>

#include "config/config.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;

namespace {

void load_and_round_trip(const std::string& yaml, const std::vector<std::string>& overrides) {
  Config config;
  if (!fuzz::accepts([&] { config = load_config_from_string(yaml, "fuzz.yaml", overrides); }))
    return;
  const std::string dumped = dump_config(config);
  Config again;
  if (!fuzz::accepts([&] { again = load_config_from_string(dumped, "dumped.yaml"); }))
    fuzz::fail("dump_config wrote a config that does not load:\n" + dumped);
  if (!(again == config)) fuzz::fail("dump_config wrote a different config:\n" + dumped);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(fuzz::as_text(data, size));
  load_and_round_trip(text, {});

  const std::string_view marker = "--set ";
  std::string yaml;
  std::vector<std::string> overrides;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + begin, end - begin);
    if (line.starts_with(marker))
      overrides.emplace_back(line.substr(marker.size()));
    else
      yaml.append(line).push_back('\n');
    begin = end + 1;
  }
  if (!overrides.empty()) load_and_round_trip(yaml, overrides);
  return 0;
}
