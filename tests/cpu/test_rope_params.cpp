// model.rope's settings (core/rope.h): the context scalings against their
// formulas with hand-computed values in double, dynamic NTK leaving short
// sequences alone, the unrotated dimensions of a partial rotation left
// bitwise untouched, the half layout as the interleaved one with permuted
// q/k rows, and the flash core's in-kernel rotation as the head split's.
#include <gtest/gtest.h>

#include <cmath>

#include "config/config.h"
#include "core/rope.h"
#include "ops/attention.h"
#include "ops/flash_attention.h"
#include "ops/heads.h"
#include "support/test_util.h"
#include "support/tiny_configs.h"

namespace rotor {
namespace {

using rope::Params;
using rope::Scaling;

Params scaled(Scaling s, double factor, int64_t original_max = 0) {
  Params p;
  p.scaling = s;
  p.factor = factor;
  p.original_max_positions = original_max;
  return p;
}

TEST(RopeParams, LinearAtMIsUnscaledAtMOverS) {
  const Params linear = scaled(Scaling::Linear, 4.0), plain;
  const int64_t R = 16;
  for (int64_t m : {0, 4, 8, 100, 1024, 4096})
    for (int64_t i = 0; i < R / 2; ++i) {
      const rope::Rotation a = rope::rotation(linear, m, i, R),
                           b = rope::rotation(plain, m / 4, i, R);
      EXPECT_EQ(a.cos, b.cos) << m << " " << i;  // a power-of-two factor: bitwise
      EXPECT_EQ(a.sin, b.sin) << m << " " << i;
    }
  // Any factor and position: the angle of position m / s, in double.
  const Params third = scaled(Scaling::Linear, 3.0);
  for (int64_t m : {1, 7, 500, 3001})
    for (int64_t i = 0; i < R / 2; ++i) {
      const double angle = (static_cast<double>(m) / 3.0) * std::pow(10000.0, -2.0 * i / R);
      const rope::Rotation r = rope::rotation(third, m, i, R);
      EXPECT_NEAR(r.cos, std::cos(angle), 1e-6);
      EXPECT_NEAR(r.sin, std::sin(angle), 1e-6);
    }
}

TEST(RopeParams, NtkRaisesTheBase) {
  // base 10000, s = 4, R = 8: base' = 10000 * 4^(8/6) = 63496.042078727978.
  const Params ntk = scaled(Scaling::Ntk, 4.0);
  EXPECT_NEAR(rope::ntk_base(10000.0, 4.0, 8), 63496.042078727978, 1e-8);
  // 63496.04^(-2i/8) = 10000^(-i/4) 4^(-i/3)
  const double expected[4] = {1.0, 0.06299605249474366, 0.003968502629920499, 0.00025};
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_NEAR(rope::frequency(ntk, i, 8), expected[i], 1e-12 * (1 + expected[i])) << i;
  EXPECT_EQ(rope::attention_factor(ntk), 1.0);
}

TEST(RopeParams, DynamicNtkChangesNothingUpToTheOriginalContext) {
  const Params dyn = scaled(Scaling::DynamicNtk, 4.0, 64), plain;
  const int64_t D = 8;
  for (int64_t length : {1, 17, 64}) {
    const Params at = rope::at_length(dyn, D, length);
    EXPECT_EQ(at.scaling, Scaling::None);
    EXPECT_EQ(at.theta, plain.theta);
    for (int64_t m = 0; m < length; ++m)
      for (int64_t i = 0; i < D / 2; ++i) {
        EXPECT_EQ(rope::rotation(at, m, i, D).cos, rope::rotation(plain, m, i, D).cos);
        EXPECT_EQ(rope::rotation(at, m, i, D).sin, rope::rotation(plain, m, i, D).sin);
      }
  }
  // Past it, Hugging Face's base: 10000 * (4 * 128 / 64 - 3)^(8/6) = 10000 * 5^(4/3).
  const Params at = rope::at_length(dyn, D, 128);
  EXPECT_NEAR(at.theta, 85498.797333834835, 1e-7);
  EXPECT_NEAR(rope::frequency(at, 1, D), std::pow(85498.797333834835, -0.25), 1e-15);

  // Through the head split: a call of T <= 64 positions is bitwise unscaled.
  const int64_t B = 1, H = 2;
  auto split = [&](const Params& p, const Tensor& x, int64_t offset) {
    const int64_t T = x.size(1);
    std::vector<Tensor> parts{Tensor::zeros({B, H, T, D}), Tensor::zeros({B, H, T, D})};
    ops::SplitHeadsOptions o;
    o.n_heads = H;
    o.rope_parts = 2;
    o.rope = p;
    o.position_offset = offset;
    ops::split_heads_forward(x, parts, o);
    return parts[0].to_floats();
  };
  const Tensor x = test::random_tensor({B, 64, 2 * H * D}, 5);
  const Tensor step = test::random_tensor({B, 1, 2 * H * D}, 6);
  EXPECT_EQ(split(dyn, x, 0), split(plain, x, 0));
  EXPECT_EQ(split(dyn, step, 63), split(plain, step, 63));  // a decode step at position 63
  EXPECT_NE(split(dyn, step, 64), split(plain, step, 64));  // the 65th position is scaled
}

TEST(RopeParams, YarnBlendsAndScales) {
  // base 10000, R = 8, 64 original positions, s = 4. The ramp's bounds:
  // floor(8 ln(64 / (32 2pi)) / (2 ln 10000)) = floor(-0.497) -> 0 and
  // ceil(8 ln(64 / (2pi)) / (2 ln 10000)) = ceil(1.008) = 2, so pair i keeps
  // 1 - i/2 of its frequency theta_i = 10000^(-i/4) and takes i/2 of theta_i / 4.
  const Params yarn = scaled(Scaling::Yarn, 4.0, 64);
  const double expected[4] = {1.0, 0.1 * (0.5 + 0.5 / 4), 0.01 / 4, 0.001 / 4};
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(rope::frequency(yarn, i, 8), expected[i], 1e-15) << i;
  const double a = 0.1 * std::log(4.0) + 1.0;  // 1.1386294361119891
  EXPECT_NEAR(rope::attention_factor(yarn), 1.1386294361119891, 1e-15);
  const rope::Rotation r = rope::rotation(yarn, 10, 1, 8);
  EXPECT_EQ(r.cos, static_cast<float>(a * std::cos(10 * expected[1])));
  EXPECT_EQ(r.sin, static_cast<float>(a * std::sin(10 * expected[1])));
  EXPECT_EQ(rope::attention_factor(scaled(Scaling::Yarn, 1.0, 64)), 1.0);
}

TEST(RopeParams, Llama3KeepsFastPairsDividesSlowOnesAndBlendsBetween) {
  // base 10000, R = 8: theta_i = 1, 0.1, 0.01, 0.001, wavelengths 2 pi /
  // theta_i = 6.28, 62.8, 628, 6283. Original context 1024, factors 1 and 4:
  // wavelengths below 1024 / 4 = 256 keep theta_i, above 1024 / 1 are
  // divided by s = 8, and pair 2 (628) blends with weight
  // (1024 / 628.3 - 1) / (4 - 1) on the unscaled frequency.
  Params p = scaled(Scaling::Llama3, 8.0, 1024);
  const double two_pi = 6.283185307179586, w = (1024.0 / (two_pi / 0.01) - 1.0) / 3.0;
  const double expected[4] = {1.0, 0.1, (1.0 - w) * 0.01 / 8.0 + w * 0.01, 0.001 / 8.0};
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_NEAR(rope::frequency(p, i, 8), expected[i], 1e-15 * (1 + expected[i])) << i;
  EXPECT_GT(w, 0.2);  // pair 2 is really blended
  EXPECT_LT(w, 0.22);
  EXPECT_EQ(rope::attention_factor(p), 1.0);
  // A factor of 1 scales nothing.
  const Params one = scaled(Scaling::Llama3, 1.0, 1024), plain;
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_NEAR(rope::frequency(one, i, 8), rope::frequency(plain, i, 8), 1e-18) << i;
  // The factors move the bounds: low 4 puts pair 2 (628 > 256) among the divided ones.
  p.low_freq_factor = 4.0;
  p.high_freq_factor = 16.0;
  EXPECT_NEAR(rope::frequency(p, 2, 8), 0.01 / 8.0, 1e-18);
}

// The llama3 keys at load: read under llama3 only, and the high factor
// above the low one; each a line naming the key.
TEST(RopeParams, Llama3KeysAreCheckedAtLoad) {
  const auto error = [](const std::string& rope) {
    try {
      load_config_from_string(test::tiny_lm().set("model.rope", rope).text());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("{scaling: llama3, factor: 8, low_freq_factor: 2, high_freq_factor: 8}"),
            "no error");
  EXPECT_NE(error("{scaling: linear, factor: 2, low_freq_factor: 2}")
                .find("model.rope.low_freq_factor: 2 is read by model.rope.scaling llama3 only"),
            std::string::npos);
  EXPECT_NE(error("{scaling: llama3, factor: 8, low_freq_factor: 4, high_freq_factor: 2}")
                .find("model.rope.high_freq_factor: 2 must be above model.rope.low_freq_factor = "
                      "4"),
            std::string::npos)
      << error("{scaling: llama3, factor: 8, low_freq_factor: 4, high_freq_factor: 2}");
}

// [B, T, 2*H*D] split with every option of p; part 1 (k, unscaled).
std::vector<float> keys(const Tensor& x, int64_t H, int64_t D, const Params& p) {
  const int64_t B = x.size(0), T = x.size(1);
  std::vector<Tensor> parts{Tensor::zeros({B, H, T, D}), Tensor::zeros({B, H, T, D})};
  ops::SplitHeadsOptions o;
  o.n_heads = H;
  o.rope_parts = 2;
  o.rope = p;
  o.position_offset = 3;
  ops::split_heads_forward(x, parts, o);
  return parts[1].to_floats();
}

TEST(RopeParams, FractionLeavesTheOtherDimensionsUntouched) {
  const int64_t B = 2, T = 5, H = 2, D = 16;
  const Tensor x = test::random_tensor({B, T, 2 * H * D}, 7);
  const std::vector<float> xv = x.to_floats();
  for (rope::Layout layout : {rope::Layout::Interleaved, rope::Layout::Half}) {
    Params p = scaled(Scaling::Yarn, 8.0, 16);
    p.fraction = 0.25;  // R = 4
    p.layout = layout;
    const std::vector<float> k = keys(x, H, D, p);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          for (int64_t j = 4; j < D; ++j)
            EXPECT_EQ(k[((b * H + h) * T + t) * D + j],
                      xv[((b * T + t) * 2 + 1) * H * D + h * D + j]);
          bool moved = false;
          for (int64_t j = 0; j < 4; ++j)
            moved |=
                k[((b * H + h) * T + t) * D + j] != xv[((b * T + t) * 2 + 1) * H * D + h * D + j];
          EXPECT_TRUE(moved);
        }
  }
}

// GPT-NeoX's row j of the R rotated rows from the interleaved row (2j, 2j+1).
int64_t interleaved_row(int64_t j, int64_t R) {
  return j < R / 2 ? 2 * j : j < R ? 2 * (j - R / 2) + 1 : j;
}

TEST(RopeParams, HalfLayoutIsInterleavedWithPermutedRows) {
  const int64_t B = 1, T = 9, H = 2, D = 8;
  for (double fraction : {1.0, 0.5}) {
    const int64_t R = static_cast<int64_t>(D * fraction);
    const Tensor x = test::random_tensor({B, T, 3 * H * D}, 11);
    // The projection output with q and k rows of each head permuted.
    std::vector<float> xv = x.to_floats(), xp = xv;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t p = 0; p < 2; ++p)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t j = 0; j < D; ++j) {
            const int64_t row = (t * 3 + p) * H * D + h * D;
            xp[row + j] = xv[row + interleaved_row(j, R)];
          }
    auto attend = [&](const std::vector<float>& in, rope::Layout layout) {
      std::vector<Tensor> parts{Tensor::zeros({B, H, T, D}), Tensor::zeros({B, H, T, D}),
                                Tensor::zeros({B, H, T, D})};
      ops::SplitHeadsOptions o;
      o.n_heads = H;
      o.rope_parts = 2;
      o.rope.layout = layout;
      o.rope.fraction = fraction;
      o.position_offset = 40;
      o.part0_scale = 0.25f;
      ops::split_heads_forward(Tensor::from_floats(in, {B, T, 3 * H * D}), parts, o);
      ops::AttentionOptions ao;
      ao.causal = true;
      Tensor out = Tensor::zeros({B, H, T, D}), probs = Tensor::zeros({B, H, T, T});
      ops::attention_forward(parts[0], parts[1], parts[2], ao, out, probs);
      return out.to_floats();
    };
    const std::vector<float> a = attend(xv, rope::Layout::Interleaved),
                             b = attend(xp, rope::Layout::Half);
    EXPECT_LT(test::max_rel_error(b, a), 1e-6) << fraction;
  }
}

// The flash core's in-kernel rotation (the CPU twin) is the head split's,
// for every layout, fraction and scaling.
TEST(RopeParams, FlashInKernelRotationIsTheSplits) {
  const int64_t B = 1, T = 12, H = 2, D = 16;
  const Tensor x = test::random_tensor({B, T, 3 * H * D}, 13);
  for (rope::Layout layout : {rope::Layout::Interleaved, rope::Layout::Half})
    for (Scaling s :
         {Scaling::None, Scaling::Linear, Scaling::DynamicNtk, Scaling::Yarn, Scaling::Llama3}) {
      Params p = scaled(s, s == Scaling::None ? 1.0 : 2.0, 8);
      p.layout = layout;
      p.fraction = 0.5;
      auto run = [&](bool in_kernel) {
        std::vector<Tensor> parts{Tensor::zeros({B, H, T, D}), Tensor::zeros({B, H, T, D}),
                                  Tensor::zeros({B, H, T, D})};
        ops::SplitHeadsOptions o;
        o.n_heads = H;
        o.rope_parts = in_kernel ? 0 : 2;
        o.rope = p;
        ops::split_heads_forward(x, parts, o);
        ops::AttentionOptions ao;
        ao.causal = true;
        ao.scale = 0.25f;
        ao.rope = in_kernel;
        ao.rope_params = p;
        Tensor out = Tensor::zeros({B, H, T, D}), lse = Tensor::zeros({B, H, T});
        ops::flash_attention_forward(parts[0], parts[1], parts[2], ao, out, lse);
        return out.to_floats();
      };
      EXPECT_EQ(run(true), run(false)) << static_cast<int>(layout) << " " << static_cast<int>(s);
    }
}

TEST(RopeParams, BadSettingsAreOneLine) {
  const Tensor x = test::random_tensor({1, 2, 2 * 8}, 1);
  auto error = [&](const Params& p) {
    std::vector<Tensor> parts{Tensor::zeros({1, 1, 2, 8}), Tensor::zeros({1, 1, 2, 8})};
    ops::SplitHeadsOptions o;
    o.rope_parts = 2;
    o.rope = p;
    try {
      ops::split_heads_forward(x, parts, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Params odd;
  odd.fraction = 0.375;  // 3 of 8 dims
  EXPECT_NE(error(odd).find("rotates 3 dimensions"), std::string::npos) << error(odd);
  EXPECT_NE(error(scaled(Scaling::Yarn, 2.0)).find("original context"), std::string::npos);
  EXPECT_NE(error(scaled(Scaling::Llama3, 2.0)).find("original context"), std::string::npos);
  Params inverted = scaled(Scaling::Llama3, 2.0, 64);
  inverted.high_freq_factor = 0.5;
  EXPECT_NE(error(inverted).find("0 < low_freq_factor < high_freq_factor"), std::string::npos);
  EXPECT_NE(error(scaled(Scaling::Linear, 0.5)).find("factor"), std::string::npos);
}

}  // namespace
}  // namespace rotor
