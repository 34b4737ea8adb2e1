// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): a counter-based generator. Element i of a stream is a pure function
// of (seed, stream, i), so the CPU and the GPU draw the same dropout masks and
// a resumed run draws the same numbers as an uninterrupted one (docs/design.md, "Randomness").
// Header-only and __host__ __device__ so kernels use the very same code.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"  // ROTOR_HD

namespace rotor {

struct Philox4 {
  uint32_t v[4];
};

ROTOR_HD uint32_t philox_mulhi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

ROTOR_HD Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                               uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0 = philox_mulhi(M0, c0), lo0 = M0 * c0;
    uint32_t hi1 = philox_mulhi(M1, c2), lo1 = M1 * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += W0;
    k1 += W1;
  }
  return {{c0, c1, c2, c3}};
}

// 32 random bits: element `index` of stream `stream` under `seed`. Counter =
// (index/4 as 64 bits, stream as 64 bits), key = seed; lane index%4.
ROTOR_HD uint32_t philox_u32(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t block = index >> 2;
  Philox4 r = philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                            static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                            static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  // Selected without indexing the array by a run-time value: a dynamic index
  // would put r in local memory in every kernel that draws single elements.
  const uint32_t lane = static_cast<uint32_t>(index & 3);
  return lane == 0 ? r.v[0] : lane == 1 ? r.v[1] : lane == 2 ? r.v[2] : r.v[3];
}

// Uniform in [0, 1) with 24 random bits (exactly representable in fp32).
ROTOR_HD float philox_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(philox_u32(seed, stream, index) >> 8) * (1.0f / 16777216.0f);
}

// What a stream of random numbers is for; part of the stream id.
enum class RngPurpose : uint32_t {
  Init = 1,
  Dropout = 2,
  AttentionDropout = 3,
  Shuffle = 4,
  Masking = 5,
  Sampling = 6,
  FavorProjection = 7,  // core/favor.h: the random features of linear attention
  Test = 255,
};

// The stream id of (step, layer, purpose, rank): step in bits 32-63, layer in
// 20-31, purpose in 12-19, rank in 0-11. Distinct tuples within those ranges
// give distinct streams.
ROTOR_HD uint64_t rng_stream(uint64_t step, uint32_t layer, RngPurpose purpose, uint32_t rank) {
  return (step << 32) | (static_cast<uint64_t>(layer & 0xfffu) << 20) |
         (static_cast<uint64_t>(static_cast<uint32_t>(purpose) & 0xffu) << 12) |
         static_cast<uint64_t>(rank & 0xfffu);
}

// A sequential host generator over one Philox stream, for initialization and
// shuffling. Its whole state is (seed, stream, position): save and restore it.
class PhiloxRng {
 public:
  PhiloxRng(uint64_t seed = 0, uint64_t stream = 0, uint64_t position = 0)
      : seed_(seed), stream_(stream), position_(position) {}
  uint32_t next_u32() { return philox_u32(seed_, stream_, position_++); }
  uint64_t next_u64() {
    uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  float uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }
  // Uniform integer in [0, n) without modulo bias (n > 0).
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next_u64();
    while (x >= limit);
    return x % n;
  }
  // Standard normal by Box-Muller, in double for accuracy.
  double normal() {
    double u1 = (static_cast<double>(next_u32()) + 1.0) / 4294967296.0;  // (0, 1]
    double u2 = static_cast<double>(next_u32()) / 4294967296.0;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  uint64_t position() const { return position_; }
  void set_position(uint64_t p) { position_ = p; }

 private:
  uint64_t seed_, stream_, position_;
};

}  // namespace rotor
