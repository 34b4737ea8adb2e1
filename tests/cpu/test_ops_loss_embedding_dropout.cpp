// Label-smoothed cross-entropy, embedding and dropout on the CPU against
// double references; backward passes against central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/philox.h"
#include "ops/cross_entropy.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using Vec = std::vector<double>;

using test::fd_grad;
using test::to_double;

// Per-row smoothed loss and nll, straight from the definition -sum_j q_j log p_j.
void ce_ref(const Vec& x, const std::vector<int32_t>& t, int64_t V, double eps, int ignore,
            Vec& loss, Vec& nll) {
  const size_t N = t.size();
  loss.assign(N, 0.0);
  nll.assign(N, 0.0);
  for (size_t i = 0; i < N; ++i) {
    if (t[i] == ignore) continue;
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, x[i * V + j]);
    for (int64_t j = 0; j < V; ++j) s += std::exp(x[i * V + j] - mx);
    for (int64_t j = 0; j < V; ++j) {
      const double logp = x[i * V + j] - mx - std::log(s);
      const double q = j == t[i] ? 1 - eps : eps / (V - 1);
      loss[i] -= q * logp;
      if (j == t[i]) nll[i] = -logp;
    }
  }
}

TEST(CrossEntropy, ForwardAndBackward) {
  const int64_t N = 6, V = 11;
  const int ignore = 1;
  const std::vector<int32_t> tv = {3, 1, 0, 10, 1, 7};  // rows 1 and 4 are padding
  Tensor logits = test::random_tensor({N, V}, 1, -4.0f, 4.0f);
  Tensor targets = Tensor::from_ints(tv, {N});
  const Vec xv = to_double(logits);
  for (double eps : {0.0, 0.1}) {
    SCOPED_TRACE(eps);
    Tensor loss = Tensor::zeros({N}), nll = Tensor::zeros({N}), lse = Tensor::zeros({N});
    ops::cross_entropy_forward(logits, targets, static_cast<float>(eps), ignore, loss, nll, lse);
    Vec rl, rn;
    ce_ref(xv, tv, V, eps, ignore, rl, rn);
    EXPECT_LT(test::max_rel_error(loss.to_floats(), rl), 1e-6);
    EXPECT_LT(test::max_rel_error(nll.to_floats(), rn), 1e-6);
    EXPECT_EQ(loss.to_floats()[1], 0.0f);
    EXPECT_EQ(nll.to_floats()[4], 0.0f);

    const float loss_scale = 0.37f;
    Vec fd = fd_grad(
        [&](const Vec& v) {
          Vec l, n;
          ce_ref(v, tv, V, eps, ignore, l, n);
          double s = 0;
          for (double e : l) s += e;
          return loss_scale * s;
        },
        xv);
    Tensor dlogits = Tensor::full({N, V}, 9.0f);
    ops::cross_entropy_backward(logits, targets, lse, static_cast<float>(eps), ignore, loss_scale,
                                dlogits);
    EXPECT_LT(test::max_rel_error(dlogits.to_floats(), fd), 1e-6);
    double norm = 0;
    for (double g : fd) norm += g * g;
    EXPECT_GT(norm, 0.01);
    for (int64_t j = 0; j < V; ++j) EXPECT_EQ(dlogits.to_floats()[1 * V + j], 0.0f);
  }
}

TEST(CrossEntropy, BadTargetsFail) {
  Tensor logits = Tensor::zeros({2, 4});
  Tensor loss = Tensor::zeros({2}), nll = Tensor::zeros({2}), lse = Tensor::zeros({2});
  Tensor bad = Tensor::from_ints({0, 4}, {2});
  EXPECT_THROW(ops::cross_entropy_forward(logits, bad, 0.1f, -1, loss, nll, lse), Error);
  Tensor ok = Tensor::from_ints({0, 4}, {2});
  EXPECT_NO_THROW(ops::cross_entropy_forward(logits, ok, 0.1f, 4, loss, nll, lse));
  Tensor short_t = Tensor::from_ints({0}, {1});
  EXPECT_THROW(ops::cross_entropy_forward(logits, short_t, 0.1f, -1, loss, nll, lse), Error);
}

// top1_hits: the first largest logit is the prediction (ties go to the lower
// index, a NaN is never the largest), ignored rows count 0, and 16-bit
// logits are read as their f32 values.
TEST(CrossEntropy, Top1HitsTakeTheFirstLargestLogit) {
  const float nan = std::nanf("");
  // Rows: a tie at 1 and 3 (predicts 1); the same row with target 3 (a
  // miss); a NaN, skipped (predicts 2); -inf twice, then a tie (predicts 2);
  // an ignored row (target -1); all NaN (nothing is largest: a miss).
  const std::vector<float> v = {0,         3,         1,  3,  0, 3, 1, 3, nan, 1,   2,   0,
                                -INFINITY, -INFINITY, -1, -1, 5, 0, 0, 0, nan, nan, nan, nan};
  const std::vector<int32_t> t = {1, 3, 2, 2, -1, 0};
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor logits = Tensor::from_floats(v, {6, 4}, dt);
    Tensor hits = Tensor::empty({6}, DType::I32);
    ops::top1_hits(logits, Tensor::from_ints(t, {6}), -1, hits);
    EXPECT_EQ(hits.to_ints(), (std::vector<int32_t>{1, 0, 1, 1, 0, 0}));
    EXPECT_EQ(ops::count_top1_hits(logits, Tensor::from_ints(t, {6}), -1), 3);
  }
  Tensor wrong = Tensor::empty({5}, DType::I32);
  EXPECT_THROW(ops::top1_hits(Tensor::zeros({6, 4}), Tensor::from_ints(t, {6}), -1, wrong), Error);
}

TEST(Embedding, ForwardBackward) {
  const int64_t V = 7, d = 5;
  Tensor table = test::random_tensor({V, d}, 2);
  const std::vector<int32_t> idv = {3, 0, 3, 6, 2, 0};
  Tensor ids = Tensor::from_ints(idv, {2, 3});
  Tensor out = Tensor::zeros({2, 3, d});
  ops::embedding_forward(ids, table, 2.5f, out);
  auto tv = table.to_floats(), ov = out.to_floats();
  for (size_t i = 0; i < idv.size(); ++i)
    for (int64_t j = 0; j < d; ++j) EXPECT_EQ(ov[i * d + j], tv[idv[i] * d + j] * 2.5f);

  Tensor dout = test::random_tensor({6, d}, 3);
  auto dv = to_double(dout);
  Tensor dtable = Tensor::full({V, d}, 1.0f);  // accumulated into
  ops::embedding_backward(ids, dout, 2.5f, dtable, /*pad_id=*/0);
  Vec ref(V * d, 1.0);
  for (size_t i = 0; i < idv.size(); ++i)
    if (idv[i] != 0)
      for (int64_t j = 0; j < d; ++j) ref[idv[i] * d + j] += 2.5 * dv[i * d + j];
  EXPECT_LT(test::max_rel_error(dtable.to_floats(), ref), 1e-6);
  EXPECT_EQ(dtable.to_floats()[0], 1.0f);  // pad row untouched

  Tensor bad = Tensor::from_ints({7}, {1});
  Tensor out1 = Tensor::zeros({1, d});
  EXPECT_THROW(ops::embedding_forward(bad, table, 1.0f, out1), Error);
  Tensor neg = Tensor::from_ints({-1}, {1});
  EXPECT_THROW(ops::embedding_backward(neg, out1, 1.0f, dtable), Error);
}

TEST(Dropout, MaskFromPhiloxAndBackwardReusesIt) {
  const int64_t n = 4096;
  const float p = 0.3f;
  Tensor x = test::random_tensor({n}, 4, 0.5f, 1.5f);  // no zeros
  Tensor y = Tensor::zeros({n}), dy = test::random_tensor({n}, 5), dx = Tensor::zeros({n});
  ops::dropout_forward(x, y, p, 42, 7);
  ops::dropout_backward(dy, dx, p, 42, 7);
  auto xv = x.to_floats(), yv = y.to_floats(), dyv = dy.to_floats(), dxv = dx.to_floats();
  int kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = philox_uniform(42, 7, static_cast<uint64_t>(i)) >= p;
    kept += keep;
    EXPECT_EQ(yv[i], keep ? xv[i] * (1.0f / (1.0f - p)) : 0.0f);
    EXPECT_EQ(dxv[i], keep ? dyv[i] * (1.0f / (1.0f - p)) : 0.0f);
  }
  EXPECT_NEAR(kept / static_cast<double>(n), 1.0 - p, 0.03);
  // The same (seed, stream) gives the same mask; another stream a different one.
  Tensor y2 = Tensor::zeros({n}), y3 = Tensor::zeros({n});
  ops::dropout_forward(x, y2, p, 42, 7);
  ops::dropout_forward(x, y3, p, 42, 8);
  EXPECT_EQ(y2.to_floats(), yv);
  EXPECT_NE(y3.to_floats(), yv);
  // p = 0 is the identity; p >= 1 is rejected.
  ops::dropout_forward(x, y, 0.0f, 42, 7);
  EXPECT_EQ(y.to_floats(), xv);
  EXPECT_THROW(ops::dropout_forward(x, y, 1.0f, 42, 7), Error);
  // In place.
  Tensor z = x.clone();
  ops::dropout_forward(z, z, p, 42, 7);
  EXPECT_EQ(z.to_floats(), y2.to_floats());
}

// The mask is philox_u32's, element by element, whichever vector clone of
// the CPU kernel runs (ops/cpu_clones.h): seeds and streams with high bits
// set, and lengths that end inside a block and inside a chunk of blocks.
TEST(Dropout, MaskIsPhiloxForEverySeedStreamAndLength) {
  for (const int64_t n : {1, 3, 63, 64, 65, 257, 1000}) {
    for (const uint64_t seed : {uint64_t{1}, uint64_t{0xDEADBEEF12345678}}) {
      const uint64_t stream = seed ^ 0x9E3779B97F4A7C15ull;
      Tensor x = Tensor::from_floats(std::vector<float>(static_cast<size_t>(n), 1.0f), {n});
      Tensor y = Tensor::zeros({n});
      ops::dropout_forward(x, y, 0.5f, seed, stream);
      const std::vector<float> yv = y.to_floats();
      for (int64_t i = 0; i < n; ++i) {
        const bool keep = philox_uniform(seed, stream, static_cast<uint64_t>(i)) >= 0.5f;
        ASSERT_EQ(yv[static_cast<size_t>(i)], keep ? 2.0f : 0.0f)
            << "n " << n << " seed " << seed << " element " << i;
      }
    }
  }
}

// The fused residual end: residual + dropout(x) with dropout_forward's mask,
// bitwise in f32 (the same two f32 operations) and in place.
// The attention cores' factors (ops::detail::dropout_factors): philox_uniform's
// decision for every element, from offsets inside a Philox block and across
// the 64-element draws.
TEST(Dropout, FactorsAreThoseOfPhiloxUniformAtAnyOffset) {
  const float p = 0.3f, keep = 1.0f / (1.0f - p);
  // (1 << 34) - 6: blocks on both sides of 2^32, whose low counter word wraps.
  for (const uint64_t first : {0ull, 1ull, 3ull, 62ull, 4099ull, (1ull << 34) - 6})
    for (const int64_t n : {1, 5, 63, 64, 65, 200}) {
      std::vector<float> f(static_cast<size_t>(n) + 1, -1.0f);
      ops::detail::dropout_factors(7, 11, first, n, p, f.data());
      for (int64_t i = 0; i < n; ++i) {
        const float want =
            philox_uniform(7, 11, first + static_cast<uint64_t>(i)) >= p ? keep : 0.0f;
        ASSERT_EQ(f[static_cast<size_t>(i)], want) << "first " << first << ", n " << n << ", " << i;
      }
      EXPECT_EQ(f[static_cast<size_t>(n)], -1.0f) << "written past n, first " << first;
    }
}

// Every Philox kernel the draws may pick (AVX-512, AVX2, portable: the CPU
// decides which runs elsewhere) gives philox4x32_10's words, the low counter
// word wrapping inside a group of blocks included.
TEST(Dropout, EveryPhiloxKernelDrawsPhiloxBits) {
  int ran = 0;
  for (const char* kernel : {"avx512", "avx2", "portable"})
    for (const uint64_t first :
         {0ull, 5ull, (1ull << 32) - 7, (1ull << 32) - 16, 0xFFFFFFFFFFFFFFF8ull})
      for (const uint64_t stream : {0ull, 0x123456789ABCDEFull}) {
        uint32_t r[64];
        if (!ops::detail::philox_kernel_blocks(kernel, first, stream, 99, r)) continue;
        ++ran;
        for (int b = 0; b < 16; ++b) {
          const uint64_t block = first + static_cast<uint64_t>(b);
          const Philox4 want = philox4x32_10(
              static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
              static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32), 99u, 0u);
          for (int w = 0; w < 4; ++w)
            ASSERT_EQ(r[4 * b + w], want.v[w]) << kernel << " first " << first << " block " << b;
        }
      }
  EXPECT_GE(ran, 10);  // the portable kernel always runs
}

TEST(Dropout, AddIsResidualPlusTheSameMask) {
  const int64_t n = 4099;  // not a multiple of 4 (Philox draws 4 at a time)
  Tensor x = test::random_tensor({n}, 4), r = test::random_tensor({n}, 6);
  for (float p : {0.0f, 0.3f}) {
    Tensor d = Tensor::zeros({n}), want = Tensor::zeros({n}), got = Tensor::zeros({n});
    ops::dropout_forward(x, d, p, 42, 7);
    ops::add(r, d, want);
    ops::dropout_add_forward(r, x, p, 42, 7, got);
    EXPECT_EQ(got.to_floats(), want.to_floats()) << "p " << p;
    Tensor inplace = r.clone();
    ops::dropout_add_forward(inplace, x, p, 42, 7, inplace);
    EXPECT_EQ(inplace.to_floats(), want.to_floats()) << "p " << p;
  }
  Tensor short_out = Tensor::zeros({n - 1});
  EXPECT_THROW(ops::dropout_add_forward(r, x, 0.1f, 42, 7, short_out), Error);
  Tensor half = Tensor::zeros({n}, DType::BF16);
  EXPECT_THROW(ops::dropout_add_forward(half, x, 0.1f, 42, 7, half), Error);
}

}  // namespace
}  // namespace rotor
