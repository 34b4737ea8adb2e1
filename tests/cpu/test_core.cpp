// Core: Philox known answers, 16-bit float conversions, Tensor views and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/philox.h"
#include "core/tensor.h"
#include "support/test_util.h"

namespace rotor {
namespace {

// Random123's kat_vectors for philox4x32_10.
TEST(Philox, KnownAnswerVectors) {
  Philox4 r = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  const uint32_t ones = 0xffffffffu;
  r = philox4x32_10(ones, ones, ones, ones, ones, ones);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(Philox, StreamLayoutAndUniform) {
  const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
  for (uint64_t i : {0ull, 1ull, 2ull, 3ull, 4ull, 7ull, (1ull << 34) + 5}) {
    Philox4 r = philox4x32_10(static_cast<uint32_t>(i >> 2), static_cast<uint32_t>(i >> 34),
                              static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                              static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    EXPECT_EQ(philox_u32(seed, stream, i), r.v[i & 3]) << "index " << i;
  }
  PhiloxRng rng(7, 9);
  double mean = 0;
  for (int i = 0; i < 10000; ++i) {
    float u = rng.uniform();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    mean += u;
  }
  EXPECT_NEAR(mean / 10000, 0.5, 0.02);
  EXPECT_EQ(rng.position(), 10000u);
  // Distinct (step, layer, purpose, rank) tuples give distinct streams.
  EXPECT_NE(rng_stream(1, 0, RngPurpose::Dropout, 0), rng_stream(0, 1, RngPurpose::Dropout, 0));
  EXPECT_NE(rng_stream(0, 0, RngPurpose::Dropout, 1), rng_stream(0, 0, RngPurpose::Init, 1));
  PhiloxRng a(3, 4), b(3, 4);
  for (int i = 0; i < 100; ++i) EXPECT_LT(a.below(10), 10u);
  for (int i = 0; i < 10; ++i) b.next_u32();
  EXPECT_NE(a.position(), 0u);
}

float f_from_bits(uint32_t u) {
  return bits_float(u);
}

TEST(Half, FloatToHalfBits) {
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(0.1f), 0x2e66);
  EXPECT_EQ(float_to_half_bits(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // halfway to 2^16 rounds to even = inf
  EXPECT_EQ(float_to_half_bits(1e6f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  // Round to nearest even at a normal halfway point: 1 + 2^-11 -> 1, 1 + 3*2^-11 -> 1 + 2^-9.
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Subnormals: 2^-14 is the smallest normal, 2^-24 the smallest subnormal.
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp tie -> even (2)
  EXPECT_EQ(float_to_half_bits(std::ldexp(5.0f, -25)), 0x0002);  // 2.5 ulp tie -> even (2)
  EXPECT_EQ(float_to_half_bits(-std::ldexp(1023.0f, -24)), 0x83ff);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
  EXPECT_EQ(float_to_half_bits(f_from_bits(0x00000001u)), 0x0000);  // float subnormal
  uint16_t nan = float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

TEST(Half, HalfBitsToFloat) {
  EXPECT_EQ(half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_bits_to_float(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(half_bits_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_bits_to_float(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(float_bits(half_bits_to_float(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isinf(half_bits_to_float(0x7c00)));
  EXPECT_LT(half_bits_to_float(0xfc00), 0.0f);
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7c01)));
  // Every finite half survives a round trip through float.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7c00u) == 0x7c00u) continue;
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(BFloat16, Conversions) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16_bits(0.1f), 0x3dcd);
  EXPECT_EQ(float_to_bf16_bits(f_from_bits(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16_bits(f_from_bits(0x3f818000u)), 0x3f82);  // tie -> even
  EXPECT_EQ(float_to_bf16_bits(f_from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(f_from_bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(f_from_bits(0x00012345u)), 0x0001);  // subnormal
  EXPECT_EQ(float_to_bf16_bits(f_from_bits(0x80000000u)), 0x8000);
  uint16_t nan = float_to_bf16_bits(f_from_bits(0x7f800001u));  // signalling NaN stays NaN
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_EQ(float_bits(bf16_bits_to_float(0x0001)), 0x00010000u);
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(0x7fc0)));
  EXPECT_EQ(to_float(to_bf16(3.0f)), 3.0f);
  EXPECT_EQ(to_float(to_half(3.0f)), 3.0f);
}

TEST(DType, NamesAndParse) {
  EXPECT_EQ(parse_dtype("fp16"), DType::F16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::BF16);
  EXPECT_EQ(parse_dtype("float32"), DType::F32);
  EXPECT_THROW(parse_dtype("f64"), Error);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_STREQ(dtype_name(DType::U8), "u8");
}

TEST(Tensor, FromFloatsViewsAndCopies) {
  Tensor t = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});  // [2, 3]
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.str(), "f32[2, 3] on cpu");
  Tensor v = t.view({3, -1});  // [3, 2]
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(v.to_floats(), t.to_floats());
  Tensor row = t.narrow(1, 1);  // [1, 3], same storage
  EXPECT_EQ(row.to_floats(), (std::vector<float>{4, 5, 6}));
  row.data<float>()[0] = 40;
  EXPECT_EQ(t.to_floats()[3], 40.0f);
  Tensor s = t.select(0);  // [3]
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(s.to_floats(), (std::vector<float>{1, 2, 3}));
  Tensor c = t.clone();
  c.data<float>()[0] = -1;
  EXPECT_EQ(t.to_floats()[0], 1.0f);
  Tensor dst = Tensor::zeros({6});
  dst.copy_from(t);
  EXPECT_EQ(dst.to_floats(), t.to_floats());
  dst.zero_();
  EXPECT_EQ(dst.to_floats(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(Tensor::full({2}, 2.5f).to_floats(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(Tensor::from_ints({3, -4}, {2}).to_ints(), (std::vector<int32_t>{3, -4}));
  EXPECT_EQ(Tensor::from_bytes({1, 255}, {2}).to_ints(), (std::vector<int32_t>{1, 255}));
  EXPECT_EQ(Tensor::from_floats({7}, {1}).item(), 7.0f);
  Tensor empty_rows = t.narrow(2, 0);  // [0, 3]
  EXPECT_EQ(empty_rows.numel(), 0);
}

TEST(Tensor, LowPrecisionStorage) {
  Tensor h = Tensor::from_floats({1.0f, 0.1f, 65520.0f}, {3}, DType::F16);
  EXPECT_EQ(h.nbytes(), 6u);
  EXPECT_EQ(h.data<Half>()[1].bits, 0x2e66);
  auto back = h.to_floats();
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_TRUE(std::isinf(back[2]));
  Tensor b = Tensor::from_floats({0.1f}, {1}, DType::BF16);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, 0x3dcd);
}

TEST(Tensor, Errors) {
  Tensor t = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_THROW(t.view({4, 2}), Error);
  EXPECT_THROW(t.view({-1, -1}), Error);
  EXPECT_THROW(t.narrow(1, 2), Error);
  EXPECT_THROW(t.narrow(-1, 1), Error);
  EXPECT_THROW(t.size(2), Error);
  EXPECT_THROW(t.data<int32_t>(), Error);
  EXPECT_THROW(t.item(), Error);
  Tensor i = Tensor::from_ints({1, 2, 3, 4, 5, 6}, {6});
  EXPECT_THROW(i.copy_from(t), Error);  // dtype mismatch
  Tensor small = Tensor::zeros({5});
  EXPECT_THROW(small.copy_from(t), Error);  // element count mismatch
  EXPECT_THROW(Tensor::from_floats({1, 2}, {3}), Error);
  EXPECT_THROW(check_shape(t, {3, 2}, "weights"), Error);
  try {
    check_shape(t, {3, 2}, "weights");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weights"), std::string::npos);
  }
  EXPECT_THROW(Tensor::empty({-1}), Error);
}

}  // namespace
}  // namespace rotor
