#!/usr/bin/env bash
# Runs the device code of a CUDA flash attention kernel on the CPU, for
# machines without its GPU, and compares out, lse, dq, dk, dv (and T5's table
# gradient) with attention in double (tests/emulation/attention_reference.h):
#   --kernel tc (default): the sm_80+ tensor-core kernels
#     (kernels/flash_attention_tc.cu) through flash_tc_emulate.cpp, which
#     emulates their PTX (ldmatrix, mma.sync m16n8k16, cp.async) lane by
#     lane: head dims 32, 64, 128; f16, bf16; causal, key lengths, dropout,
#     RoPE, ALiBi, T5; documents end to end (cu_seqlens) against the same
#     documents regrouped, bit for bit;
#   --kernel portable: the portable fp32-tile kernels
#     (kernels/flash_attention.cu) through flash_portable_emulate.cpp: f32,
#     f16, bf16 storage; the same masks and biases and cu_seqlens cases.
# Every CUDA thread runs as a fiber (cuda_emulation.h; a std::thread with --asan / --tsan). Usage:
#   bash tests/emulation/check_flash.sh [--kernel tc|portable] [--out DIR] [--asan|--tsan]
#   (default DIR: build-flash-KERNEL)
# --asan: built with AddressSanitizer (out-of-bounds global or shared memory;
# ~20 s). A missing barrier often shows as NaNs: shared memory starts as NaNs
# and a cp.async destination turns NaN when the copy is issued. --tsan: built
# with ThreadSanitizer, which reports a shared-memory access that no barrier
# orders (a shuffle counts as a warp barrier here).
# Exit 0: all cases within tolerance; 1: a failure; 77: skipped (no C++20
# compiler, python3 or CUDA headers).
set -euo pipefail
cd "$(dirname "$0")/../.."

kernel=tc
out=
sanitize=()
while (($#)); do
  case $1 in
    --kernel) kernel=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --asan) sanitize=(-O1 -g -fsanitize=address); shift ;;
    --tsan) sanitize=(-O1 -g -fsanitize=thread); shift ;;
    -h | --help) sed -n "2,23p" "$0"; exit 0 ;;
    *) echo "check_flash: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $kernel in
  tc) source=kernels/flash_attention_tc.cu ;;
  portable) source=kernels/flash_attention.cu ;;
  *) echo "check_flash: --kernel takes tc or portable, not $kernel" >&2; exit 2 ;;
esac
out=${out:-build-flash-$kernel}
me="check_flash ($kernel)"

skip() {
  echo "$me: SKIPPED: $*"
  exit 77
}

cxx=${CXX:-c++}
command -v "$cxx" >/dev/null || skip "no C++ compiler ($cxx)"
python=$(command -v python3 || true)
[[ -n $python ]] || skip "no python3"
cuda_inc=
for dir in ${CUDA_HOME:+"$CUDA_HOME/include"} /usr/local/cuda/include; do
  if [[ -f $dir/cuda_fp16.h && -f $dir/cuda_bf16.h ]]; then cuda_inc=$dir; break; fi
done
[[ -n $cuda_inc ]] || skip "no CUDA headers (\$CUDA_HOME/include or /usr/local/cuda/include)"
mkdir -p "$out"
out=$(cd "$out" && pwd)
if ! echo 'int main() { std::barrier<> b(1); }' |
  "$cxx" -std=c++20 -pthread -include barrier -x c++ - -o "$out/cxx20-probe" 2>/dev/null; then
  skip "$cxx does not compile C++20 (std::barrier)"
fi

# The device section: from the first `namespace {` to `// ---- launchers`,
# the PTX wrappers of the tc file (`// ---- PTX wrappers` to the next `// ---- `
# line) left to the emulator, the dynamic shared memory the block's emulated
# one.
"$python" - "$kernel" "$source" "$out/device.inc" <<'PY'
import re, sys
kernel, source, dest = sys.argv[1:]
src = open(source).read()
begin = re.search(r"^namespace \{$", src, re.M)
end = re.search(r"^// ---- launchers", src, re.M)
assert begin and end, "the markers `namespace {` / `// ---- launchers` changed"
section = src[begin.start():end.start()]
if kernel == "tc":
    ptx = re.search(r"^// ---- PTX wrappers.*?(?=^// ---- )", section, re.M | re.S)
    assert ptx, "the marker `// ---- PTX wrappers` changed"
    section = (section[:ptx.start()] + "// (the PTX wrappers: emulated)\n" + section[ptx.end():])
    shared = "extern __shared__ __align__(16) unsigned char smem_raw[];"
    emulated = "unsigned char* smem_raw = emu::shared_memory();"
else:
    shared = "extern __shared__ float smem[];"
    emulated = "float* smem = reinterpret_cast<float*>(emu::shared_memory());"
assert section.count(shared) == 2, "the kernels' shared-memory declarations changed"
section = section.replace(shared, emulated)
open(dest, "w").write(section + "}  // namespace\n")
PY

if ! "$cxx" -std=c++20 -O2 ${sanitize[@]+"${sanitize[@]}"} -pthread -Wno-unknown-pragmas -I. -Isrc \
  -I"$cuda_inc" -DROTOR_FLASH_SECTION="\"$out/device.inc\"" \
  "tests/emulation/flash_${kernel}_emulate.cpp" -o "$out/flash_${kernel}_emulate" \
  2>"$out/emulate.log"; then
  cat "$out/emulate.log" >&2
  echo "$me: FAILED: the CPU emulation does not compile" >&2
  exit 1
fi
# A warp whose lanes disagree on barriers would hang: the timeout turns that
# into a failure.
if ! TSAN_OPTIONS="halt_on_error=1 exitcode=66" timeout 900 "$out/flash_${kernel}_emulate" |
  tee "$out/emulate.txt"; then
  echo "$me: FAILED: the emulated kernels disagree with attention in double" >&2
  exit 1
fi
echo "$me: OK: $(tail -1 "$out/emulate.txt" | sed 's/^emulation: //')"
