// kernels/xl_shift.cu (Transformer-XL's relative shift) run on the CPU
// (emulate_cu.py, kernel_emulation.h) and held to its CPU twin,
// ops::xl_shift_forward / xl_shift_backward: the bias and the three
// gradients bitwise (the kernels sum in double in the CPU's order), with and
// without a query offset (cached decoding), Tq < Tk, Tq > Tk, one key.
#include "ops/xl_bias.h"
//
#include "emulate_common.h"
#include "emulated/xl_shift.inc"

namespace {

using rotor::Tensor;
using namespace emu_check;
namespace ke = rotor::kernels::emulated;

void shift_case(int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t q_offset) {
  const int64_t L = q_offset + Tq + Tk - 1;
  char what[96];
  std::snprintf(what, sizeof what, "xl_shift B%lld H%lld Tq%lld Tk%lld offset %lld",
                static_cast<long long>(B), static_cast<long long>(H), static_cast<long long>(Tq),
                static_cast<long long>(Tk), static_cast<long long>(q_offset));
  const auto g = randoms(static_cast<size_t>(B * H * Tq * L), 1);
  const auto gv = randoms(static_cast<size_t>(H * L), 2);
  const auto cu = randoms(static_cast<size_t>(B * H * Tk), 3);
  Tensor bias_ref = Tensor::zeros({B, H, Tq, Tk});
  rotor::ops::xl_shift_forward(Tensor::from_floats(g, {B, H, Tq, L}),
                               Tensor::from_floats(gv, {H, L}), Tensor::from_floats(cu, {B, H, Tk}),
                               q_offset, bias_ref);
  std::vector<float> bias(static_cast<size_t>(B * H * Tq * Tk), NAN);
  check_status(what, ke::xl_shift_forward_emulated(g.data(), gv.data(), cu.data(), bias.data(), B,
                                                   H, Tq, Tk, q_offset, nullptr));
  check_bits(what, "bias", bias, bias_ref.to_floats());

  const auto dbias = randoms(bias.size(), 4);
  Tensor dg_ref = Tensor::zeros({B, H, Tq, L}), dgv_ref = Tensor::zeros({H, L}),
         dcu_ref = Tensor::zeros({B, H, Tk});
  rotor::ops::xl_shift_backward(Tensor::from_floats(dbias, {B, H, Tq, Tk}), q_offset, dg_ref,
                                dgv_ref, dcu_ref);
  std::vector<float> dg(g.size(), NAN), dgv(gv.size(), NAN), dcu(cu.size(), NAN);
  check_status(what, ke::xl_shift_backward_emulated(dbias.data(), dg.data(), dgv.data(), dcu.data(),
                                                    B, H, Tq, Tk, q_offset, nullptr));
  check_bits(what, "dg", dg, dg_ref.to_floats());
  check_bits(what, "dgv", dgv, dgv_ref.to_floats());
  check_bits(what, "dcu", dcu, dcu_ref.to_floats());
}

void run() {
  shift_case(2, 3, 5, 5, 0);
  shift_case(1, 2, 3, 7, 0);    // fewer queries than keys
  shift_case(2, 1, 6, 4, 0);    // more queries than keys
  shift_case(1, 2, 1, 9, 8);    // one cached-decoding query at position 8
  shift_case(1, 1, 4, 1, 2);    // one key
  shift_case(2, 2, 37, 41, 3);  // several thread blocks' worth of items
}

const Register reg("xl_shift", run);

}  // namespace
