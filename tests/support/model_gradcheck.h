// Whole-model gradient checks (tests/cpu/test_mlm_model.cpp,
// test_classifier_model.cpp, test_lm_model.cpp): sampled elements of every
// parameter against central differences of the model's loss.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/philox.h"
#include "nn/parameters.h"
#include "support/test_util.h"

namespace rotor::test {

// Perturbs the store's values so that LN gains and biases are not 1 / 0.
inline void jitter(nn::ParameterStore& store, uint64_t seed, float amount) {
  std::vector<float> v = store.values().to_floats();
  std::vector<float> n = random_floats(v.size(), seed, -amount, amount);
  for (size_t i = 0; i < v.size(); ++i) v[i] += n[i];
  store.values().copy_from(Tensor::from_floats(v, {static_cast<int64_t>(v.size())}));
}

// Checks `per_param` elements of every parameter of `store` (f32 on the CPU,
// its analytic gradients already in store.grads()) against central
// differences of `objective` with step `step`, within 2e-3 + 2e-2 |g|.
// Elements with a gradient are preferred (an embedding's unused rows have
// none). Every parameter must get some gradient, except those for which
// `may_be_zero` says so (a key bias that softmax cancels: its elements are
// still checked, against differences of ~0). Returns how many were checked.
inline int check_model_gradients(nn::ParameterStore& store,
                                 const std::function<double()>& objective,
                                 const std::function<bool(const std::string&)>& may_be_zero,
                                 int per_param = 6, double step = 5e-3) {
  const std::vector<float> grads = store.grads().to_floats();
  float* values = store.values().data<float>();
  int checked = 0;
  for (const auto& p : store.parameters()) {
    const int64_t n = shape_numel(p->shape);
    double max_abs = 0;
    for (int64_t i = 0; i < n; ++i)
      max_abs = std::max(max_abs, std::abs(static_cast<double>(grads[p->offset + i])));
    if (!may_be_zero(p->name)) {
      EXPECT_GT(max_abs, 0.0) << p->name << " got no gradient";
    }
    PhiloxRng rng(7, p->offset);
    for (int k = 0; k < per_param; ++k) {
      int64_t i = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
      for (int tries = 0; tries < 20 && grads[p->offset + i] == 0.0f; ++tries)
        i = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
      float& w = values[p->offset + i];
      const float w0 = w;
      w = w0 + static_cast<float>(step);
      const double fp = objective();
      w = w0 - static_cast<float>(step);
      const double fm = objective();
      w = w0;
      const double numeric = (fp - fm) / (2 * step);
      const double an = grads[p->offset + i];
      EXPECT_NEAR(an, numeric, 2e-3 + 2e-2 * std::abs(an)) << p->name << "[" << i << "]";
      ++checked;
    }
  }
  return checked;
}

}  // namespace rotor::test
