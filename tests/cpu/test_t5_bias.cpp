// T5's relative bias (core/t5_bias.h, ops::AttentionOptions::rel_bias): the
// buckets at known distances, each side's last bucket reached by max_distance
// (so that the cores' clamped rows are exact); every CPU core (the
// materialized reference and the flash twin, forward and backward, and the
// table's gradient) against the bias materialized in double, causal and not,
// with key padding, Tq != Tk and offsets; the gradient accumulates and has
// the same bits for any thread count; the scores depend only on j - i; the
// decoding step against the causal forward's last row; and the flash CUDA
// kernels' refusal, from a made-up device.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/t5_bias.h"
#include "ops/attention.h"
#include "ops/attention_device.h"
#include "ops/decode.h"
#include "ops/flash_attention.h"
#include "support/test_util.h"

namespace rotor {
namespace {

using ops::AttentionOptions;

TEST(T5Bias, BucketsAtKnownDistances) {
  // 32 buckets, max distance 128, an encoder: 16 a side, exact below 8.
  const auto enc = [](int64_t r) { return t5::bucket(r, 32, 128, true); };
  EXPECT_EQ(enc(0), 0);
  EXPECT_EQ(enc(-1), 1);  // a key one before the query
  EXPECT_EQ(enc(-7), 7);
  EXPECT_EQ(enc(1), 17);  // a key after the query: the upper half
  EXPECT_EQ(enc(7), 23);
  EXPECT_EQ(enc(-8), 8);    // the log-spaced part starts at max_exact
  EXPECT_EQ(enc(-12), 9);   // 8 + int(8 ln 1.5 / ln 16) = 8 + 1
  EXPECT_EQ(enc(-60), 13);  // 8 + int(8 ln 7.5 / ln 16) = 8 + 5
  EXPECT_EQ(enc(-100), 15);
  EXPECT_EQ(enc(-128), 15);
  EXPECT_EQ(enc(-100000), 15);
  EXPECT_EQ(enc(128), 31);
  // A decoder: every bucket for keys at or before the query, exact below 16.
  const auto dec = [](int64_t r) { return t5::bucket(r, 32, 128, false); };
  EXPECT_EQ(dec(5), 0);  // after the query: never seen, bucket 0
  EXPECT_EQ(dec(0), 0);
  EXPECT_EQ(dec(-15), 15);
  EXPECT_EQ(dec(-16), 16);
  EXPECT_EQ(dec(-20), 17);  // 16 + int(16 ln 1.25 / ln 8) = 16 + 1
  EXPECT_EQ(dec(-128), 31);
  EXPECT_EQ(dec(-5000), 31);
}

// Monotone in the distance on each side, within range, and constant from
// max_distance on: the cores read row clamp(r) and lose nothing.
TEST(T5Bias, ClampedRowsAreExact) {
  for (const auto& [buckets, max_distance] :
       std::vector<std::pair<int64_t, int64_t>>{{32, 128}, {64, 256}, {8, 12}, {16, 64}, {32, 100}})
    for (bool bidirectional : {true, false}) {
      SCOPED_TRACE(testing::Message() << buckets << " " << max_distance << " " << bidirectional);
      const auto ids = t5::relative_ids(buckets, max_distance, bidirectional);
      ASSERT_EQ(static_cast<int64_t>(ids.size()), 2 * max_distance + 1);
      for (int64_t r = -3 * max_distance; r <= 3 * max_distance; ++r) {
        const int64_t b = t5::bucket(r, buckets, max_distance, bidirectional);
        ASSERT_GE(b, 0);
        ASSERT_LT(b, buckets);
        EXPECT_EQ(ids[static_cast<size_t>(t5::relative_row(r, max_distance))], b) << r;
        if (r < 0) {
          EXPECT_GE(b, t5::bucket(r + 1, buckets, max_distance, bidirectional)) << r;
        }
      }
      EXPECT_EQ(t5::bucket(-max_distance, buckets, max_distance, bidirectional),
                (bidirectional ? buckets / 2 : buckets) - 1);
    }
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  std::vector<int32_t> key_lengths;  // empty: no padding
  int64_t rel_max = 8;
  int64_t q_offset = 0, k_offset = 0;
};

AttentionOptions options_for(const Case& c, const Tensor& table) {
  AttentionOptions o;
  o.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  o.causal = c.causal;
  o.rel_bias = table;
  o.rel_max = c.rel_max;
  o.bias_q_offset = c.q_offset;
  o.bias_k_offset = c.k_offset;
  if (!c.key_lengths.empty())
    o.key_lengths = Tensor::from_ints(c.key_lengths, {static_cast<int64_t>(c.B)});
  return o;
}

struct Reference {
  std::vector<double> out, dq, dk, dv, dtable;
};

// softmax(scale q.k + bias) v and its gradients for dout, the [Tq, Tk] bias
// of each head materialized from the table, all in double; dtable sums the
// unscaled dS of the scores that read each row.
Reference reference(const Case& c, const AttentionOptions& o, const Tensor& q, const Tensor& k,
                    const Tensor& v, const Tensor& dout, const Tensor& table) {
  const auto qv = test::to_double(q), kv = test::to_double(k), vv = test::to_double(v),
             dov = test::to_double(dout), tv = test::to_double(table);
  Reference r;
  r.out.assign(qv.size(), 0.0);
  r.dq.assign(qv.size(), 0.0);
  r.dk.assign(kv.size(), 0.0);
  r.dv.assign(kv.size(), 0.0);
  r.dtable.assign(tv.size(), 0.0);
  const int64_t D = c.D;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h) {
      const int64_t bh = b * c.H + h;
      for (int64_t i = 0; i < c.Tq; ++i) {
        int64_t n = c.key_lengths.empty() ? c.Tk : c.key_lengths[static_cast<size_t>(b)];
        if (c.causal) n = std::min(n, std::max<int64_t>(0, i + c.Tk - c.Tq + 1));
        if (n == 0) continue;
        const int64_t qpos = c.q_offset + i + (c.Tk - c.Tq);
        auto row_of = [&](int64_t j) {
          const int64_t d = c.k_offset + j - qpos;
          return std::clamp<int64_t>(d, -c.rel_max, c.rel_max) + c.rel_max;
        };
        const double* qi = qv.data() + (bh * c.Tq + i) * D;
        const double* doi = dov.data() + (bh * c.Tq + i) * D;
        std::vector<double> p(static_cast<size_t>(n)), dp(static_cast<size_t>(n));
        double mx = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t x = 0; x < D; ++x) s += qi[x] * kv[(bh * c.Tk + j) * D + x];
          p[j] = s * o.scale + tv[row_of(j) * c.H + h];
          mx = std::max(mx, p[j]);
        }
        double z = 0;
        for (double& x : p) z += (x = std::exp(x - mx));
        double rowsum = 0;
        for (int64_t j = 0; j < n; ++j) {
          p[j] /= z;
          double d = 0;
          for (int64_t x = 0; x < D; ++x) {
            r.out[(bh * c.Tq + i) * D + x] += p[j] * vv[(bh * c.Tk + j) * D + x];
            r.dv[(bh * c.Tk + j) * D + x] += p[j] * doi[x];
            d += doi[x] * vv[(bh * c.Tk + j) * D + x];
          }
          dp[j] = d;
          rowsum += p[j] * d;
        }
        for (int64_t j = 0; j < n; ++j) {
          const double g = p[j] * (dp[j] - rowsum);
          r.dtable[row_of(j) * c.H + h] += g;
          const double ds = g * o.scale;
          for (int64_t x = 0; x < D; ++x) {
            r.dq[(bh * c.Tq + i) * D + x] += ds * kv[(bh * c.Tk + j) * D + x];
            r.dk[(bh * c.Tk + j) * D + x] += ds * qi[x];
          }
        }
      }
    }
  return r;
}

// The largest |a - b| over the largest |b| (the table's gradient has entries
// near zero, where a relative error says nothing).
double max_scaled_error(const std::vector<float>& a, const std::vector<double>& b) {
  double err = 0, scale = 1e-12;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return err / scale;
}

// Both CPU cores, forward and backward, against the double reference.
void check_cores(const Case& c, uint64_t seed, double tol = 3e-5) {
  SCOPED_TRACE(testing::Message() << "B " << c.B << " H " << c.H << " Tq " << c.Tq << " Tk " << c.Tk
                                  << " D " << c.D << " causal " << c.causal << " rel_max "
                                  << c.rel_max << " offsets " << c.q_offset << " " << c.k_offset);
  const Shape qs = {c.B, c.H, c.Tq, c.D}, ks = {c.B, c.H, c.Tk, c.D};
  Tensor q = test::random_tensor(qs, seed, -2.0f, 2.0f), k = test::random_tensor(ks, seed + 1);
  Tensor v = test::random_tensor(ks, seed + 2), dout = test::random_tensor(qs, seed + 3);
  Tensor table = test::random_tensor({2 * c.rel_max + 1, c.H}, seed + 4, -2.0f, 2.0f);
  AttentionOptions o = options_for(c, table);
  const Reference want = reference(c, o, q, k, v, dout, table);
  const std::vector<float> start(static_cast<size_t>(table.numel()), 0.25f);

  Tensor out = Tensor::full(qs, 7.0f), probs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, o, out, probs);
  Tensor dq = Tensor::full(qs, 7.0f), dk = Tensor::full(ks, 7.0f), dv = Tensor::full(ks, 7.0f);
  o.rel_bias_grad = Tensor::from_floats(start, table.shape());  // added into
  ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
  EXPECT_LT(test::max_rel_error(out.to_floats(), want.out), tol) << "reference out";
  EXPECT_LT(test::max_rel_error(dq.to_floats(), want.dq), tol) << "reference dq";
  EXPECT_LT(test::max_rel_error(dk.to_floats(), want.dk), tol) << "reference dk";
  EXPECT_LT(test::max_rel_error(dv.to_floats(), want.dv), tol) << "reference dv";
  std::vector<double> want_grad = want.dtable;
  for (double& g : want_grad) g += 0.25;
  EXPECT_LT(max_scaled_error(o.rel_bias_grad.to_floats(), want_grad), tol) << "reference dtable";

  Tensor fout = Tensor::full(qs, 7.0f), lse = Tensor::full({c.B, c.H, c.Tq}, 7.0f);
  ops::flash_attention_forward(q, k, v, o, fout, lse);
  Tensor fdq = Tensor::full(qs, 7.0f), fdk = Tensor::full(ks, 7.0f), fdv = Tensor::full(ks, 7.0f);
  o.rel_bias_grad = Tensor::from_floats(start, table.shape());
  ops::flash_attention_backward(q, k, v, fout, lse, dout, o, fdq, fdk, fdv);
  EXPECT_LT(test::max_rel_error(fout.to_floats(), want.out), tol) << "flash out";
  EXPECT_LT(test::max_rel_error(fdq.to_floats(), want.dq), tol) << "flash dq";
  EXPECT_LT(test::max_rel_error(fdk.to_floats(), want.dk), tol) << "flash dk";
  EXPECT_LT(test::max_rel_error(fdv.to_floats(), want.dv), tol) << "flash dv";
  EXPECT_LT(max_scaled_error(o.rel_bias_grad.to_floats(), want_grad), tol) << "flash dtable";

  // The bias is there: without it the output moves well beyond the tolerance.
  AttentionOptions plain = o;
  plain.rel_bias = plain.rel_bias_grad = Tensor();
  Tensor pout = Tensor::zeros(qs), pprobs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, plain, pout, pprobs);
  EXPECT_GT(test::max_rel_error(pout.to_floats(), want.out), 100 * tol);
}

TEST(T5Bias, CoresMatchTheMaterializedBiasNonCausal) {
  check_cores({2, 4, 9, 9, 8, false, {}, 3}, 10);                // distances past rel_max
  check_cores({2, 2, 70, 70, 16, false, {70, 41}, 16}, 11);      // past one 64-wide tile, padded
  check_cores({1, 3, 5, 12, 8, false, {}, 20, 4, 0}, 12);        // Tq != Tk, offset queries
  check_cores({2, 2, 20, 20, 8, false, {20, 17}, 6, 0, 9}, 13);  // keys shifted after the queries
}

TEST(T5Bias, CoresMatchTheMaterializedBiasCausal) {
  check_cores({3, 4, 9, 9, 8, true, {9, 4, 1}, 4}, 20);
  check_cores({2, 2, 130, 130, 8, true, {130, 77}, 40}, 21);
  check_cores({2, 2, 3, 80, 8, true, {80, 70}, 16}, 22);  // fewer queries than keys (cached prefix)
}

// The table's gradient has the same bits for 1 and 2 threads, in both cores
// (per (batch, head) sums, added over the batch in a fixed order).
TEST(T5Bias, GradientIsTheSameForAnyThreadCount) {
  const Case c{3, 4, 70, 70, 8, true, {70, 33, 64}, 12};
  const Shape qs = {c.B, c.H, c.Tq, c.D};
  Tensor q = test::random_tensor(qs, 30, -2.0f, 2.0f), k = test::random_tensor(qs, 31),
         v = test::random_tensor(qs, 32), dout = test::random_tensor(qs, 33);
  Tensor table = test::random_tensor({2 * c.rel_max + 1, c.H}, 34);
  auto run = [&](int threads, bool flash) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    AttentionOptions o = options_for(c, table);
    o.rel_bias_grad = Tensor::zeros(table.shape());
    Tensor dq = Tensor::zeros(qs), dk = Tensor::zeros(qs), dv = Tensor::zeros(qs);
    Tensor out = Tensor::zeros(qs);
    if (flash) {
      Tensor lse = Tensor::zeros({c.B, c.H, c.Tq});
      ops::flash_attention_forward(q, k, v, o, out, lse);
      ops::flash_attention_backward(q, k, v, out, lse, dout, o, dq, dk, dv);
    } else {
      Tensor probs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
      ops::attention_forward(q, k, v, o, out, probs);
      ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
    }
    omp_set_num_threads(before);
    return o.rel_bias_grad.to_floats();
  };
  for (bool flash : {false, true}) {
    const auto one = run(1, flash);
    EXPECT_EQ(run(2, flash), one) << (flash ? "flash" : "reference");
    EXPECT_EQ(run(2, flash), one) << (flash ? "flash" : "reference");
  }
}

// Adding one constant to every position (queries and keys) changes nothing:
// the bias reads only j - i.
TEST(T5Bias, ScoresDependOnlyOnTheDistance) {
  const Case c{2, 4, 70, 70, 8, false, {70, 50}, 10};
  const Shape qs = {c.B, c.H, c.Tq, c.D};
  Tensor q = test::random_tensor(qs, 5, -2.0f, 2.0f), k = test::random_tensor(qs, 6),
         v = test::random_tensor(qs, 7);
  Tensor table = test::random_tensor({2 * c.rel_max + 1, c.H}, 8, -2.0f, 2.0f);
  AttentionOptions o = options_for(c, table);
  Tensor out0 = Tensor::zeros(qs), lse0 = Tensor::zeros({c.B, c.H, c.Tq});
  ops::flash_attention_forward(q, k, v, o, out0, lse0);
  Tensor ref0 = Tensor::zeros(qs), probs = Tensor::zeros({c.B, c.H, c.Tq, c.Tk});
  ops::attention_forward(q, k, v, o, ref0, probs);
  for (int64_t shift : {1, 37, 100000}) {
    o.bias_q_offset = o.bias_k_offset = shift;
    Tensor out = Tensor::zeros(qs), lse = Tensor::zeros({c.B, c.H, c.Tq});
    ops::flash_attention_forward(q, k, v, o, out, lse);
    EXPECT_EQ(out.to_floats(), out0.to_floats()) << shift;
    EXPECT_EQ(lse.to_floats(), lse0.to_floats()) << shift;
    Tensor ref = Tensor::zeros(qs);
    ops::attention_forward(q, k, v, o, ref, probs);
    EXPECT_EQ(ref.to_floats(), ref0.to_floats()) << shift;
  }
  // Shifting the keys alone moves every distance: the output changes.
  o.bias_q_offset = 0;
  o.bias_k_offset = 3;
  Tensor moved = Tensor::zeros(qs);
  ops::attention_forward(q, k, v, o, moved, probs);
  EXPECT_GT(test::max_rel_error(moved.to_floats(), ref0.to_floats()), 1e-3);
}

// Row t of x [B, H, T, D]: [B, H, 1, D].
Tensor row_at(const Tensor& x, int64_t t) {
  const int64_t BH = x.size(0) * x.size(1), T = x.size(2), D = x.size(3);
  const auto v = x.to_floats();
  std::vector<float> r(static_cast<size_t>(BH * D));
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t c = 0; c < D; ++c) r[bh * D + c] = v[(bh * T + t) * D + c];
  return Tensor::from_floats(r, {x.size(0), x.size(1), 1, D});
}

// The decoding step (query at position length - 1 against the cache) gives
// the causal forward's row at that position.
TEST(T5Bias, DecodeStepEqualsTheCausalForward) {
  const int64_t B = 2, H = 4, T = 11, D = 8, Tmax = 16, rel_max = 5;
  Tensor q = test::random_tensor({B, H, T, D}, 40, -2.0f, 2.0f),
         k = test::random_tensor({B, H, T, D}, 41), v = test::random_tensor({B, H, T, D}, 42);
  Tensor table = test::random_tensor({2 * rel_max + 1, H}, 43, -2.0f, 2.0f);
  AttentionOptions o;
  o.causal = true;
  o.rel_bias = table;
  o.rel_max = rel_max;
  Tensor full = Tensor::zeros({B, H, T, D}), probs = Tensor::zeros({B, H, T, T});
  ops::attention_forward(q, k, v, o, full, probs);
  Tensor kc = Tensor::zeros({B, H, Tmax, D}), vc = Tensor::zeros({B, H, Tmax, D});
  const auto fv = full.to_floats();
  for (int64_t t = 0; t < T; ++t) {
    ops::kv_cache_write(row_at(k, t), kc, t);
    ops::kv_cache_write(row_at(v, t), vc, t);
    Tensor out = Tensor::zeros({B, H, 1, D});
    ops::decode_attention(row_at(q, t), kc, vc, t + 1, out, false, table, rel_max);
    const auto ov = out.to_floats();
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t x = 0; x < D; ++x)
        EXPECT_NEAR(ov[bh * D + x], fv[(bh * T + t) * D + x], 2e-6) << "t " << t;
  }
}

TEST(T5Bias, BadTablesAreRefused) {
  const Shape qs = {1, 2, 4, 8};
  Tensor q = test::random_tensor(qs, 1), out = Tensor::zeros(qs);
  Tensor probs = Tensor::zeros({1, 2, 4, 4});
  AttentionOptions o;
  o.rel_max = 3;
  o.rel_bias = Tensor::zeros({7, 3});  // 3 heads' columns for 2 heads
  EXPECT_THROW(ops::attention_forward(q, q, q, o, out, probs), Error);
  o.rel_bias = Tensor::zeros({7, 2});
  o.alibi = true;  // one bias at a time
  EXPECT_THROW(ops::attention_forward(q, q, q, o, out, probs), Error);
  o.alibi = false;
  o.rel_bias_grad = Tensor::zeros({5, 2});
  EXPECT_THROW(ops::attention_forward(q, q, q, o, out, probs), Error);
  o.rel_bias_grad = Tensor::zeros({7, 2});
  EXPECT_NO_THROW(ops::attention_forward(q, q, q, o, out, probs));
  Tensor step = Tensor::zeros({1, 2, 1, 8});
  EXPECT_THROW(ops::decode_attention(step, q, q, 4, step, false, Tensor::zeros({6, 2}), 3), Error);
}

// The CUDA flash kernels add T5's bias up to max_distance 512, the column
// they hold in shared memory, and refuse a longer table saying so (the plan
// then runs the materialized core, tests/cpu/test_attention_plan.cpp); the
// CPU twin takes any.
TEST(T5Bias, FlashKernelsOnAGpuHoldTablesUpToALimit) {
  ops::AttentionDevice h100;
  h100.cuda = true;
  h100.sm = 90;
  h100.tc_code = true;
  ops::FlashCase c{DType::F16, 2, 4, 128, 128, 64};
  c.rel_bias = true;
  for (int64_t rel_max : {int64_t{0}, int64_t{128}, t5::kFlashMaxDistance}) {
    c.rel_max = rel_max;
    for (ops::FlashKernel k : {ops::FlashKernel::Portable, ops::FlashKernel::TensorCore})
      EXPECT_EQ(ops::flash_kernel_unsupported(k, c, h100), "") << rel_max;
  }
  c.rel_max = t5::kFlashMaxDistance + 1;
  for (ops::FlashKernel k : {ops::FlashKernel::Portable, ops::FlashKernel::TensorCore}) {
    const std::string why = ops::flash_kernel_unsupported(k, c, h100);
    EXPECT_NE(why.find("up to 512, not 513"), std::string::npos) << why;
  }
  EXPECT_EQ(ops::flash_kernel_unsupported(ops::FlashKernel::Portable, c, ops::AttentionDevice{}),
            "");
  // The tc kernel's backward at head dim 128 has no registers to spare: the
  // plan takes the portable kernel there.
  c.rel_max = 128;
  c.D = 128;
  EXPECT_NE(ops::flash_kernel_unsupported(ops::FlashKernel::TensorCore, c, h100)
                .find("head dims 32 and 64, not 128"),
            std::string::npos);
  EXPECT_EQ(ops::flash_kernel_unsupported(ops::FlashKernel::Portable, c, h100), "");
}

}  // namespace
}  // namespace rotor
