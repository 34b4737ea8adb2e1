// A fast 64-bit non-cryptographic hash of bytes and files, for fingerprints
// (data/fingerprint.h): it tells whether a file changed by accident or by
// edit, not whether someone forged a collision. Four independent lanes take
// 8-byte little-endian words (so that the CPU overlaps their multiplies);
// the lanes, the tail and the length are then folded and avalanched. The
// value is fixed by this code, not by the machine: fingerprints written on
// one host read true on another (little-endian hosts, as rotor's formats are).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rotor {

// Incremental: update() any number of times, then digest(). Splitting the
// input differently gives the same digest.
class Hasher64 {
 public:
  Hasher64();
  void update(const void* data, size_t bytes);
  void update(std::string_view bytes) { update(bytes.data(), bytes.size()); }
  uint64_t digest() const;

 private:
  void stripe(const unsigned char* p);
  uint64_t lane_[4];
  unsigned char buf_[32];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

uint64_t hash64(std::string_view bytes);

// The hash of a file's bytes, read in pieces (bounded memory). A missing or
// unreadable file, or one that is not a regular file, is a rotor::Error
// naming it. `size` receives the number of bytes hashed.
uint64_t hash_file(const std::string& path, uint64_t* size = nullptr);

// 16 lower-case hex digits.
std::string hex64(uint64_t h);

}  // namespace rotor
