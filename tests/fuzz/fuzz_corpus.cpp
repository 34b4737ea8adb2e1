// The binarized corpus reader (src/data/corpus.h) on a PREFIX.idx and a
// PREFIX.bin made from the input:
//   bytes 0-1   a little-endian uint16 k; the .idx is the next k % (rest + 1)
//               bytes (rest: what follows these two bytes)
//   the rest    the .bin
// A corpus that opens must have passed the index validation: its sentences
// tile the .bin exactly, so that reading them stays inside the mapping
// (AddressSanitizer does not watch mapped files: the target checks the
// bounds itself, then reads every token). The id validation (check_ids, also
// run by open() against the vocabulary size the index records) must fail
// exactly when an id lies outside the vocabulary.
#include <cstdint>

#include "data/corpus.h"
#include "fuzz/fuzz_util.h"

using namespace rotor;

// Where the tokens' sum goes, so that reading them is not optimized away.
volatile uint32_t g_sink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string prefix = fuzz::scratch_dir() + "/corpus";
  if (size < 2) return 0;
  const size_t rest = size - 2;
  const size_t idx_bytes = (data[0] | (size_t{data[1]} << 8)) % (rest + 1);
  const std::string_view idx = fuzz::as_text(data + 2, idx_bytes);
  const std::string_view bin = fuzz::as_text(data + 2 + idx_bytes, rest - idx_bytes);
  fuzz::write_file(prefix + ".idx", idx);
  fuzz::write_file(prefix + ".bin", bin);

  fuzz::accepts([&] {
    const data::MmapCorpus corpus = data::MmapCorpus::open(prefix);
    fuzz::require(bin.size() % 4 == 0 && corpus.num_tokens() == bin.size() / 4,
                  "the .bin does not hold the tokens its index counts");
    if (corpus.size() == 0) return;
    // Sentence 0 starts at token 0 (offsets[0] = 0 is validated).
    const auto base = reinterpret_cast<uintptr_t>(corpus.sentence(0).data());
    const uintptr_t limit = base + 4 * corpus.num_tokens();
    constexpr uint64_t kVocab = 1000;
    bool in_vocab = true;
    uint64_t tokens = 0;
    uint32_t checksum = 0;
    for (size_t i = 0; i < corpus.size(); ++i) {
      const auto s = corpus.sentence(i);
      const auto begin = reinterpret_cast<uintptr_t>(s.data());
      fuzz::require(corpus.length(i) >= 0 && static_cast<uint64_t>(corpus.length(i)) == s.size(),
                    "a sentence's length differs from its span");
      fuzz::require(begin >= base && begin <= limit && s.size() <= (limit - begin) / 4,
                    "a sentence lies outside the .bin");
      tokens += s.size();
      for (int32_t t : s) {
        checksum += static_cast<uint32_t>(t);
        in_vocab = in_vocab && t >= 0 && static_cast<uint64_t>(t) < kVocab;
      }
    }
    fuzz::require(tokens == corpus.num_tokens(), "the sentences do not add up to the token count");
    g_sink = checksum;
    const bool ids_ok = fuzz::accepts([&] { corpus.check_ids(kVocab, "of the fuzz vocabulary"); });
    fuzz::require(ids_ok == in_vocab, "check_ids disagrees with the token ids");
  });
  return 0;
}
