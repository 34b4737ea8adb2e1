#include "core/hash.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/io.h"

namespace rotor {

namespace {

// Odd 64-bit constants with well-spread bits (digits of pi and e, made odd).
constexpr uint64_t kMul[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707345ull, 0xA4093822299F31D1ull,
                              0xB7E151628AED2A6Bull};
constexpr uint64_t kFold = 0x9E3779B97F4A7C15ull;

inline uint64_t load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;  // little-endian hosts (see hash.h)
}

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

// A strong finalizer: every input bit flips each output bit with p ~ 1/2.
inline uint64_t avalanche(uint64_t x) {
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

}  // namespace

Hasher64::Hasher64() {
  for (int i = 0; i < 4; ++i) lane_[i] = kMul[i] ^ (kFold * static_cast<uint64_t>(i + 1));
}

void Hasher64::stripe(const unsigned char* p) {
  for (int i = 0; i < 4; ++i) {
    uint64_t x = lane_[i] ^ load64(p + 8 * i);
    x *= kMul[i];
    lane_[i] = rotl(x, 29 + 2 * i) ^ (x >> 23);
  }
}

void Hasher64::update(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += n;
  if (buffered_ > 0) {
    const size_t take = std::min(n, sizeof buf_ - buffered_);
    std::memcpy(buf_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < sizeof buf_) return;
    stripe(buf_);
    buffered_ = 0;
  }
  for (; n >= 32; p += 32, n -= 32) stripe(p);
  std::memcpy(buf_, p, n);
  buffered_ = n;
}

uint64_t Hasher64::digest() const {
  uint64_t h = total_ * kFold;
  for (int i = 0; i < 4; ++i) h = rotl(h ^ avalanche(lane_[i]), 27) * kMul[i];
  // The tail: whole words, then the last bytes one at a time.
  size_t i = 0;
  for (; i + 8 <= buffered_; i += 8) h = rotl(h ^ avalanche(load64(buf_ + i)), 31) * kFold;
  for (; i < buffered_; ++i) h = rotl(h ^ (buf_[i] * kMul[i % 4]), 11) * kFold;
  return avalanche(h);
}

uint64_t hash64(std::string_view bytes) {
  Hasher64 h;
  h.update(bytes);
  return h.digest();
}

uint64_t hash_file(const std::string& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) ROTOR_FAIL("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const unsigned mode = st.st_mode;
    ::close(fd);
    ROTOR_FAIL("{}: {}, not a regular file", path, file_kind(mode));
  }
  Hasher64 h;
  std::vector<char> buf(size_t{1} << 20);
  uint64_t total = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      ROTOR_FAIL("{}: read error: {}", path, std::strerror(err));
    }
    if (got == 0) break;
    h.update(buf.data(), static_cast<size_t>(got));
    total += static_cast<uint64_t>(got);
  }
  ::close(fd);
  if (size) *size = total;
  return h.digest();
}

std::string hex64(uint64_t h) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) s[static_cast<size_t>(i)] = digits[h & 15];
  return s;
}

}  // namespace rotor
