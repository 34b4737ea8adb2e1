// What rotor reads JSON with: json_io::parse (src/core/json_io.h) and its
// typed accessors on every member of what it parsed, and the trainer state of
// a checkpoint (checkpoint::load_trainer_state on a trainer_state.json that
// holds the input). A document that parses must dump to text that parses back
// to an equal document.
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/json_io.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;
using json_io::Json;

namespace {

// Every typed read of `v`: each gives a value or a rotor::Error.
void read_typed(const Json& v) {
  fuzz::accepts([&] { (void)json_io::as_bool(v, "v"); });
  fuzz::accepts([&] { (void)json_io::as_int(v, "v"); });
  fuzz::accepts([&] { (void)json_io::as_double(v, "v"); });
  fuzz::accepts([&] { (void)json_io::as_string(v, "v"); });
  (void)json_io::type_name(v);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d = fuzz::scratch_dir() + "/step_1";
    std::filesystem::create_directory(d);
    return d;
  }();
  const std::string_view text = fuzz::as_text(data, size);

  Json doc;
  if (fuzz::accepts([&] { doc = json_io::parse(text, "fuzz.json"); })) {
    read_typed(doc);
    if (doc.is_object()) {
      for (const auto& item : doc.items()) {
        const std::string& key = item.key();
        read_typed(item.value());
        fuzz::accepts([&] { (void)json_io::get_int(doc, key, "fuzz.json", 0); });
        fuzz::accepts([&] { (void)json_io::get_string(doc, key, "fuzz.json"); });
      }
    }
    fuzz::accepts([&] { (void)json_io::get_double(doc, "step", "fuzz.json"); });
    const std::string dumped = doc.dump();
    Json again;
    if (!fuzz::accepts([&] { again = json_io::parse(dumped, "dumped.json"); }))
      fuzz::fail("a parsed document dumps to text that does not parse: " + dumped);
    if (again != doc) fuzz::fail("a parsed document dumps to a different one: " + dumped);
  }

  fuzz::write_file(dir + "/trainer_state.json", text);
  fuzz::accepts([&] { (void)checkpoint::load_trainer_state(dir); });
  return 0;
}
