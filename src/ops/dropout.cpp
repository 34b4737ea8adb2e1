// CPU dropout: the mask is a pure function of (seed, stream, element index),
// so the backward regenerates it and the GPU draws the very same one.
#include "ops/dropout.h"

#include <algorithm>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
#define ROTOR_PHILOX_AVX2 1
#else
#define ROTOR_PHILOX_AVX2 0
#endif

#include "core/philox.h"
#include "ops/cpu_clones.h"
#include "ops/cpu_f32.h"
#include "ops/dispatch.h"

namespace rotor::ops {

namespace {
void check_dropout(const Tensor& in, const Tensor& out, float p, const char* op) {
  if (in.numel() != out.numel())
    ROTOR_FAIL("{}: element counts differ: {} vs {}", op, shape_str(in.shape()),
               shape_str(out.shape()));
  require_floating(in, op);
  if (in.dtype() != out.dtype())
    ROTOR_FAIL("{}: dtypes differ: {} vs {}", op, dtype_name(in.dtype()), dtype_name(out.dtype()));
  check_same_device(in, out, op);
  // p = 1 would scale by 1/0; a layer that drops everything has no use.
  if (!(p >= 0.0f && p < 1.0f)) ROTOR_FAIL("{}: probability must be in [0, 1), got {}", op, p);
}

// Philox4x32-10 (core/philox.h) of kBlocks consecutive counter blocks, in a
// struct of arrays so that the compiler runs the rounds on all of them at
// once in vector registers (vpmuludq), in clones for AVX-512, AVX2 and the
// baseline picked at load time. Integer arithmetic only: every clone draws
// the very bits philox4x32_10 draws. r[4 * b + lane] = lane of block first + b.
constexpr int kBlocks = 16;  // 64 elements per call

ROTOR_CPU_CLONES void philox_blocks_portable(uint64_t first, uint64_t stream, uint64_t seed,
                                             uint32_t* __restrict r) {
  // 32-bit words held in 64-bit lanes: (x & kLow) * M is the 32 x 32 -> 64
  // multiply the vector units have (vpmuludq); the words stay below 2^32.
  constexpr uint64_t kLow = 0xFFFFFFFFu;
  constexpr uint64_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint64_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint64_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];
  for (int b = 0; b < kBlocks; ++b) {
    const uint64_t block = first + static_cast<uint64_t>(b);
    c0[b] = block & kLow;
    c1[b] = block >> 32;
    c2[b] = stream & kLow;
    c3[b] = stream >> 32;
  }
  uint64_t k0 = seed & kLow, k1 = seed >> 32;
  for (int round = 0; round < 10; ++round) {
    for (int b = 0; b < kBlocks; ++b) {
      const uint64_t p0 = (c0[b] & kLow) * M0;
      const uint64_t p1 = (c2[b] & kLow) * M1;
      const uint64_t n0 = ((p1 >> 32) ^ c1[b] ^ k0) & kLow;
      const uint64_t n2 = ((p0 >> 32) ^ c3[b] ^ k1) & kLow;
      c0[b] = n0;
      c1[b] = p1 & kLow;
      c2[b] = n2;
      c3[b] = p0 & kLow;
    }
    k0 = (k0 + W0) & kLow;
    k1 = (k1 + W1) & kLow;
  }
  for (int b = 0; b < kBlocks; ++b) {
    r[4 * b] = static_cast<uint32_t>(c0[b]);
    r[4 * b + 1] = static_cast<uint32_t>(c1[b]);
    r[4 * b + 2] = static_cast<uint32_t>(c2[b]);
    r[4 * b + 3] = static_cast<uint32_t>(c3[b]);
  }
}

#if ROTOR_PHILOX_AVX2
// The same kBlocks blocks with AVX2 intrinsics, 8 blocks a vector: each of
// the four words of a block in its own 32-bit lane, the rounds run on
// registers (the portable loop above keeps its state in memory between
// rounds, and its 64-bit lanes halve the width: 3.5x slower on a 2-core
// AVX2 EPYC). vpmuludq multiplies the even lanes; the odd ones are shifted
// down, multiplied and blended back. Integer work: the bits are
// philox4x32_10's (test_core, test_ops_loss_embedding_dropout).
__attribute__((target("avx2"))) void philox_blocks_avx2(uint64_t first, uint64_t stream,
                                                        uint64_t seed, uint32_t* __restrict r) {
  static_assert(kBlocks % 8 == 0);
  const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u), m1 = _mm256_set1_epi64x(0xCD9E8D57u);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  for (int g = 0; g < kBlocks; g += 8) {
    // Blocks base + i: the low word wraps, and the high word takes its carry.
    const uint64_t base = first + static_cast<uint64_t>(g);
    const __m256i low = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(base)));
    __m256i c0 = _mm256_add_epi32(low, lane);
    const __m256i wrapped = _mm256_cmpgt_epi32(_mm256_xor_si256(low, sign),  // unsigned low > c0
                                               _mm256_xor_si256(c0, sign));
    __m256i c1 = _mm256_sub_epi32(
        _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(base >> 32))), wrapped);
    __m256i c2 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(stream)));
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(stream >> 32)));
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const __m256i e0 = _mm256_mul_epu32(c0, m0);
      const __m256i o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
      const __m256i e1 = _mm256_mul_epu32(c2, m1);
      const __m256i o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
      const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c1 = lo1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // Four words of 8 blocks to 8 blocks of four words: r[4 * (g + i) + w].
    const __m256i a = _mm256_unpacklo_epi32(c0, c1);  // blocks 0, 1 | 4, 5: words 0 and 1
    const __m256i b = _mm256_unpackhi_epi32(c0, c1);  // blocks 2, 3 | 6, 7
    const __m256i c = _mm256_unpacklo_epi32(c2, c3);  // words 2 and 3
    const __m256i d = _mm256_unpackhi_epi32(c2, c3);
    const __m256i b04 = _mm256_unpacklo_epi64(a, c), b15 = _mm256_unpackhi_epi64(a, c);
    const __m256i b26 = _mm256_unpacklo_epi64(b, d), b37 = _mm256_unpackhi_epi64(b, d);
    __m256i* out = reinterpret_cast<__m256i*>(r + 4 * g);
    _mm256_storeu_si256(out, _mm256_permute2x128_si256(b04, b15, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(b26, b37, 0x20));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(b04, b15, 0x31));
    _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(b26, b37, 0x31));
  }
}

// The same with AVX-512F, 16 blocks a vector: the AVX2 kernel's rounds
// with the odd lanes blended back by a mask, the carry into the high word
// taken by an unsigned compare; then the four words of 16 blocks go to
// r[4 * (g + i) + w] by 32-bit unpacks within each 128-bit lane (block 4L +
// j of lane L) and a 4 x 4 transpose of the 128-bit lanes. Integer work:
// philox4x32_10's bits, as the other two kernels.
// GCC 12's avx512fintrin.h makes its "undefined" vectors from themselves,
// which -Wuninitialized reports once inlined here (a known false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) void philox_blocks_avx512(uint64_t first, uint64_t stream,
                                                             uint64_t seed,
                                                             uint32_t* __restrict r) {
  static_assert(kBlocks % 16 == 0);
  const __m512i m0 = _mm512_set1_epi64(0xD2511F53u), m1 = _mm512_set1_epi64(0xCD9E8D57u);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  constexpr __mmask16 kOdd = 0xAAAA;
  for (int g = 0; g < kBlocks; g += 16) {
    const uint64_t base = first + static_cast<uint64_t>(g);
    const __m512i low = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base)));
    __m512i c0 = _mm512_add_epi32(low, lane);
    const __mmask16 wrapped = _mm512_cmpgt_epu32_mask(low, c0);
    const __m512i high = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(base >> 32)));
    __m512i c1 = _mm512_mask_add_epi32(high, wrapped, high, _mm512_set1_epi32(1));
    __m512i c2 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(stream)));
    __m512i c3 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(stream >> 32)));
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      const __m512i e0 = _mm512_mul_epu32(c0, m0);
      const __m512i o0 = _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), m0);
      const __m512i e1 = _mm512_mul_epu32(c2, m1);
      const __m512i o1 = _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), m1);
      const __m512i lo0 = _mm512_mask_blend_epi32(kOdd, e0, _mm512_slli_epi64(o0, 32));
      const __m512i hi0 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(e0, 32), o0);
      const __m512i lo1 = _mm512_mask_blend_epi32(kOdd, e1, _mm512_slli_epi64(o1, 32));
      const __m512i hi1 = _mm512_mask_blend_epi32(kOdd, _mm512_srli_epi64(e1, 32), o1);
      c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
      c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
      c1 = lo1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const __m512i a = _mm512_unpacklo_epi32(c0, c1);  // lane L: blocks 4L, 4L+1, words 0, 1
    const __m512i b = _mm512_unpackhi_epi32(c0, c1);  // blocks 4L+2, 4L+3
    const __m512i c = _mm512_unpacklo_epi32(c2, c3);  // words 2, 3
    const __m512i d = _mm512_unpackhi_epi32(c2, c3);
    const __m512i x0 = _mm512_unpacklo_epi64(a, c);         // lane L: block 4L
    const __m512i x1 = _mm512_unpackhi_epi64(a, c);         // 4L + 1
    const __m512i x2 = _mm512_unpacklo_epi64(b, d);         // 4L + 2
    const __m512i x3 = _mm512_unpackhi_epi64(b, d);         // 4L + 3
    const __m512i t0 = _mm512_shuffle_i32x4(x0, x1, 0x44);  // blocks 0, 4, 1, 5
    const __m512i t1 = _mm512_shuffle_i32x4(x2, x3, 0x44);  // 2, 6, 3, 7
    const __m512i t2 = _mm512_shuffle_i32x4(x0, x1, 0xEE);  // 8, 12, 9, 13
    const __m512i t3 = _mm512_shuffle_i32x4(x2, x3, 0xEE);  // 10, 14, 11, 15
    uint32_t* out = r + 4 * g;
    _mm512_storeu_si512(out, _mm512_shuffle_i32x4(t0, t1, 0x88));       // 0 1 2 3
    _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(t0, t1, 0xDD));  // 4 5 6 7
    _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(t2, t3, 0x88));  // 8 9 10 11
    _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(t2, t3, 0xDD));  // 12 13 14 15
  }
}
#pragma GCC diagnostic pop
#endif

// r[4 * b + lane] = lane of Philox block first + b, b < kBlocks: the
// AVX-512 kernel where the CPU has it, else the AVX2 one, else the portable
// one.
void philox_blocks(uint64_t first, uint64_t stream, uint64_t seed, uint32_t* __restrict r) {
#if ROTOR_PHILOX_AVX2
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return philox_blocks_avx512(first, stream, seed, r);
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return philox_blocks_avx2(first, stream, seed, r);
#endif
  philox_blocks_portable(first, stream, seed, r);
}

// Elements [begin, end) of out = (res +) in * keep / (1 - p), the random
// words of their blocks in r (r[0] for element 4 * first_block). No FMA
// contraction (fp-contract off for this file): every clone rounds the
// product and the sum apart, as the baseline does.
ROTOR_CPU_CLONES void mask_span(const uint32_t* __restrict r, const float* in, const float* res,
                                float* out, int64_t n, float p, float keep_scale) {
  // in, res and out may be one array (in place): element i is read before it is written.
  for (int64_t i = 0; i < n; ++i) {
    // Below 2^24: the signed conversion is exact and has a vector instruction.
    const float u = static_cast<float>(static_cast<int32_t>(r[i] >> 8)) * (1.0f / 16777216.0f);
    const float d = u >= p ? in[i] * keep_scale : 0.0f;
    out[i] = res ? res[i] + d : d;
  }
}

// factor[i] = keep(i) ? keep_scale : 0 from the random words r.
ROTOR_CPU_CLONES void factor_span(const uint32_t* __restrict r, float* factor, int64_t n, float p,
                                  float keep_scale) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(static_cast<int32_t>(r[i] >> 8)) * (1.0f / 16777216.0f);
    factor[i] = u >= p ? keep_scale : 0.0f;
  }
}

// out[i] = (residual[i] +) in[i] * keep(i) / (1 - p): forward and backward
// are the same map. In f32; 16-bit tensors through f32 copies, rounded once.
void apply_mask(const Tensor* residual16, const Tensor& in16, Tensor& out16, float p, uint64_t seed,
                uint64_t stream) {
  detail::F32Compute f;
  const Tensor in = f.input(in16);
  const Tensor res = residual16 ? f.input(*residual16) : Tensor();
  Tensor out = f.output(out16);
  const float* pin = in.data<float>();
  const float* pres = residual16 ? res.data<float>() : nullptr;
  float* pout = out.data<float>();
  const int64_t n = in.numel();
  if (p == 0.0f && !pres) {
    if (pin != pout) out.copy_from(in);
    f.commit();
    return;
  }
  const float keep_scale = 1.0f / (1.0f - p);
  // Element i uses lane i % 4 of Philox block i / 4 (as philox_u32 defines);
  // a chunk is kBlocks blocks, drawn together.
  constexpr int64_t kChunk = 4 * kBlocks;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    alignas(64) uint32_t r[kChunk];
    philox_blocks(static_cast<uint64_t>(c) * kBlocks, stream, seed, r);
    const int64_t begin = c * kChunk, len = std::min(kChunk, n - begin);
    mask_span(r, pin + begin, pres ? pres + begin : nullptr, pout + begin, len, p, keep_scale);
  }
  f.commit();
}
}  // namespace

void dropout_forward(const Tensor& x, Tensor& y, float p, uint64_t seed, uint64_t stream) {
  check_dropout(x, y, p, "dropout_forward");
  ROTOR_DISPATCH_CUDA(x, dropout_forward(x, y, p, seed, stream));
  apply_mask(nullptr, x, y, p, seed, stream);
}

void dropout_backward(const Tensor& dy, Tensor& dx, float p, uint64_t seed, uint64_t stream) {
  check_dropout(dy, dx, p, "dropout_backward");
  ROTOR_DISPATCH_CUDA(dy, dropout_backward(dy, dx, p, seed, stream));
  apply_mask(nullptr, dy, dx, p, seed, stream);
}

void dropout_add_forward(const Tensor& residual, const Tensor& x, float p, uint64_t seed,
                         uint64_t stream, Tensor& out) {
  check_dropout(x, out, p, "dropout_add_forward");
  check_dropout(residual, out, p, "dropout_add_forward residual");
  ROTOR_DISPATCH_CUDA(x, dropout_add_forward(residual, x, p, seed, stream, out));
  apply_mask(&residual, x, out, p, seed, stream);
}

namespace detail {

bool philox_kernel_blocks(const char* kernel, uint64_t first, uint64_t stream, uint64_t seed,
                          uint32_t* r) {
  static_assert(kBlocks == 16);
  const std::string_view k = kernel;
  if (k == "portable") {
    philox_blocks_portable(first, stream, seed, r);
    return true;
  }
#if ROTOR_PHILOX_AVX2
  if (k == "avx512" && __builtin_cpu_supports("avx512f")) {
    philox_blocks_avx512(first, stream, seed, r);
    return true;
  }
  if (k == "avx2" && __builtin_cpu_supports("avx2")) {
    philox_blocks_avx2(first, stream, seed, r);
    return true;
  }
#endif
  return false;
}

void dropout_factors(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float p,
                     float* factor) {
  const float keep_scale = 1.0f / (1.0f - p);
  alignas(64) uint32_t r[4 * kBlocks];
  for (int64_t done = 0; done < n;) {
    const uint64_t index = first + static_cast<uint64_t>(done);
    const int64_t skip = static_cast<int64_t>(index & 3);  // lanes before `index` in its block
    philox_blocks(index >> 2, stream, seed, r);
    const int64_t take = std::min<int64_t>(4 * kBlocks - skip, n - done);
    factor_span(r + skip, factor + done, take, p, keep_scale);
    done += take;
  }
}

}  // namespace detail

}  // namespace rotor::ops
