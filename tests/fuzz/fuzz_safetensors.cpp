// The safetensors reader (src/checkpoint/safetensors.h) on a file holding the
// input: the header is validated by SafetensorsFile, then every tensor is
// read. What it accepts must come back the same through the writer.
#include <cstring>

#include "checkpoint/safetensors.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;

namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = fuzz::scratch_dir() + "/model.safetensors";
  static const std::string copy = fuzz::scratch_dir() + "/copy.safetensors";
  fuzz::write_file(path, fuzz::as_text(data, size));
  checkpoint::NamedTensors tensors;
  checkpoint::Metadata metadata;
  const bool ok = fuzz::accepts([&] {
    checkpoint::SafetensorsFile file(path);
    for (const auto& e : file.entries()) {
      Tensor t = file.load(e.name);
      fuzz::require(t.nbytes() == e.end - e.begin, "a tensor's size differs from its offsets");
      tensors.emplace_back(e.name, std::move(t));
    }
    metadata = file.metadata();
  });
  if (!ok) return 0;

  fuzz::write_file(copy, checkpoint::safetensors_bytes(tensors, metadata));
  checkpoint::SafetensorsFile again(copy);
  fuzz::require(again.metadata() == metadata, "the metadata changed through the writer");
  fuzz::require(again.entries().size() == tensors.size(), "tensors lost through the writer");
  for (const auto& [name, t] : tensors)
    fuzz::require(same_tensor(again.load(name), t), "a tensor changed through the writer");
  return 0;
}
