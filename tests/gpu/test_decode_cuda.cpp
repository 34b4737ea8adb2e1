// The decoding kernels (the key/value cache write, one-query attention over
// the cache, the beam's row reorder) against their CPU twins, as a table of
// cases (tests/support/op_case.h). The attention cores' kernels are in
// test_attention_kernels_cuda.cpp. Skipped (one line) when no GPU answers.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "ops/decode.h"
#include "support/op_case.h"

namespace rotor {
namespace {

using test::OpCase;
using test::OpEnv;
using test::OpOutputs;
using test::out;
using test::random_floats;

const Device kGpu = Device::cuda(0);

std::vector<OpCase> decode_cases() {
  std::vector<OpCase> cs;
  // Decoding: write a key at position L - 1 of the caches, attend with one query.
  const int64_t B = 3, H = 2, Tmax = 40, D = 64, L = 37;
  const Shape cache{B, H, Tmax, D}, row{B, H, 1, D};
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    OpCase w;
    w.op = "kv_cache_write";
    w.config = fmt::format("B{}_H{}_Tmax{}_D{}_pos{}", B, H, Tmax, D, L - 1);
    w.dtype = dt;
    w.run = [=](const OpEnv& e) {
      Tensor k = e.in(random_floats(shape_numel(cache), 1), cache);
      ops::kv_cache_write(e.in(random_floats(shape_numel(row), 4), row), k, L - 1);
      return OpOutputs{out("cache", k, 0.0)};
    };
    w.floor = 0.0;  // a copy: exact
    cs.push_back(w);

    OpCase a;
    a.op = "decode_attention";
    a.config = fmt::format("B{}_H{}_Tmax{}_D{}_len{}", B, H, Tmax, D, L);
    a.dtype = dt;
    a.run = [=](const OpEnv& e) {
      Tensor y = e.zeros(row);
      ops::decode_attention(e.in(random_floats(shape_numel(row), 3, -2.0f, 2.0f), row),
                            e.in(random_floats(shape_numel(cache), 1), cache),
                            e.in(random_floats(shape_numel(cache), 2), cache), L, y);
      return OpOutputs{out("out", y)};
    };
    a.floor = 1e-4;
    cs.push_back(a);

    // Beam search reorders rows with a host index on device rows.
    OpCase s;
    s.op = "index_select";
    s.config = "host_index_2_0_2_1";
    s.dtype = dt;
    s.run = [=](const OpEnv& e) {
      Tensor dst = e.zeros({4, H, Tmax, D});
      ops::index_select(e.in(random_floats(shape_numel(cache), 1), cache),
                        Tensor::from_ints({2, 0, 2, 1}, {4}), dst);
      return OpOutputs{out("dst", dst, 0.0)};
    };
    s.floor = 0.0;  // a copy: exact
    cs.push_back(s);
  }
  return cs;
}

ROTOR_OP_CASES(Decode, decode_cases());

TEST(CudaOps, index_select_RejectsAnIndexOutOfRange) {
  ROTOR_REQUIRE_GPU();
  Tensor src = Tensor::zeros({3, 2, 4}, DType::F32, kGpu),
         dst = Tensor::zeros({4, 2, 4}, DType::F32, kGpu);
  EXPECT_THROW(ops::index_select(src, Tensor::from_ints({0, 3, 0, 0}, {4}), dst), Error);
}

}  // namespace
}  // namespace rotor
