// kernels/cudnn_attention_inputs.cu (the small device inputs of a cuDNN
// attention graph) run on the CPU (emulate_cu.py, kernel_emulation.h):
// seq_q[b] = tq for every b (over several blocks and past the launcher's cap
// of 1024 blocks, where the grid-stride loop takes the rest), the dropout
// seed and offset written once, and either output absent. There is no CPU
// twin: the header's contract is the reference.
#include "emulate_common.h"
#include "emulated/cudnn_attention_inputs.inc"

namespace {

using namespace emu_check;
namespace ke = rotor::kernels::emulated;

void inputs_case(int64_t B, bool with_seq, bool with_seed) {
  char what[96];
  std::snprintf(what, sizeof what, "sdpa inputs B%lld%s%s", static_cast<long long>(B),
                with_seq ? " seq_q" : "", with_seed ? " seed" : "");
  std::vector<int32_t> seq(static_cast<size_t>(B) + 1, -7);  // one guard element past B
  int64_t seed_offset[3] = {-1, -1, -1};
  const int before = emu::launches();
  check_status(what, ke::sdpa_write_inputs_emulated(with_seq ? seq.data() : nullptr, B, 77,
                                                    with_seed ? seed_offset : nullptr,
                                                    int64_t(1) << 40, 12345, nullptr));
  bool ok = seq.back() == -7 && seed_offset[2] == -1;
  for (int64_t b = 0; b < B; ++b) ok &= seq[static_cast<size_t>(b)] == (with_seq ? 77 : -7);
  if (with_seed)
    ok &= seed_offset[0] == int64_t(1) << 40 && seed_offset[1] == 12345;
  else
    ok &= seed_offset[0] == -1 && seed_offset[1] == -1;
  // Nothing to write: no launch at all.
  if (!(with_seq && B > 0) && !with_seed) ok &= emu::launches() == before;
  check_true(what, "values", ok);
}

void run() {
  inputs_case(3, true, true);
  inputs_case(600, true, false);
  inputs_case(0, false, true);
  inputs_case(5, false, false);
  inputs_case(1024 * 256 + 300, true, true);  // past 1024 blocks of 256
}

const Register reg("cudnn_attention_inputs", run);

}  // namespace
