#!/usr/bin/env bash
# Runs the device code of the sm_80+ tensor-core flash attention
# (kernels/flash_attention_tc.cu) on the CPU, for machines without such a GPU:
# tests/emulation/flash_tc_emulate.cpp emulates its PTX (ldmatrix, mma.sync
# m16n8k16, cp.async) lane by lane, runs every CUDA thread as a std::thread
# and compares out, lse, dq, dk, dv with attention in double (head dims 32,
# 64, 128; f16, bf16; causal, key lengths, dropout, RoPE, ALiBi). Usage:
#   bash tests/emulation/check_flash_tc.sh [--out DIR] [--asan]   (default DIR: build-flash-tc)
# --asan: built with AddressSanitizer (out-of-bounds global or shared memory;
# ~20 s). A missing barrier shows as NaNs: shared memory starts as NaNs and a
# cp.async destination turns NaN when the copy is issued.
# Exit 0: all cases within tolerance; 1: a failure; 77: skipped (no C++20
# compiler, python3 or CUDA headers).
set -euo pipefail
cd "$(dirname "$0")/../.."

out=build-flash-tc
sanitize=()
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --asan) sanitize=(-O1 -g -fsanitize=address); shift ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "check_flash_tc: unknown argument $1" >&2; exit 2 ;;
  esac
done

skip() {
  echo "check_flash_tc: SKIPPED: $*"
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
# the PTX wrappers (`// ---- PTX wrappers` to the next `// ---- ` line) left
# to the emulator, the dynamic shared memory the block's emulated one.
"$python" - kernels/flash_attention_tc.cu "$out/flash_attention_tc.device.inc" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
begin = re.search(r"^namespace \{$", src, re.M)
end = re.search(r"^// ---- launchers", src, re.M)
assert begin and end, "the markers `namespace {` / `// ---- launchers` changed"
section = src[begin.start():end.start()]
ptx = re.search(r"^// ---- PTX wrappers.*?(?=^// ---- )", section, re.M | re.S)
assert ptx, "the marker `// ---- PTX wrappers` changed"
section = (section[:ptx.start()] + "// (the PTX wrappers: emulated)\n" + section[ptx.end():])
shared = "extern __shared__ __align__(16) unsigned char smem_raw[];"
assert section.count(shared) == 2, "the kernels' shared-memory declarations changed"
section = section.replace(shared, "unsigned char* smem_raw = emu::shared_memory();")
open(sys.argv[2], "w").write(section + "}  // namespace\n")
PY

if ! "$cxx" -std=c++20 -O2 ${sanitize[@]+"${sanitize[@]}"} -pthread -Wno-unknown-pragmas -I. -Isrc \
  -I"$cuda_inc" -DROTOR_TC_SECTION="\"$out/flash_attention_tc.device.inc\"" \
  tests/emulation/flash_tc_emulate.cpp -o "$out/flash_tc_emulate" 2>"$out/emulate.log"; then
  cat "$out/emulate.log" >&2
  echo "check_flash_tc: FAILED: the CPU emulation does not compile" >&2
  exit 1
fi
# A warp whose lanes disagree on barriers would hang: the timeout turns that
# into a failure.
if ! timeout 900 "$out/flash_tc_emulate" |
  tee "$out/emulate.txt"; then
  echo "check_flash_tc: FAILED: the emulated kernels disagree with attention in double" >&2
  exit 1
fi
echo "check_flash_tc: OK: $(tail -1 "$out/emulate.txt" | sed 's/^emulation: //')"
