#include "core/favor.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/philox.h"

namespace rotor::favor {

std::vector<float> projection(uint64_t seed, uint64_t draw, uint32_t layer, int64_t features,
                              int64_t dim) {
  if (features < 1 || dim < 1)
    ROTOR_FAIL("favor::projection: features and dim must be >= 1, got {} and {}", features, dim);
  if (draw >> 32) ROTOR_FAIL("favor::projection: draw index {} does not fit 32 bits", draw);
  PhiloxRng rng(seed, rng_stream(draw, layer, RngPurpose::FavorProjection, 0));
  const auto D = static_cast<size_t>(dim);
  std::vector<float> w(static_cast<size_t>(features) * D);
  std::vector<double> block(D * D);
  for (int64_t row0 = 0; row0 < features; row0 += dim) {
    // A Gaussian D x D block, orthonormalized row by row (modified
    // Gram-Schmidt). A row that comes out (numerically) dependent on the
    // previous ones is redrawn; with Gaussian entries that has probability 0.
    for (size_t r = 0; r < D; ++r) {
      double* x = block.data() + r * D;
      for (int attempt = 0;; ++attempt) {
        for (size_t c = 0; c < D; ++c) x[c] = rng.normal();
        for (size_t p = 0; p < r; ++p) {
          const double* e = block.data() + p * D;
          double dot = 0.0;
          for (size_t c = 0; c < D; ++c) dot += x[c] * e[c];
          for (size_t c = 0; c < D; ++c) x[c] -= dot * e[c];
        }
        double norm = 0.0;
        for (size_t c = 0; c < D; ++c) norm += x[c] * x[c];
        norm = std::sqrt(norm);
        if (norm > 1e-6) {
          for (size_t c = 0; c < D; ++c) x[c] /= norm;
          break;
        }
        ROTOR_CHECK(attempt < 16, "favor::projection: Gram-Schmidt does not converge");
      }
    }
    // Rows of this block, each scaled by a chi(D) length.
    const int64_t rows = std::min<int64_t>(dim, features - row0);
    for (int64_t r = 0; r < rows; ++r) {
      double len = 0.0;
      for (size_t c = 0; c < D; ++c) {
        const double g = rng.normal();
        len += g * g;
      }
      len = std::sqrt(len);
      const double* e = block.data() + static_cast<size_t>(r) * D;
      float* out = w.data() + static_cast<size_t>(row0 + r) * D;
      for (size_t c = 0; c < D; ++c) out[c] = static_cast<float>(e[c] * len);
    }
  }
  return w;
}

}  // namespace rotor::favor
