#include "data/corpus.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/io.h"

namespace rotor::data {

static_assert(std::endian::native == std::endian::little,
              "the corpus format is little-endian; add byte swapping for this host");

namespace {

struct IdxHeader {
  char magic[8];
  uint32_t version;
  uint32_t dtype;
  uint64_t count;
  uint64_t vocab_size;
  uint64_t tokens;
  uint64_t reserved;
};
static_assert(sizeof(IdxHeader) == kIdxHeaderBytes);

// Maps `path` read-only; returns nullptr for an empty file.
void* map_file(const std::string& path, size_t* bytes) {
  // O_NONBLOCK: a FIFO in place of a corpus file must not block open().
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) ROTOR_FAIL("corpus file {}: no such file", path);
    ROTOR_FAIL("corpus file {}: cannot open ({})", path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    ROTOR_FAIL("corpus file {}: cannot stat ({})", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    ROTOR_FAIL("corpus file {}: is {}, not a regular file", path,
               file_kind(static_cast<unsigned>(st.st_mode)));
  }
  *bytes = static_cast<size_t>(st.st_size);
  void* p = nullptr;
  if (*bytes > 0) {
    p = ::mmap(nullptr, *bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      ROTOR_FAIL("corpus file {}: cannot mmap ({})", path, std::strerror(e));
    }
  }
  ::close(fd);
  return p;
}

void write_all(std::FILE* f, const void* data, size_t bytes, const std::string& path) {
  if (bytes && std::fwrite(data, 1, bytes, f) != bytes)
    ROTOR_FAIL("cannot write {} ({})", path, std::strerror(errno));
}

void close_synced(std::FILE*& f, const std::string& path) {
  bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  int e = errno;
  ok = (std::fclose(f) == 0) && ok;
  f = nullptr;
  if (!ok) ROTOR_FAIL("cannot write {} ({})", path, std::strerror(e));
}

}  // namespace

MmapCorpus::~MmapCorpus() {
  release();
}

void MmapCorpus::release() {
  if (idx_map_) ::munmap(idx_map_, idx_bytes_);
  if (bin_map_) ::munmap(bin_map_, bin_bytes_);
  idx_map_ = bin_map_ = nullptr;
}

MmapCorpus::MmapCorpus(MmapCorpus&& o) noexcept {
  *this = std::move(o);
}

MmapCorpus& MmapCorpus::operator=(MmapCorpus&& o) noexcept {
  if (this != &o) {
    release();
    prefix_ = std::move(o.prefix_);
    idx_map_ = std::exchange(o.idx_map_, nullptr);
    idx_bytes_ = std::exchange(o.idx_bytes_, 0);
    bin_map_ = std::exchange(o.bin_map_, nullptr);
    bin_bytes_ = std::exchange(o.bin_bytes_, 0);
    offsets_ = std::exchange(o.offsets_, nullptr);
    tokens_ptr_ = std::exchange(o.tokens_ptr_, nullptr);
    count_ = std::exchange(o.count_, 0);
    vocab_size_ = std::exchange(o.vocab_size_, 0);
    tokens_ = std::exchange(o.tokens_, 0);
  }
  return *this;
}

MmapCorpus MmapCorpus::open(const std::string& prefix) {
  const std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  MmapCorpus c;
  c.prefix_ = prefix;
  c.idx_map_ = map_file(idx_path, &c.idx_bytes_);
  if (c.idx_bytes_ < kIdxHeaderBytes)
    ROTOR_FAIL("corpus index {}: truncated ({} bytes, the header alone is {})", idx_path,
               c.idx_bytes_, kIdxHeaderBytes);
  IdxHeader h;
  std::memcpy(&h, c.idx_map_, sizeof h);
  if (std::memcmp(h.magic, kIdxMagic, 8) != 0)
    ROTOR_FAIL("corpus index {}: bad magic, not a rotor corpus index", idx_path);
  if (h.version != kIdxVersion)
    ROTOR_FAIL("corpus index {}: format version {}, this rotor reads version {}", idx_path,
               h.version, kIdxVersion);
  if (h.dtype != kIdxDtypeI32)
    ROTOR_FAIL("corpus index {}: token dtype code {}, expected {} (int32)", idx_path, h.dtype,
               kIdxDtypeI32);
  const uint64_t want_idx = kIdxHeaderBytes + 8 * (h.count + 1);
  if (h.count > (UINT64_MAX - kIdxHeaderBytes) / 8 - 1 || c.idx_bytes_ != want_idx)
    ROTOR_FAIL("corpus index {}: {} bytes, expected {} for {} sentences (truncated or corrupt)",
               idx_path, c.idx_bytes_, want_idx, h.count);
  c.offsets_ =
      reinterpret_cast<const uint64_t*>(static_cast<const char*>(c.idx_map_) + kIdxHeaderBytes);
  c.count_ = h.count;
  c.vocab_size_ = h.vocab_size;
  c.tokens_ = h.tokens;
  if (c.offsets_[0] != 0 || c.offsets_[h.count] != h.tokens)
    ROTOR_FAIL("corpus index {}: offsets do not span 0..{} tokens (corrupt)", idx_path, h.tokens);
  for (size_t i = 0; i < c.count_; ++i)
    if (c.offsets_[i + 1] < c.offsets_[i])
      ROTOR_FAIL("corpus index {}: offsets decrease at sentence {} (corrupt)", idx_path, i);
  c.bin_map_ = map_file(bin_path, &c.bin_bytes_);
  // Divided, not multiplied: a corrupt count near 2^62 times 4 wraps around to a small size.
  if (c.bin_bytes_ % 4 != 0 || c.bin_bytes_ / 4 != h.tokens)
    ROTOR_FAIL("corpus data {}: {} bytes, the index says {} tokens of 4 bytes ({})", bin_path,
               c.bin_bytes_, h.tokens,
               c.bin_bytes_ / 4 < h.tokens ? "truncated" : "does not match its index");
  c.tokens_ptr_ = static_cast<const int32_t*>(c.bin_map_);
  if (c.vocab_size_ > 0) c.check_ids(c.vocab_size_, "recorded in " + idx_path);
  return c;
}

void MmapCorpus::check_ids(uint64_t vocab_size, std::string_view source) const {
  for (uint64_t t = 0; t < tokens_; ++t) {
    // Negative ids become large unsigned ones: one comparison catches both.
    if (static_cast<uint64_t>(static_cast<uint32_t>(tokens_ptr_[t])) < vocab_size) continue;
    const uint64_t* end = offsets_ + count_ + 1;
    const size_t sentence = static_cast<size_t>(std::upper_bound(offsets_, end, t) - offsets_ - 1);
    ROTOR_FAIL(
        "corpus data {}.bin: sentence index {} holds token id {}, outside the vocabulary "
        "[0, {}) {}",
        prefix_, sentence, tokens_ptr_[t], vocab_size, source);
  }
}

std::span<const int32_t> MmapCorpus::sentence(size_t i) const {
  ROTOR_CHECK(i < count_, "sentence {} of a corpus of {}", i, count_);
  return {tokens_ptr_ + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
}

CorpusWriter::CorpusWriter(const std::string& prefix, uint64_t vocab_size) : prefix_(prefix) {
  namespace fs = std::filesystem;
  fs::path parent = fs::path(prefix).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    ROTOR_FAIL("output directory {} does not exist", parent.string());
  const std::string tag = ".tmp-" + std::to_string(::getpid());
  bin_tmp_ = prefix + ".bin" + tag;
  idx_tmp_ = prefix + ".idx" + tag;
  bin_ = std::fopen(bin_tmp_.c_str(), "wb");
  if (!bin_) ROTOR_FAIL("cannot create {} ({})", bin_tmp_, std::strerror(errno));
  std::setvbuf(bin_, nullptr, _IOFBF, 1 << 20);
  vocab_size_ = vocab_size;
}

CorpusWriter::~CorpusWriter() {
  if (finished_) return;
  if (bin_) std::fclose(bin_);
  std::error_code ec;
  std::filesystem::remove(bin_tmp_, ec);
  std::filesystem::remove(idx_tmp_, ec);
}

void CorpusWriter::add(std::span<const int32_t> tokens) {
  ROTOR_CHECK(!sealed_, "CorpusWriter::add after seal");
  write_all(bin_, tokens.data(), tokens.size_bytes(), bin_tmp_);
  offsets_.push_back(offsets_.back() + tokens.size());
}

void CorpusWriter::seal() {
  ROTOR_CHECK(!sealed_, "CorpusWriter::seal called twice");
  close_synced(bin_, bin_tmp_);
  IdxHeader h{};
  std::memcpy(h.magic, kIdxMagic, 8);
  h.version = kIdxVersion;
  h.dtype = kIdxDtypeI32;
  h.count = offsets_.size() - 1;
  h.vocab_size = vocab_size_;
  h.tokens = offsets_.back();
  std::FILE* idx = std::fopen(idx_tmp_.c_str(), "wb");
  if (!idx) ROTOR_FAIL("cannot create {} ({})", idx_tmp_, std::strerror(errno));
  try {
    write_all(idx, &h, sizeof h, idx_tmp_);
    write_all(idx, offsets_.data(), offsets_.size() * sizeof(uint64_t), idx_tmp_);
  } catch (...) {
    std::fclose(idx);
    throw;
  }
  close_synced(idx, idx_tmp_);
  sealed_ = true;
}

void CorpusWriter::commit() {
  ROTOR_CHECK(sealed_ && !finished_, "CorpusWriter::commit before seal, or twice");
  // .bin first: the .idx is the commit point, and a reader checks the pair.
  // move_into_place: a link is followed, a FIFO or a device written into
  // (core/io.h), never replaced.
  move_into_place(bin_tmp_, prefix_ + ".bin");
  move_into_place(idx_tmp_, prefix_ + ".idx");
  finished_ = true;
}

}  // namespace rotor::data
