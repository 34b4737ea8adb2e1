// TUPE's untied positional correlation (nn/tupe.h): the bias every layer
// adds is (p_i U^Q)_h . (p_j U^K)_h / sqrt(2 D), the same for every batch
// row, with the [CLS] row and column replaced by the head's two scalars; and
// a masked LM with it (and with T5's bias, TUPE-R) scales q by 1/sqrt(2 D).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nn/tupe.h"
#include "support/test_util.h"

namespace rotor {
namespace {

TEST(Tupe, CorrelationIsUntiedFromCls) {
  const int64_t d = 8, H = 2, D = 4, T = 5, B = 3;
  nn::ParameterStore store;
  nn::TupeBias tupe(store, "t", 16, d, H, 0.5);
  store.allocate(Device::cpu());
  store.initialize(3);
  float* theta = store.find("t.cls")->value.data<float>();  // [2, H]
  theta[0] = 0.25f;
  theta[1] = -0.5f;
  theta[2] = 1.5f;
  theta[3] = 2.0f;
  nn::Context ctx;
  tupe.prepare(B, T, ctx);
  const auto p = test::to_double(store.find("t.position_embeddings.weight")->value);
  const auto uq = test::to_double(store.find("t.q_proj.weight")->value);  // [d, d]: out, in
  const auto uk = test::to_double(store.find("t.k_proj.weight")->value);
  auto proj = [&](const std::vector<double>& w, int64_t i, int64_t c) {
    double s = 0;
    for (int64_t x = 0; x < d; ++x) s += w[c * d + x] * p[i * d + x];
    return s;
  };
  const auto bias = tupe.bias().to_floats();
  ASSERT_EQ(tupe.bias().shape(), (Shape{B, H, T, T}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double want;
          if (i == 0) {
            want = theta[h];  // what [CLS] attends to
          } else if (j == 0) {
            want = theta[H + h];  // what attends to [CLS]
          } else {
            want = 0;
            for (int64_t c = 0; c < D; ++c) want += proj(uq, i, h * D + c) * proj(uk, j, h * D + c);
            want /= std::sqrt(2.0 * D);
          }
          EXPECT_NEAR(bias[((b * H + h) * T + i) * T + j], want, 1e-5) << b << h << i << j;
        }
}

}  // namespace
}  // namespace rotor
