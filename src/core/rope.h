// Rotary position embedding's arithmetic, written once for every place that
// rotates: the CPU head split (src/ops/heads.cpp) and its kernel
// (kernels/heads.cu), the flash cores' in-kernel rotation (the CPU twin
// src/ops/flash_attention.cpp and kernels/flash_attention_tc.cu), the decode
// cache (through the head split) and linear attention
// (src/ops/linear_attention_features.cpp). RoFormer eq. 34: pair i of the
// first R = rotated_dims(p, D) dimensions of a head of dimension D is rotated
// at position m by the angle m theta_i, theta_i = base^(-2i/R):
//   y[a] = x[a] cos(m theta_i) - x[b] sin(m theta_i)
//   y[b] = x[b] cos(m theta_i) + x[a] sin(m theta_i)
// with (a, b) = (2i, 2i+1) in the interleaved layout (RoFormer, GPT-J) and
// (i, i + R/2) in the half layout (GPT-NeoX, LLaMA); dimensions R..D-1 pass
// unchanged (GPT-NeoX's rotary_pct). The context scalings (linear, NTK,
// dynamic NTK, YaRN, Llama 3.1's) change theta_i (and
// YaRN also multiplies cos and sin), with the formulas of Hugging Face's
// modeling_rope_utils (docs/design.md, "RoPE parameters").
// Angles are computed in double on both sides and their cosine and sine
// rounded to float: at position ~1500 an fp32 angle would already be off by
// ~1e-4 rad, and both devices then rotate by the same float factors. Never
// compile this with fast-math sin/cos.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"  // ROTOR_HD

namespace rotor::rope {

enum class Layout : int32_t { Interleaved = 0, Half = 1 };
enum class Scaling : int32_t { None = 0, Linear, Ntk, DynamicNtk, Yarn, Llama3 };

// YaRN's ramp bounds (Peng et al. 2023; Hugging Face's defaults): pairs that
// turn more than kYarnBetaFast times over the original context keep their
// frequency, those turning fewer than kYarnBetaSlow times are interpolated.
constexpr double kYarnBetaFast = 32.0;
constexpr double kYarnBetaSlow = 1.0;

// The settings of model.rope, as the config holds them (config/config.h:
// ModelConfig::rope, its keys these fields' names) and as the kernels take
// them by value. factor s >= 1; original_max_positions: the context the model
// was trained at (dynamic_ntk, yarn); 0 in a config means model.max_positions,
// which models/model_config.cpp puts in before a layer sees it.
struct Params {
  double theta = 10000.0;  // the base of theta_i = theta^(-2i/R)
  double fraction = 1.0;   // of each head's dimensions rotated (the first R = int(D fraction))
  Layout layout = Layout::Interleaved;  // pairs (2i, 2i+1) or (i, i + R/2)
  Scaling scaling = Scaling::None;      // context scaling
  double factor = 1.0;                  // its s
  int64_t original_max_positions = 0;
  // llama3 (Llama 3.1): pairs whose wavelength 2 pi / theta_i is below
  // original_max_positions / high_freq_factor keep their frequency, those
  // above original_max_positions / low_freq_factor are divided by s, and
  // those between blend the two.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
};

// Written out rather than defaulted: the CUDA sources build as C++17.
inline bool operator==(const Params& a, const Params& b) {
  return a.theta == b.theta && a.fraction == b.fraction && a.layout == b.layout &&
         a.scaling == b.scaling && a.factor == b.factor &&
         a.original_max_positions == b.original_max_positions &&
         a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor;
}
inline bool operator!=(const Params& a, const Params& b) {
  return !(a == b);
}

// R: the rotated dimensions of a head of dimension D, int(D * fraction) as
// GPT-NeoX's rotary_ndims (callers check that it is even and > 0).
ROTOR_HD int64_t rotated_dims(const Params& p, int64_t head_dim) {
  return static_cast<int64_t>(static_cast<double>(head_dim) * p.fraction);
}

// Whether p rotates like RoFormer eq. 34 over the whole head (interleaved
// pairs, every dimension): what the tensor-core kernel's fragments can do.
ROTOR_HD bool interleaved_full(const Params& p, int64_t head_dim) {
  return p.layout == Layout::Interleaved && rotated_dims(p, head_dim) == head_dim;
}

// The NTK-aware base, base * s^(R/(R-2)) (R >= 4).
ROTOR_HD double ntk_base(double base, double factor, int64_t rotated) {
  const double r = static_cast<double>(rotated);
  return base * std::pow(factor, r / (r - 2.0));
}

// p as it rotates a call whose current length is `length` (1 + the largest
// position the call rotates; docs/design.md): dynamic_ntk past original_max_positions
// becomes the NTK base of Hugging Face's dynamic scaling,
// base * (s L / original_max_positions - (s - 1))^(R/(R-2)), and up to original_max_positions
// plain RoPE. Every other scaling is returned as it is.
ROTOR_HD Params at_length(Params p, int64_t head_dim, int64_t length) {
  if (p.scaling != Scaling::DynamicNtk) return p;
  p.scaling = Scaling::None;
  if (length > p.original_max_positions) {
    const double s = p.factor;
    const double grown =
        s * static_cast<double>(length) / static_cast<double>(p.original_max_positions);
    p.theta = ntk_base(p.theta, grown - (s - 1.0), rotated_dims(p, head_dim));
  }
  return p;
}

// YaRN's blend of pair `pair` (0: keep the frequency, 1: divide it by s): a
// linear ramp between the pairs that turn kYarnBetaFast and kYarnBetaSlow
// times over original_max_positions positions, rounded outwards and clamped to [0, R-1].
ROTOR_HD double yarn_ramp(const Params& p, int64_t pair, int64_t rotated) {
  const double r = static_cast<double>(rotated), two_pi = 6.283185307179586476925;
  const double ctx = static_cast<double>(p.original_max_positions),
               log_base = 2.0 * std::log(p.theta);
  double low = std::floor(r * std::log(ctx / (kYarnBetaFast * two_pi)) / log_base);
  double high = std::ceil(r * std::log(ctx / (kYarnBetaSlow * two_pi)) / log_base);
  low = low < 0.0 ? 0.0 : low;
  high = high > r - 1.0 ? r - 1.0 : high;
  if (low == high) high += 0.001;
  const double t = (static_cast<double>(pair) - low) / (high - low);
  return t < 0.0 ? 0.0 : t > 1.0 ? 1.0 : t;
}

// What YaRN multiplies cos and sin by: 0.1 ln s + 1 (1 for s <= 1 and for
// the other scalings).
ROTOR_HD double attention_factor(const Params& p) {
  if (p.scaling != Scaling::Yarn || !(p.factor > 1.0)) return 1.0;
  return 0.1 * std::log(p.factor) + 1.0;
}

// Llama 3.1's frequency for the unscaled theta_i (Hugging Face's
// _compute_llama3_parameters): wavelength 2 pi / theta against the original
// context divided by the high and low factors.
ROTOR_HD double llama3_frequency(const Params& p, double theta) {
  const double two_pi = 6.283185307179586476925;
  const double ctx = static_cast<double>(p.original_max_positions), wavelength = two_pi / theta;
  if (wavelength < ctx / p.high_freq_factor) return theta;            // fast pairs: kept
  if (wavelength > ctx / p.low_freq_factor) return theta / p.factor;  // slow pairs: interpolated
  const double smooth =
      (ctx / wavelength - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
  return (1.0 - smooth) * theta / p.factor + smooth * theta;
}

// theta_i of pair `pair` of the R = `rotated` rotated dimensions. dynamic_ntk
// must have been resolved by at_length (here it counts as unscaled).
ROTOR_HD double frequency(const Params& p, int64_t pair, int64_t rotated) {
  const double base = p.scaling == Scaling::Ntk ? ntk_base(p.theta, p.factor, rotated) : p.theta;
  const double theta =
      std::pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(rotated));
  if (p.scaling == Scaling::Linear) return theta / p.factor;  // positions divided by s
  if (p.scaling == Scaling::Llama3) return llama3_frequency(p, theta);
  if (p.scaling == Scaling::Yarn) {
    const double ramp = yarn_ramp(p, pair, rotated);
    return theta * (1.0 - ramp) + (theta / p.factor) * ramp;
  }
  return theta;
}

// cos and sin of the angle of pair `pair` at position `position`.
struct Rotation {
  float cos, sin;
};

// The same at a frequency made once (frequency(p, pair, rotated)), for
// tables of many positions.
ROTOR_HD Rotation rotation_at(const Params& p, int64_t position, double freq) {
  const double angle = static_cast<double>(position) * freq;
  if (p.scaling != Scaling::Yarn)
    return {static_cast<float>(std::cos(angle)), static_cast<float>(std::sin(angle))};
  const double a = attention_factor(p);
  return {static_cast<float>(a * std::cos(angle)), static_cast<float>(a * std::sin(angle))};
}

ROTOR_HD Rotation rotation(const Params& p, int64_t position, int64_t pair, int64_t rotated) {
  return rotation_at(p, position, frequency(p, pair, rotated));
}

// The dimensions (a, b) that slot j of a head row holds, 0 <= j < D/2: for
// j < R/2 the pair rotated with theta_j ((2j, 2j+1) interleaved, (j, j + R/2)
// half), beyond it two dimensions that pass unchanged (R + 2(j - R/2) and the
// next; D and R are even).
ROTOR_HD void slot_dims(Layout layout, int64_t rotated, int64_t slot, int64_t& a, int64_t& b) {
  const int64_t half = rotated / 2;
  if (slot < half && layout == Layout::Half) {
    a = slot;
    b = slot + half;
  } else {
    a = slot < half ? 2 * slot : rotated + 2 * (slot - half);
    b = a + 1;
  }
}

// (x0, x1) rotated by +angle (eq. 34): the forward.
ROTOR_HD void rotate(float x0, float x1, Rotation r, float& y0, float& y1) {
  y0 = x0 * r.cos - x1 * r.sin;
  y1 = x1 * r.cos + x0 * r.sin;
}

// (x0, x1) times the transpose of rotate's matrix, the backward: the inverse
// rotation, times YaRN's attention factor (the matrix is a R, its transpose
// a R^T).
ROTOR_HD void rotate_back(float x0, float x1, Rotation r, float& y0, float& y1) {
  y0 = x0 * r.cos + x1 * r.sin;
  y1 = x1 * r.cos - x0 * r.sin;
}

}  // namespace rotor::rope
