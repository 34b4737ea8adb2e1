// Linear attention's CUDA path (src/ops/linear_attention_cuda.cpp,
// kernels/linear_attention.cu) against the CPU op on the same inputs: every
// feature map x RoPE placement x causal / not, with padding and Tq != Tk;
// out, den, dq, dk, dv within 1e-5 of the largest entry in f32, 2e-2 in f16
// and bf16 (inputs rounded alike; the GPU computes in f32 with f32 states).
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "ops/linear_attention.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::LinearFeatureMap;
using ops::LinearRope;

double rel(const Tensor& got, const Tensor& ref) {
  const auto g = got.to(Device::cpu()).to_floats(), r = ref.to(Device::cpu()).to_floats();
  double d = 0, s = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    d = std::max(d, std::abs(double(g[i]) - r[i]));
    s = std::max(s, std::abs(double(r[i])));
  }
  return s > 0 ? d / s : d;
}

struct Shape4 {
  int64_t B, H, Tq, Tk, D, Dv;
  std::vector<int32_t> key_lengths;
};

void check(LinearFeatureMap map, LinearRope rope, bool causal, const Shape4& s, DType dt) {
  SCOPED_TRACE(::testing::Message() << ops::linear_feature_map_name(map) << " "
                                    << ops::linear_rope_name(rope) << " causal " << causal << " Tq "
                                    << s.Tq << " Tk " << s.Tk << " " << dtype_name(dt));
  const Device gpu = Device::cuda(0);
  const int64_t M = map == LinearFeatureMap::Favor ? 2 * s.D + 2 : s.D;
  auto make = [&](Shape shape, uint64_t seed, float lo, float hi) {
    Tensor f = test::random_tensor(shape, seed, lo, hi);
    return Tensor::from_floats(f.to_floats(), shape, dt);  // rounded to dt on both devices
  };
  Tensor q = make({s.B, s.H, s.Tq, s.D}, 1, -0.25f, 1.0f);
  Tensor k = make({s.B, s.H, s.Tk, s.D}, 2, -0.25f, 1.0f);
  Tensor v = make({s.B, s.H, s.Tk, s.Dv}, 3, -1.0f, 1.0f);
  Tensor g = make({s.B, s.H, s.Tq, s.Dv}, 4, -1.0f, 1.0f);
  Tensor proj = map == LinearFeatureMap::Favor ? ops::favor_projection(5, 0, 0, M, s.D) : Tensor();
  ops::LinearAttentionOptions o;
  o.feature_map = map;
  o.rope = rope;
  o.causal = causal;
  o.chunk = 16;
  o.rope_q_offset = s.Tk - s.Tq;
  if (!s.key_lengths.empty()) o.key_lengths = Tensor::from_ints(s.key_lengths, {s.B});
  auto run = [&](const Device& d) {
    ops::LinearAttentionOptions od = o;
    if (od.key_lengths.defined()) od.key_lengths = od.key_lengths.to(d);
    Tensor qd = q.to(d), kd = k.to(d), vd = v.to(d), gd = g.to(d);
    Tensor pd = proj.defined() ? proj.to(d) : Tensor();
    Tensor out = Tensor::empty(g.shape(), dt, d),
           den = Tensor::empty({s.B, s.H, s.Tq}, DType::F32, d);
    ops::linear_attention_forward(qd, kd, vd, pd, od, out, den);
    Tensor dq = Tensor::empty(q.shape(), dt, d), dk = Tensor::empty(k.shape(), dt, d);
    Tensor dv = Tensor::empty(v.shape(), dt, d);
    ops::linear_attention_backward(qd, kd, vd, pd, out, den, gd, od, dq, dk, dv);
    return std::vector<Tensor>{out, den, dq, dk, dv};
  };
  const auto cpu = run(Device::cpu()), cuda = run(gpu);
  const double tol = dt == DType::F32 ? 1e-5 : 2e-2;
  const char* names[] = {"out", "den", "dq", "dk", "dv"};
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_LT(rel(cuda[i], cpu[i]), tol) << names[i];
}

TEST(LinearAttentionCuda, MatchesTheCpuOp) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  // Causal with Tq == Tk runs the chunks in parallel (64 rows a chunk: 70 is
  // two, 150 three with padded keys), Tq != Tk the sequential kernels.
  const std::vector<Shape4> shapes = {
      {2, 2, 70, 70, 16, 8, {}}, {2, 1, 45, 77, 8, 8, {77, 50}}, {2, 2, 150, 150, 8, 8, {150, 97}}};
  for (auto map : {LinearFeatureMap::Elu1, LinearFeatureMap::Relu, LinearFeatureMap::Favor})
    for (auto rope : {LinearRope::None, LinearRope::AfterFeatureMap, LinearRope::BeforeFeatureMap})
      for (bool causal : {false, true})
        for (const Shape4& s : shapes) check(map, rope, causal, s, DType::F32);
}

TEST(LinearAttentionCuda, SixteenBitMatchesTheCpuOp) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const Shape4 s{1, 2, 64, 64, 16, 16, {}};
  for (DType dt : {DType::F16, DType::BF16})
    for (bool causal : {false, true}) {
      check(LinearFeatureMap::Elu1, LinearRope::AfterFeatureMap, causal, s, dt);
      check(LinearFeatureMap::Favor, LinearRope::AfterFeatureMap, causal, s, dt);
    }
}

}  // namespace
}  // namespace rotor
