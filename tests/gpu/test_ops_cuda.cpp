// Every CUDA op against the CPU op, from one table of cases
// (tests/support/op_case.h): `ctest -R <op>` runs an op's cases. The flash
// attention core and the decoding ops have their table in
// test_flash_attention_cuda.cpp. A few properties that are not a comparison
// with the CPU (bitwise casts, RoPE's reference vectors) are plain tests
// named after their op. Skipped (one line) when no GPU answers. With
// ROTOR_OPS_MODE=perf the table is the ops' benchmark (op_case.h): each case
// marks its op with OpEnv::op and declares its traffic with `cost`, counted
// once per call (the op's reads and writes, GEMM and attention FLOPs as
// 2 M N K, attention without masks).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/ops.h"
#include "support/op_case.h"

namespace rotor {
namespace {

using ops::Activation;
using test::OpCase;
using test::OpEnv;
using test::OpOutputs;
using test::out;
using test::out_value;
using test::random_floats;
using test::rounded;

const DType kAll[] = {DType::F32, DType::F16, DType::BF16};
const Device kGpu = Device::cuda(0);

std::vector<float> rnd(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return random_floats(static_cast<size_t>(n), seed, lo, hi);
}

std::string dims(const Shape& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

// One case per dtype of `dtypes`; returns the index of the first.
size_t add_cases(std::vector<OpCase>& cs, const std::string& op, const std::string& config,
                 std::function<OpOutputs(const OpEnv&)> run,
                 std::initializer_list<DType> dtypes = {DType::F32, DType::F16, DType::BF16}) {
  const size_t first = cs.size();
  for (DType dt : dtypes) {
    OpCase c;
    c.op = op;
    c.config = config;
    c.dtype = dt;
    c.run = run;
    cs.push_back(std::move(c));
  }
  return first;
}

// Declares the traffic of the cases from `first` on: `elems` values of the
// case's dtype and `bytes` more (f32 statistics, ids) read or written, and
// `flops`.
void cost(std::vector<OpCase>& cs, size_t first, double elems, double bytes = 0, double flops = 0) {
  for (size_t i = first; i < cs.size(); ++i) {
    cs[i].bytes = elems * static_cast<double>(dtype_size(cs[i].dtype)) + bytes;
    cs[i].flops = flops;
  }
}

// ---------------------------------------------------------------------------- gemm

struct GemmShape {
  Shape a, b, c;
  bool ta, tb;
};

void gemm_cases(std::vector<OpCase>& cs) {
  const GemmShape shapes[] = {
      {{7, 5}, {5, 9}, {7, 9}, false, false},
      {{5, 7}, {5, 9}, {7, 9}, true, false},
      {{7, 5}, {9, 5}, {7, 9}, false, true},
      {{5, 7}, {9, 5}, {7, 9}, true, true},
      {{3, 7, 64}, {3, 64, 16}, {3, 7, 16}, false, false},       // batched
      {{2, 3, 33, 17}, {17, 24}, {2, 3, 33, 24}, false, false},  // 2-D B folded into M
      {{3, 17, 33}, {17, 24}, {3, 33, 24}, true, false},         // 2-D B, transposed A
      {{3, 33, 17}, {3, 24, 17}, {3, 33, 24}, false, true},
      {{4, 0}, {0, 6}, {4, 6}, false, false},  // K = 0: C = beta C + bias
  };
  const GemmShape epilogue_shapes[] = {
      {{64, 32}, {32, 48}, {64, 48}, false, false},       // N % 8 == 0: fused GELU_AUX possible
      {{2, 13, 32}, {20, 32}, {2, 13, 20}, false, true},  // N % 8 != 0: the fallbacks
  };
  struct Epi {
    Activation act;
    bool bias, pre;
    float beta;
  };
  auto add_gemm = [&](const GemmShape& g, const Epi& p) {
    const std::string config =
        fmt::format("A{}{}_B{}{}_{}{}{}_beta{}", dims(g.a), g.ta ? "t" : "", dims(g.b),
                    g.tb ? "t" : "", ops::activation_name(p.act), p.bias ? "_bias" : "",
                    p.pre ? "_pre" : "", p.beta == 0.5f ? "0p5" : std::to_string(int(p.beta)));
    const size_t first = add_cases(cs, "gemm", config, [g, p](const OpEnv& e) {
      const int64_t N = g.c.back();
      ops::GemmOptions o;
      o.trans_a = g.ta;
      o.trans_b = g.tb;
      o.alpha = 0.75f;
      o.beta = p.beta;
      o.activation = p.act;
      if (p.bias) o.bias = e.in(rnd(N, 4), {N});
      if (p.pre) o.pre_activation = e.zeros(g.c);
      Tensor c = e.in(rnd(shape_numel(g.c), 3), g.c);
      const Tensor a = e.in(rnd(shape_numel(g.a), 1), g.a), b = e.in(rnd(shape_numel(g.b), 2), g.b);
      e.op([&] { ops::gemm(a, b, c, o); });
      OpOutputs r{out("c", c)};
      if (p.pre) r.push_back(out("pre_activation", o.pre_activation));
      return r;
    });
    // f32 sums in another order (cuBLASLt, OpenBLAS) before the one rounding.
    for (size_t i = first; i < cs.size(); ++i) cs[i].floor = 1e-4;
    const double K = static_cast<double>(g.ta ? g.a[g.a.size() - 2] : g.a.back());
    const double nc = static_cast<double>(shape_numel(g.c));
    cost(cs, first,
         static_cast<double>(shape_numel(g.a) + shape_numel(g.b)) + nc * (p.beta != 0 ? 2 : 1) +
             (p.pre ? nc : 0),
         0, 2 * nc * K);
  };
  for (const auto& g : shapes) {
    add_gemm(g, {Activation::None, false, false, 0.0f});
    add_gemm(g, {Activation::None, true, false, 0.5f});
  }
  for (const auto& g : epilogue_shapes)
    for (Activation act : {Activation::ReLU, Activation::GELU})
      for (bool bias : {false, true})
        for (bool pre : {false, true}) add_gemm(g, {act, bias, pre, pre ? 0.0f : 1.0f});
}

// ------------------------------------------------------------------- element-wise

void elementwise_cases(std::vector<OpCase>& cs) {
  const Shape s{37, 53};
  const int64_t n = shape_numel(s);
  const double dn = static_cast<double>(n);
  cost(cs,
       add_cases(cs, "fill", dims(s),
                 [=](const OpEnv& e) {
                   Tensor x = e.in(rnd(n, 10), s);
                   e.op([&] { ops::fill(x, 2.5f); });
                   return OpOutputs{out("x", x)};
                 }),
       dn);
  add_cases(cs, "cast", "f32_to_dtype", [=](const OpEnv& e) {
    Tensor y = e.zeros(s);
    ops::cast(e.in_f32(rnd(n, 13, -30000.0f, 30000.0f), s), y);
    return OpOutputs{out("y", y)};
  });
  add_cases(cs, "cast", "dtype_to_f32", [=](const OpEnv& e) {
    Tensor y = e.zeros_f32(s);
    ops::cast(e.in(rnd(n, 13, -30000.0f, 30000.0f), s), y);
    return OpOutputs{out("y", y)};
  });
  cost(cs,
       add_cases(cs, "add", dims(s),
                 [=](const OpEnv& e) {
                   Tensor y = e.zeros(s);
                   const Tensor a = e.in(rnd(n, 10, -3, 3), s), b = e.in(rnd(n, 11), s);
                   e.op([&] { ops::add(a, b, y); });
                   return OpOutputs{out("y", y)};
                 }),
       3 * dn);
  cost(cs,
       add_cases(cs, "mul", dims(s),
                 [=](const OpEnv& e) {
                   Tensor y = e.zeros(s);
                   const Tensor a = e.in(rnd(n, 10, -3, 3), s), b = e.in(rnd(n, 11), s);
                   e.op([&] { ops::mul(a, b, y); });
                   return OpOutputs{out("y", y)};
                 }),
       3 * dn);
  cost(cs,
       add_cases(cs, "scale", dims(s),
                 [=](const OpEnv& e) {
                   Tensor x = e.in(rnd(n, 10, -3, 3), s);
                   e.op([&] { ops::scale(x, -1.5f); });
                   return OpOutputs{out("x", x)};
                 }),
       2 * dn);
  cost(cs,
       add_cases(cs, "axpby", dims(s),
                 [=](const OpEnv& e) {
                   Tensor y = e.in(rnd(n, 10, -3, 3), s);
                   const Tensor x = e.in(rnd(n, 11), s);
                   e.op([&] { ops::axpby(0.5f, x, 2.0f, y); });
                   return OpOutputs{out("y", y)};
                 }),
       3 * dn);
  // beta == 0 never reads y: the NaN it holds must not leak.
  add_cases(cs, "axpby", dims(s) + "_beta0_nan_y", [=](const OpEnv& e) {
    Tensor y = e.in(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()), s);
    ops::axpby(2.0f, e.in(rnd(n, 11), s), 0.0f, y);
    return OpOutputs{out("y", y)};
  });
  add_cases(cs, "add_bias", dims(s), [=](const OpEnv& e) {
    Tensor x = e.in(rnd(n, 10, -3, 3), s);
    ops::add_bias(x, e.in(rnd(s[1], 12), {s[1]}));
    return OpOutputs{out("x", x)};
  });
  for (Activation act : {Activation::None, Activation::ReLU, Activation::GELU, Activation::SiLU}) {
    // The GLU on rows of 2 x 64 (the vector kernel) and 2 x 65 (the scalar one).
    for (int64_t F : {int64_t{64}, int64_t{65}}) {
      const Shape hs{s[0], 2 * F}, ys{s[0], F};
      const int64_t hn = shape_numel(hs), yn = shape_numel(ys);
      const std::string name = std::string(ops::activation_name(act)) + "_F" + std::to_string(F);
      cost(cs,
           add_cases(cs, "glu_forward", name,
                     [=](const OpEnv& e) {
                       Tensor y = e.zeros(ys);
                       const Tensor h = e.in(rnd(hn, 17, -3, 3), hs);
                       e.op([&] { ops::glu_forward(h, y, act); });
                       return OpOutputs{out("y", y)};
                     }),
           static_cast<double>(3 * yn));  // read gate and value, write y
      cost(cs,
           add_cases(cs, "glu_backward", name,
                     [=](const OpEnv& e) {
                       Tensor dh = e.zeros(hs);
                       const Tensor dy = e.in(rnd(yn, 18), ys), h = e.in(rnd(hn, 17, -3, 3), hs);
                       e.op([&] { ops::glu_backward(dy, h, dh, act); });
                       return OpOutputs{out("dh", dh)};
                     }),
           static_cast<double>(5 * yn));  // read dy, gate, value; write dh
    }
    cost(cs,
         add_cases(cs, "activation_forward", std::string(ops::activation_name(act)),
                   [=](const OpEnv& e) {
                     Tensor y = e.zeros(s);
                     const Tensor x = e.in(rnd(n, 14, -3, 3), s);
                     e.op([&] { ops::activation_forward(x, y, act); });
                     return OpOutputs{out("y", y)};
                   }),
         2 * dn);
    cost(cs,
         add_cases(cs, "activation_backward", std::string(ops::activation_name(act)),
                   [=](const OpEnv& e) {
                     Tensor dx = e.zeros(s);
                     const Tensor dy = e.in(rnd(n, 15), s), x = e.in(rnd(n, 14, -3, 3), s);
                     e.op([&] { ops::activation_backward(dy, x, dx, act); });
                     return OpOutputs{out("dx", dx)};
                   }),
         3 * dn);
  }
  cost(cs,
       add_cases(cs, "tanh_forward", dims(s),
                 [=](const OpEnv& e) {
                   Tensor y = e.zeros(s);
                   const Tensor x = e.in(rnd(n, 14, -3, 3), s);
                   e.op([&] { ops::tanh_forward(x, y); });
                   return OpOutputs{out("y", y)};
                 }),
       2 * dn);
  cost(cs,
       add_cases(cs, "tanh_backward", dims(s),
                 [=](const OpEnv& e) {
                   Tensor dx = e.zeros(s);
                   const Tensor dy = e.in(rnd(n, 15), s), y = e.in(rnd(n, 16, -1, 1), s);
                   e.op([&] { ops::tanh_backward(dy, y, dx); });
                   return OpOutputs{out("dx", dx)};
                 }),
       3 * dn);
}

// ---------------------------------------------------------------------- reductions

void reduce_cases(std::vector<OpCase>& cs) {
  const Shape s{777, 65};
  const int64_t n = shape_numel(s);
  for (bool acc : {false, true})
    add_cases(cs, "sum_rows", acc ? "accumulate" : "overwrite", [=](const OpEnv& e) {
      Tensor o = e.in_f32(rnd(65, 21), {65});  // f32 sums of any rows (bias gradients)
      ops::sum_rows(e.in(rnd(n, 20, -2, 2), s), o, acc);
      return OpOutputs{out("out", o)};
    });
  add_cases(cs, "sum", dims(s), [=](const OpEnv& e) {
    return OpOutputs{out_value("sum", ops::sum(e.in(rnd(n, 20, -2, 2), s)), 1e-9)};
  });
  add_cases(cs, "max_abs", dims(s), [=](const OpEnv& e) {
    return OpOutputs{out_value("max_abs", ops::max_abs(e.in(rnd(n, 20, -2, 2), s)), 0.0)};
  });
  add_cases(cs, "max_abs", dims(s) + "_nan", [=](const OpEnv& e) {  // reported, not skipped
    auto v = rnd(n, 20, -2, 2);
    v[500] = std::numeric_limits<float>::quiet_NaN();
    return OpOutputs{out_value("max_abs", ops::max_abs(e.in(v, s)), 0.0)};
  });
  add_cases(cs, "global_norm", "two_tensors", [=](const OpEnv& e) {
    const std::vector<Tensor> list{e.in(rnd(n, 20, -2, 2), s), e.in(rnd(12345, 22), {12345})};
    return OpOutputs{out("norm", ops::global_norm(list), 1e-6)};
  });
  add_cases(cs, "any_nonfinite", "inf_then_finite", [=](const OpEnv& e) {
    auto bad = rnd(12345, 22);
    bad[12344] = std::numeric_limits<float>::infinity();
    const std::vector<Tensor> with_inf{e.in(rnd(n, 20), s), e.in(bad, {12345})};
    const std::vector<Tensor> finite{e.in(rnd(n, 20), s), e.in(rnd(12345, 22), {12345})};
    const Tensor first = ops::any_nonfinite(with_inf);
    const Tensor second = ops::any_nonfinite(finite);  // the flag is reset by every call
    return OpOutputs{out("with_inf", first, 0.0), out("finite", second, 0.0)};
  });
}

// ------------------------------------------------ softmax, layer norm, dropout, ...

void row_op_cases(std::vector<OpCase>& cs) {
  for (int64_t n : {1, 7, 128, 1000, 5000}) {
    const Shape s{9, n};
    const double dn = static_cast<double>(9 * n);
    cost(cs,
         add_cases(cs, "softmax_forward", dims(s),
                   [=](const OpEnv& e) {
                     auto v = rnd(9 * n, 30 + n, -8, 8);
                     for (int64_t j = 0; j < n; ++j)
                       v[j] = -INFINITY;  // row 0: nothing visible -> zeros
                     Tensor y = e.zeros(s);
                     const Tensor x = e.in(v, s);
                     e.op([&] { ops::softmax_forward(x, y); });
                     return OpOutputs{out("y", y)};
                   }),
         2 * dn);
    cost(cs,
         add_cases(cs, "softmax_backward", dims(s),
                   [=](const OpEnv& e) {
                     Tensor dx = e.zeros(s);
                     const Tensor y = e.in(rnd(9 * n, 32 + n, 0, 1), s),
                                  dy = e.in(rnd(9 * n, 31 + n), s);
                     e.op([&] { ops::softmax_backward(y, dy, dx); });
                     return OpOutputs{out("dx", dx)};
                   }),
         3 * dn);
  }
  const int64_t rows = 300, d = 96;
  const Shape s{3, 100, d};
  cost(cs,
       add_cases(cs, "layer_norm_forward", dims(s),
                 [=](const OpEnv& e) {
                   Tensor y = e.zeros(s), mean = e.zeros_f32({rows}), rstd = e.zeros_f32({rows});
                   const Tensor x = e.in(rnd(rows * d, 40, -2, 3), s),
                                gamma = e.in(rnd(d, 41, 0.5f, 1.5f), {d}),
                                beta = e.in(rnd(d, 42), {d});
                   e.op([&] { ops::layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd); });
                   return OpOutputs{out("y", y), out("mean", mean), out("rstd", rstd)};
                 }),
       2.0 * rows * d, 8.0 * rows);
  add_cases(cs, "layer_norm_backward", dims(s), [=](const OpEnv& e) {
    const Tensor x = e.in(rnd(rows * d, 40, -2, 3), s), gamma = e.in(rnd(d, 41, 0.5f, 1.5f), {d});
    Tensor y = e.zeros(s), mean = e.zeros_f32({rows}), rstd = e.zeros_f32({rows});
    ops::layer_norm_forward(x, gamma, e.in(rnd(d, 42), {d}), 1e-5f, y, mean, rstd);
    Tensor dx = e.zeros(s), dgamma = e.in(rnd(d, 44), {d}), dbeta = e.in(rnd(d, 45), {d});
    ops::layer_norm_backward(e.in(rnd(rows * d, 43), s), x, gamma, mean, rstd, dx, dgamma, dbeta);
    return OpOutputs{out("dx", dx), out("dgamma", dgamma), out("dbeta", dbeta)};
  });
  // RMSNorm (model.norm_type rms_norm): the same kernels without the mean.
  add_cases(cs, "rms_norm_forward", dims(s), [=](const OpEnv& e) {
    Tensor y = e.zeros(s), mean = e.zeros_f32({rows}), rstd = e.zeros_f32({rows});
    const Tensor x = e.in(rnd(rows * d, 40, -2, 3), s), gamma = e.in(rnd(d, 41, 0.5f, 1.5f), {d});
    ops::layer_norm_forward(x, gamma, e.in(std::vector<float>(d, 0.0f), {d}), 1e-6f, y, mean, rstd,
                            true);
    return OpOutputs{out("y", y), out("mean", mean), out("rstd", rstd)};
  });
  add_cases(cs, "rms_norm_backward", dims(s), [=](const OpEnv& e) {
    const Tensor x = e.in(rnd(rows * d, 40, -2, 3), s), gamma = e.in(rnd(d, 41, 0.5f, 1.5f), {d});
    Tensor y = e.zeros(s), mean = e.zeros_f32({rows}), rstd = e.zeros_f32({rows});
    ops::layer_norm_forward(x, gamma, e.in(std::vector<float>(d, 0.0f), {d}), 1e-6f, y, mean, rstd,
                            true);
    Tensor dx = e.zeros(s), dgamma = e.in(rnd(d, 44), {d}), dbeta = e.zeros_f32({d});
    ops::layer_norm_backward(e.in(rnd(rows * d, 43), s), x, gamma, mean, rstd, dx, dgamma, dbeta,
                             true);
    return OpOutputs{out("dx", dx), out("dgamma", dgamma)};
  });
  const int64_t m = 100003;  // not a multiple of 4 (Philox draws 4 at a time)
  for (float p : {0.0f, 0.1f})
    add_cases(cs, "dropout_add", fmt::format("n{}_p{}", m, int(p * 10)), [=](const OpEnv& e) {
      const uint64_t seed = 0x123456789abcdefULL, stream = rng_stream(7, 3, RngPurpose::Dropout, 1);
      Tensor y = e.zeros({m});
      ops::dropout_add_forward(e.in(rnd(m, 52), {m}), e.in(rnd(m, 50, 0.5f, 1.5f), {m}), p, seed,
                               stream, y);
      return OpOutputs{out("y", y)};
    });
  // Views that start off a 16-byte boundary take the element-by-element paths.
  add_cases(cs, "dropout", "unaligned_view", [=](const OpEnv& e) {
    const uint64_t seed = 99, stream = rng_stream(7, 3, RngPurpose::Dropout, 2);
    const Tensor x = e.in(rnd(3 * 1001, 53), {1001, 3}).narrow(1, 1000);
    Tensor y = e.zeros({1001, 3});
    Tensor yv = y.narrow(1, 1000);
    ops::dropout_forward(x, yv, 0.2f, seed, stream);
    return OpOutputs{out("y", y)};
  });
  add_cases(cs, "add", "unaligned_view", [=](const OpEnv& e) {
    const Tensor a = e.in(rnd(3 * 1001, 54), {1001, 3}).narrow(1, 1000);
    const Tensor b = e.in(rnd(3 * 1001, 55), {1001, 3}).narrow(1, 1000);
    Tensor y = e.zeros({1001, 3});
    Tensor yv = y.narrow(1, 1000);
    ops::add(a, b, yv);
    return OpOutputs{out("y", y)};
  });
  for (float p : {0.0f, 0.1f, 0.5f})
    add_cases(cs, "dropout", fmt::format("n{}_p{}", m, int(p * 10)), [=](const OpEnv& e) {
      const uint64_t seed = 0x123456789abcdefULL, stream = rng_stream(7, 3, RngPurpose::Dropout, 1);
      Tensor y = e.zeros({m});
      ops::dropout_forward(e.in(rnd(m, 50, 0.5f, 1.5f), {m}), y, p, seed, stream);
      Tensor dx = e.in(rnd(m, 51), {m});
      ops::dropout_backward(dx, dx, p, seed, stream);  // in place, the same mask
      return OpOutputs{out("y", y), out("dx", dx)};
    });
}

// ----------------------------------------------------- embedding, loss, optimizer

void embedding_loss_adamw_cases(std::vector<OpCase>& cs) {
  const int64_t V = 50, d = 40, n = 333;
  std::vector<int32_t> ids(n);
  PhiloxRng rng(60, 0);
  for (auto& id : ids) id = static_cast<int32_t>(rng.below(V));
  ids[0] = ids[1] = ids[2] = 7;  // duplicates and the pad id
  add_cases(cs, "embedding_forward", fmt::format("V{}_d{}_n{}", V, d, n), [=](const OpEnv& e) {
    Tensor o = e.zeros({n, d});
    ops::embedding_forward(e.ints(ids, {n}), e.in(rnd(V * d, 61), {V, d}), 22.6f, o);
    return OpOutputs{out("out", o)};
  });
  for (int pad : {-1, 7})
    add_cases(cs, "embedding_backward",
              fmt::format("V{}_d{}_n{}_{}", V, d, n, pad < 0 ? std::string("nopad") : "pad7"),
              [=](const OpEnv& e) {
                Tensor dtable = e.in(rnd(V * d, 63), {V, d});
                ops::embedding_backward(e.ints(ids, {n}), e.in(rnd(n * d, 62), {n, d}), 1.5f,
                                        dtable, pad);
                return OpOutputs{out("dtable", dtable)};
              });

  // The shapes that used to serialize: a frequent id whose rows span many
  // blocks (half of the tokens; the rest skewed towards small ids), the 2-row
  // token-type table (a column sum), pad rows skipped in both. d a multiple
  // of 8: the 16-byte vector paths.
  struct EmbeddingCase {
    int64_t V, d, n;
    int pad;
    const char* ids;
  };
  for (const EmbeddingCase& ec :
       {EmbeddingCase{30000, 256, 8192, 0, "skewed"}, EmbeddingCase{2, 768, 4096, -1, "token_type"},
        EmbeddingCase{5, 64, 3000, 0, "tiny_pad0"}}) {
    std::vector<int32_t> sk(ec.n);
    PhiloxRng srng(64, 0);
    for (int64_t i = 0; i < ec.n; ++i) {
      const uint64_t u = srng.below(1000);
      if (ec.V > 8)  // 50% id 7, 10% pad, the rest ~1/u-distributed over the table
        sk[i] = u < 500 ? 7 : u < 600 ? 0 : static_cast<int32_t>((ec.V - 2) / (1 + u % 97)) + 1;
      else
        sk[i] = static_cast<int32_t>(u % ec.V);
    }
    add_cases(cs, "embedding_backward", fmt::format("V{}_d{}_n{}_{}", ec.V, ec.d, ec.n, ec.ids),
              [=](const OpEnv& e) {
                Tensor dtable = e.in(rnd(ec.V * ec.d, 66), {ec.V, ec.d});
                ops::embedding_backward(e.ints(sk, {ec.n}),
                                        e.in(rnd(ec.n * ec.d, 65), {ec.n, ec.d}), 1.0f, dtable,
                                        ec.pad);
                return OpOutputs{out("dtable", dtable, 1e-4)};
              });
  }
  cost(cs,
       add_cases(
           cs, "embedding_forward", "V1000_d768_n2048",
           [=](const OpEnv& e) {
             std::vector<int32_t> fi(2048);
             PhiloxRng frng(67, 0);
             for (auto& id : fi) id = static_cast<int32_t>(frng.below(1000));
             Tensor o = e.zeros({2048, 768});
             const Tensor ids = e.ints(fi, {2048}), table = e.in(rnd(1000 * 768, 68), {1000, 768});
             e.op([&] { ops::embedding_forward(ids, table, 27.7f, o); });
             return OpOutputs{out("out", o)};
           }),
       2.0 * 2048 * 768, 4.0 * 2048);

  const int64_t N = 37, C = 1001;
  std::vector<int32_t> targets(N);
  PhiloxRng trng(71, 0);
  for (auto& t : targets) t = static_cast<int32_t>(trng.below(C));
  targets[3] = targets[10] = 1;  // ignore_index
  for (float eps : {0.0f, 0.1f})
    cost(cs,
         add_cases(
             cs, "cross_entropy", fmt::format("N{}_V{}_eps{}", N, C, int(eps * 10)),
             [=](const OpEnv& e) {
               const Tensor logits = e.in(rnd(N * C, 70, -6, 6), {N, C}), t = e.ints(targets, {N});
               Tensor loss = e.zeros_f32({N}), nll = e.zeros_f32({N}), lse = e.zeros_f32({N});
               Tensor dlogits = e.zeros({N, C});
               e.op([&] {  // forward and backward
                 ops::cross_entropy_forward(logits, t, eps, 1, loss, nll, lse);
                 ops::cross_entropy_backward(logits, t, lse, eps, 1, 0.25f, dlogits);
               });
               return OpOutputs{out("loss", loss), out("nll", nll), out("lse", lse),
                                out("dlogits", dlogits)};
             }),
         3.0 * N * C, 4.0 * 4 * N);

  const int64_t k = 10007;
  cost(cs,
       add_cases(cs, "adamw_step", fmt::format("n{}", k),
                 [=](const OpEnv& e) {
                   ops::AdamWOptions o;
                   o.lr = 1e-3f;
                   o.beta2 = 0.98f;
                   o.weight_decay = 0.01f;
                   o.step = 7;
                   o.grad_multiplier = 0.5f;
                   o.device_scale = e.in_f32({0.8f}, {1});
                   Tensor p = e.in_f32(rnd(k, 100), {k}),
                          m = e.in_f32(rnd(k, 102, -0.1f, 0.1f), {k});
                   Tensor v = e.in_f32(rnd(k, 103, 0.0f, 0.01f), {k});
                   const Tensor g = e.in_f32(rnd(k, 101), {k});
                   e.op([&] { ops::adamw_step(p, g, m, v, o); });
                   return OpOutputs{out("params", p, 1e-6), out("m", m, 1e-6), out("v", v, 1e-6)};
                 },
                 {DType::F32}),
       7.0 * k);  // p, g, m, v read; p, m, v written
}

// ------------------------------------------------------------- heads and attention

struct SplitCase {
  int64_t B, T, P, H, D;
  int rope_parts;
  float scale;
  int64_t offset;
};

void heads_cases(std::vector<OpCase>& cs) {
  const SplitCase splits[] = {
      {2, 37, 3, 3, 64, 2, 0.125f, 0},     // self-attention q, k, v
      {2, 37, 3, 3, 64, 2, 0.125f, 1500},  // angles up to ~1500 rad
      {1, 1, 3, 2, 8, 2, 0.35f, 77},       // one decoding step
      {3, 5, 2, 2, 32, 0, 1.0f, 0},        // cross-attention k, v: never rotated
      {2, 9, 1, 4, 16, 0, 0.25f, 0},       // cross-attention q: scaled only
  };
  for (const SplitCase& sc : splits) {
    ops::SplitHeadsOptions o;
    o.n_heads = sc.H;
    o.rope_parts = sc.rope_parts;
    o.position_offset = sc.offset;
    o.part0_scale = sc.scale;
    const std::string config =
        fmt::format("B{}_T{}_P{}_H{}_D{}_rot{}_off{}{}", sc.B, sc.T, sc.P, sc.H, sc.D,
                    sc.rope_parts, sc.offset, sc.scale != 1.0f ? "_scaled" : "");
    const Shape packed{sc.B, sc.T, sc.P * sc.H * sc.D}, heads{sc.B, sc.H, sc.T, sc.D};
    add_cases(cs, "split_heads_forward", config, [=](const OpEnv& e) {
      std::vector<Tensor> parts;
      for (int64_t p = 0; p < sc.P; ++p) parts.push_back(e.zeros(heads));
      ops::split_heads_forward(e.in(rnd(shape_numel(packed), 80, -2, 2), packed), parts, o);
      OpOutputs r;
      for (int64_t p = 0; p < sc.P; ++p) r.push_back(out(fmt::format("part{}", p), parts[p], 1e-6));
      return r;
    });
    add_cases(cs, "split_heads_backward", config, [=](const OpEnv& e) {
      std::vector<Tensor> dparts;
      for (int64_t p = 0; p < sc.P; ++p)
        dparts.push_back(e.in(rnd(shape_numel(heads), 81 + p), heads));
      Tensor dx = e.in(rnd(shape_numel(packed), 84), packed);  // written, not accumulated
      ops::split_heads_backward(dparts, dx, o);
      return OpOutputs{out("dx", dx, 1e-6)};
    });
  }
  for (const Shape& s : {Shape{2, 3, 17, 16}, Shape{1, 4, 1, 64}}) {  // [B, H, T, D]
    const Shape merged{s[0], s[2], s[1] * s[3]};
    add_cases(cs, "merge_heads_forward", dims(s), [=](const OpEnv& e) {
      Tensor y = e.zeros(merged);
      ops::merge_heads_forward(e.in(rnd(shape_numel(s), 85), s), y);
      return OpOutputs{out("y", y, 0.0)};
    });
    add_cases(cs, "merge_heads_backward", dims(s), [=](const OpEnv& e) {
      Tensor dx = e.zeros(s);
      ops::merge_heads_backward(e.in(rnd(shape_numel(s), 86), merged), dx);
      return OpOutputs{out("dx", dx, 0.0)};
    });
  }
}

struct AttnCase {
  int64_t B, H, Tq, Tk, D;
  bool causal, lengths;
  float dropout;
};

void attention_cases(std::vector<OpCase>& cs) {
  const AttnCase f32_cases[] = {
      {2, 3, 17, 17, 16, false, false, 0.0f}, {2, 3, 17, 17, 16, true, false, 0.0f},
      {3, 2, 5, 23, 32, true, true, 0.0f},    {3, 2, 19, 19, 64, false, true, 0.1f},
      {2, 2, 33, 40, 16, true, true, 0.5f},
  };
  const AttnCase lowp_cases[] = {{2, 3, 17, 17, 64, true, true, 0.0f},
                                 {2, 2, 33, 40, 32, false, true, 0.1f}};
  auto add_case = [&](const AttnCase& a, std::initializer_list<DType> dtypes) {
    const std::string config =
        fmt::format("B{}_H{}_Tq{}_Tk{}_D{}{}{}_drop{}", a.B, a.H, a.Tq, a.Tk, a.D,
                    a.causal ? "_causal" : "", a.lengths ? "_lengths" : "", int(a.dropout * 10));
    const size_t first = add_cases(
        cs, "attention", config,
        [a](const OpEnv& e) {
          const Shape sq{a.B, a.H, a.Tq, a.D}, sk{a.B, a.H, a.Tk, a.D}, sp{a.B, a.H, a.Tq, a.Tk};
          std::vector<int32_t> lens(a.B);
          for (int64_t b = 0; b < a.B; ++b) lens[b] = static_cast<int32_t>((a.Tk * (b + 1)) / a.B);
          lens[0] = 0;  // a batch row with no visible key at all
          ops::AttentionOptions o;
          o.scale = 1.0f / std::sqrt(static_cast<float>(a.D));
          o.causal = a.causal;
          o.dropout = a.dropout;
          o.seed = 99;
          o.stream = rng_stream(1, 2, RngPurpose::AttentionDropout, 0);
          if (a.lengths) o.key_lengths = e.ints(lens, {a.B});
          const Tensor q = e.in(rnd(shape_numel(sq), 90, -2, 2), sq);
          const Tensor k = e.in(rnd(shape_numel(sk), 91, -2, 2), sk),
                       v = e.in(rnd(shape_numel(sk), 92), sk);
          Tensor o_out = e.zeros(sq), probs = e.zeros(sp);
          Tensor dq = e.zeros(sq), dk = e.zeros(sk), dv = e.zeros(sk);
          const Tensor dout = e.in(rnd(shape_numel(sq), 93), sq);
          e.op([&] {  // forward and backward
            ops::attention_forward(q, k, v, o, o_out, probs);
            ops::attention_backward(q, k, v, probs, dout, o, dq, dk, dv);
          });
          return OpOutputs{out("out", o_out, 2e-5), out("probs", probs, 2e-5), out("dq", dq, 2e-5),
                           out("dk", dk, 2e-5), out("dv", dv, 2e-5)};
        },
        dtypes);
    // The GPU reference rounds P (and dS) to the low precision before the
    // second GEMMs, as every fused kernel does; one rounding of each output
    // does not model that, so allow 4x plus 4 units of rounding.
    for (size_t i = first; i < cs.size(); ++i) {
      cs[i].factor = 4.0;
      cs[i].floor = 4 * (cs[i].dtype == DType::F16 ? 9.8e-4 : 7.8e-3);
    }
    // Forward reads q, k, v and writes out and P; backward reads q, k, v,
    // dout and P and writes dq, dk, dv. Six GEMMs of Tq x Tk x D: S and O
    // forward, dV, dP, dQ and dK backward.
    const double bhd = static_cast<double>(a.B * a.H * a.D), bhp = static_cast<double>(a.B * a.H);
    cost(cs, first, bhd * (4.0 * a.Tq + 6.0 * a.Tk) + 2 * bhp * a.Tq * a.Tk, 0,
         6 * 2.0 * bhd * a.Tq * a.Tk);
  };
  for (const auto& a : f32_cases) add_case(a, {DType::F32});
  for (const auto& a : lowp_cases) add_case(a, {DType::F16, DType::BF16});
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cs;
  gemm_cases(cs);
  elementwise_cases(cs);
  reduce_cases(cs);
  row_op_cases(cs);
  embedding_loss_adamw_cases(cs);
  heads_cases(cs);
  attention_cases(cs);
  return cs;
}

ROTOR_OP_CASES(Ops, all_cases());

// ------------------------------------------------------- properties beyond the CPU

TEST(CudaOps, cast_MatchesHostConversionBitwise) {
  ROTOR_REQUIRE_GPU();
  auto v = random_floats(4099, 13, -70000.0f, 70000.0f);
  v[0] = 1e-7f;  // f16 subnormal
  v[1] = 65519.0f;
  v[2] = -0.0f;
  for (DType dt : {DType::F16, DType::BF16}) {
    Tensor dst = Tensor::empty({4099}, dt, kGpu);
    ops::cast(Tensor::from_floats(v, {4099}, DType::F32, kGpu), dst);
    const auto host = rounded(v, dt);
    const auto got = dst.to_floats();
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &host[i], 4), 0) << dtype_name(dt) << " element " << i;
    Tensor back = Tensor::empty({4099}, DType::F32, kGpu);
    ops::cast(dst, back);
    EXPECT_EQ(back.to_floats(), host);
  }
}

// No atomics: the same ids give the same bits, also when one id has most of
// the rows (its sum spread over many blocks).
TEST(CudaOps, embedding_backward_DeterministicWhateverTheIds) {
  ROTOR_REQUIRE_GPU();
  const int64_t V = 1000, d = 768, n = 32768;
  std::vector<int32_t> ids(n);
  PhiloxRng rng(5, 0);
  for (auto& id : ids) id = rng.below(4) == 0 ? static_cast<int32_t>(rng.below(V)) : 3;
  const Tensor gpu_ids = Tensor::from_ints(ids, {n}, kGpu);
  const Tensor dout = Tensor::from_floats(random_floats(n * d, 9), {n, d}, DType::BF16, kGpu);
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    Tensor dtable = Tensor::zeros({V, d}, DType::F32, kGpu);
    ops::embedding_backward(gpu_ids, dout, 1.0f, dtable, -1);
    if (run == 0)
      first = dtable.to_floats();
    else
      ASSERT_EQ(dtable.to_floats(), first) << "run " << run;
  }
}

// The greedy prediction's hits on the GPU are the CPU's, row by row: ties
// (coarse logits, many equal maxima) go to the first index in every dtype,
// across the vocabulary's strides of a block (V 1001 > 512 threads).
TEST(CudaOps, top1_hits_MatchTheCpuWithTies) {
  ROTOR_REQUIRE_GPU();
  const int64_t N = 300, V = 1001;
  auto v = random_floats(N * V, 81, -4.0f, 4.0f);
  for (float& x : v) x = std::round(x);                 // 9 values: every row has tied maxima
  for (int64_t j = 0; j < V; ++j) v[5 * V + j] = 1.0f;  // one row all tied
  std::vector<int32_t> t(N);
  PhiloxRng trng(82, 0);
  for (int64_t i = 0; i < N; ++i) {
    const float* row = v.data() + i * V;
    // Half the rows target their first maximum, the rest a random class.
    t[i] = i % 2 ? static_cast<int32_t>(trng.below(V))
                 : static_cast<int32_t>(std::max_element(row, row + V) - row);
  }
  t[7] = -1;  // ignored
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor host = Tensor::from_floats(v, {N, V}, dt);
    Tensor want = Tensor::empty({N}, DType::I32);
    ops::top1_hits(host, Tensor::from_ints(t, {N}), -1, want);
    Tensor got = Tensor::empty({N}, DType::I32, kGpu);
    ops::top1_hits(host.to(kGpu), Tensor::from_ints(t, {N}, kGpu), -1, got);
    EXPECT_EQ(got.to_ints(), want.to_ints());
    EXPECT_GE(ops::count_top1_hits(host, Tensor::from_ints(t, {N}), -1), N / 2 - 1);
  }
}

TEST(CudaOps, dropout_DropsAboutHalfAtHalf) {
  ROTOR_REQUIRE_GPU();
  const int64_t n = 100003;
  Tensor y = Tensor::empty({n}, DType::F32, kGpu);
  ops::dropout_forward(Tensor::full({n}, 1.0f, DType::F32, kGpu), y, 0.5f, 42,
                       rng_stream(7, 3, RngPurpose::Dropout, 1));
  int64_t dropped = 0;
  for (float x : y.to_floats()) dropped += x == 0.0f;
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.5, 0.01);
}

// REFERENCE.md's RoPE vectors straight from the CUDA head split: q at
// position m, reached by the offset (decoding) and as row m of a sequence.
TEST(CudaOps, split_heads_forward_RopeReferenceVectors) {
  ROTOR_REQUIRE_GPU();
  const std::vector<float> q{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  const std::vector<std::pair<int64_t, std::vector<double>>> expected{
      {1,
       {-0.114263966, 0.192207560, 0.258567883, 0.427951691, 0.493975100, 0.604969917, 0.699199650,
        0.800699600}},
      {5,
       {0.220151073, -0.039159990, 0.071504553, 0.494860686, 0.469387629, 0.624239741, 0.695991267,
        0.803489985}},
      {100,
       {0.187505015, 0.121827210, -0.034113014, -0.498834945, -0.234731438, 0.744916876,
        0.616636182, 0.865886724}},
  };
  for (const auto& [m, want] : expected) {
    ops::SplitHeadsOptions o;
    o.rope_parts = 1;
    o.position_offset = m;
    std::vector<Tensor> parts{Tensor::zeros({1, 1, 1, 8}, DType::F32, kGpu)};
    ops::split_heads_forward(Tensor::from_floats(q, {1, 1, 8}, DType::F32, kGpu), parts, o);
    EXPECT_LE(test::max_rel_error(parts[0].to_floats(), want), 1e-6) << "offset m = " << m;
    std::vector<float> x(static_cast<size_t>((m + 1) * 8), 0.0f);
    std::copy(q.begin(), q.end(), x.end() - 8);
    o.position_offset = 0;
    parts = {Tensor::zeros({1, 1, m + 1, 8}, DType::F32, kGpu)};
    ops::split_heads_forward(Tensor::from_floats(x, {1, m + 1, 8}, DType::F32, kGpu), parts, o);
    const auto rows = parts[0].to_floats();
    EXPECT_LE(test::max_rel_error(std::vector<float>(rows.end() - 8, rows.end()), want), 1e-6)
        << "row m = " << m;
  }
}

}  // namespace
}  // namespace rotor
