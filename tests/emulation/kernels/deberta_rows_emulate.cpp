// kernels/deberta_rows.cu (DeBERTa's relative rows) run on the CPU
// (emulate_cu.py, kernel_emulation.h) and held to its CPU twin,
// ops::deberta_gather / deberta_scatter, bitwise (one thread sums a row in
// the CPU's order): rows from the log buckets of ops::deberta_rows-like
// tables, Tq != Tk, and rows that several scores share.
#include "ops/deberta_bias.h"
//
#include "emulate_common.h"
#include "emulated/deberta_rows.inc"

namespace {

using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

// rows[i, j] = clip(i - j + offset, 0, S - 1), the shape DeBERTa's relative
// rows have (a band, clipped), plus a few arbitrary entries.
std::vector<int32_t> band_rows(int64_t Tq, int64_t Tk, int64_t S) {
  std::vector<int32_t> rows(static_cast<size_t>(Tq * Tk));
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) {
      int64_t r = i - j + S / 2;
      if ((i * 7 + j * 3) % 11 == 0) r = (i + 2 * j) % S;
      rows[static_cast<size_t>(i * Tk + j)] =
          static_cast<int32_t>(std::clamp<int64_t>(r, 0, S - 1));
    }
  return rows;
}

void rows_case(int64_t BH, int64_t Tq, int64_t Tk, int64_t S, float scale) {
  char what[96];
  std::snprintf(what, sizeof what, "deberta BH%lld Tq%lld Tk%lld S%lld", static_cast<long long>(BH),
                static_cast<long long>(Tq), static_cast<long long>(Tk), static_cast<long long>(S));
  const auto c2p = randoms(static_cast<size_t>(BH * Tq * S), 5);
  const auto p2c = randoms(static_cast<size_t>(BH * Tk * S), 6);
  const auto rows = band_rows(Tq, Tk, S);
  const Tensor rows_t = Tensor::from_ints(rows, {Tq, Tk});
  Tensor bias_ref = Tensor::zeros({1, BH, Tq, Tk});
  rotor::ops::deberta_gather(Tensor::from_floats(c2p, {1, BH, Tq, S}),
                             Tensor::from_floats(p2c, {1, BH, Tk, S}), rows_t, scale, bias_ref);
  std::vector<float> bias(static_cast<size_t>(BH * Tq * Tk), NAN);
  check_status(what, ke::deberta_gather_emulated(c2p.data(), p2c.data(), rows.data(), scale,
                                                 bias.data(), BH, Tq, Tk, S, nullptr));
  check_bits(what, "bias", bias, bias_ref.to_floats());

  const auto dbias = randoms(bias.size(), 7);
  Tensor dc2p_ref = Tensor::zeros({1, BH, Tq, S}), dp2c_ref = Tensor::zeros({1, BH, Tk, S});
  rotor::ops::deberta_scatter(Tensor::from_floats(dbias, {1, BH, Tq, Tk}), rows_t, scale, dc2p_ref,
                              dp2c_ref);
  std::vector<float> dc2p(c2p.size(), NAN), dp2c(p2c.size(), NAN);
  check_status(what, ke::deberta_scatter_emulated(dbias.data(), rows.data(), scale, dc2p.data(),
                                                  dp2c.data(), BH, Tq, Tk, S, nullptr));
  check_bits(what, "dc2p", dc2p, dc2p_ref.to_floats());
  check_bits(what, "dp2c", dp2c, dp2c_ref.to_floats());
}

void run() {
  rows_case(2, 6, 6, 8, 1.0f);
  rows_case(3, 4, 9, 6, 0.5f);  // more keys than queries
  rows_case(1, 9, 3, 4, 2.0f);  // more queries than keys, rows clipped often
  rows_case(2, 1, 1, 1, 1.0f);  // one row
  rows_case(4, 33, 29, 16, 0.75f);
}

const Register reg("deberta_rows", run);

}  // namespace
