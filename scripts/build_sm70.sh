#!/usr/bin/env bash
# Compiles rotor's attention kernels for Volta (sm_70, V100) and checks their
# SASS, on a machine without a GPU and with only CUDA 13 installed (CUDA 13
# dropped Volta). Usage:
#   bash scripts/build_sm70.sh [--out DIR] [--tsan]   (default DIR: build-sm70)
# --tsan: run the CPU emulation (below) under ThreadSanitizer, which reports
# shared-memory accesses of the kernels that no barrier orders (~30 s).
#
# The toolchain comes from PyPI, installed once into .deps/cuda12 (git-ignored):
# CUDA 12.9's ptxas, libdevice and headers (nvidia-cuda-nvcc-cu12,
# nvidia-cuda-runtime-cu12, nvidia-cuda-cccl-cu12). PyPI has no CUDA 12 nvcc
# driver nor cicc (the nvcc wheel carries ptxas and libnvvm only), so the C++
# front end is clang (clang-14, from scripts/deps.sh), which compiles CUDA for
# sm_70 itself and hands its PTX to CUDA 12's ptxas. A V100 build for real use
# takes a full CUDA 12 toolkit: cmake -DCMAKE_CUDA_ARCHITECTURES=70 with
# CMAKE_CUDA_COMPILER=<cuda-12>/bin/nvcc.
#
# Compiled to sm_70 SASS (ptxas -v): kernels/flash_attention_sm70.cu (WMMA)
# and kernels/flash_attention.cu (portable). Checks:
#   - every kernel: 0 bytes spilled;
#   - the WMMA kernels: no stack frame (so no LDL/STL) and HMMA instructions
#     in the forward and backward kernels, and none in the portable ones.
# CUDA 13's cuobjdump/nvdisasm refuse sm_70 and PyPI has no older one, so
# the instructions are counted from the cubin's code sections: Volta encodes
# each instruction in 128 bits with the opcode in bits 0-11 (HMMA 0x236, LDL
# 0x983, STL 0x387, as ptxas 12.9 emits them). Where a disassembler that
# reads sm_70 exists ($NVDISASM, or nvdisasm of CUDA <= 13.0 on PATH), its
# HMMA count must agree.
# Then the WMMA kernels' device code runs on the CPU
# (tests/emulation/flash_sm70_emulate.cpp, built with the host C++ compiler):
# their tiling, masks, dropout draws and synchronization against attention in
# double, the closest check to a V100 run that a machine without one can do.
# Exit 0: all checks passed; 77: skipped (no clang++, or PyPI unreachable and
# the toolchain not installed yet); anything else: a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

out=build-sm70
tsan=0
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --tsan) tsan=1; shift ;;
    -h | --help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "build_sm70: unknown argument $1" >&2; exit 2 ;;
  esac
done

skip() {
  echo "build_sm70: SKIPPED: $*"
  exit 77
}

# ---- the toolchain -------------------------------------------------------------
wheels=(nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79
  nvidia-cuda-cccl-cu12==12.9.27)
deps=.deps/cuda12
site=$deps/site
stamp="${wheels[*]}"

clang=${ROTOR_SM70_CLANG:-}
if [[ -z $clang ]]; then
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null; then clang=$(command -v "$c"); break; fi
  done
fi
[[ -n $clang ]] || skip "no clang++ (scripts/deps.sh installs clang-14)"
python=$(command -v python3 || true)
[[ -n $python ]] || skip "no python3"

if [[ ! -f $site/.installed || $(cat "$site/.installed") != "$stamp" ]]; then
  echo "build_sm70: installing CUDA 12 ptxas and headers from PyPI into $deps (once)"
  mkdir -p "$deps"
  tmp=$(mktemp -d "$deps/.site.XXXXXX")
  if ! PIP_ROOT_USER_ACTION=ignore "$python" -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 \
    --no-deps --only-binary=:all: --target "$tmp" "${wheels[@]}"; then
    rm -rf "$tmp"
    skip "pip could not install ${wheels[*]} (offline?); rerun with network access"
  fi
  echo "$stamp" >"$tmp/.installed"
  rm -rf "$site"
  mv "$tmp" "$site"
fi

# A CUDA installation as clang looks for one: bin/ptxas, nvvm/libdevice,
# include/ (the three wheels' headers side by side), lib64/.
tk=$deps/toolkit
if [[ ! -f $tk/.installed || $(cat "$tk/.installed") != "$stamp" || ! -e $tk/bin/ptxas ]]; then
  tmp=$(mktemp -d "$deps/.toolkit.XXXXXX")
  mkdir -p "$tmp/bin" "$tmp/nvvm" "$tmp/include" "$tmp/lib64"
  ln -s "$root/$site/nvidia/cuda_nvcc/bin/ptxas" "$tmp/bin/ptxas"
  ln -s "$root/$site/nvidia/cuda_nvcc/nvvm/libdevice" "$tmp/nvvm/libdevice"
  for dir in "$site/nvidia/cuda_runtime/include" "$site/nvidia/cuda_cccl/include" \
    "$site/nvidia/cuda_nvcc/include"; do
    for f in "$dir"/*; do
      case ${f##*/} in __init__.py | __pycache__) continue ;; esac
      ln -sfn "$root/$f" "$tmp/include/${f##*/}"
    done
  done
  echo "$stamp" >"$tmp/.installed"
  rm -rf "$tk"
  mv "$tmp" "$tk"
fi

# ---- compile -------------------------------------------------------------------
# Clang 14's CUDA wrapper still declares texture-reference helpers that CUDA 12
# removed: its texture header is skipped (rotor uses no textures), and the
# CUDA version it does not know yet is accepted.
mkdir -p "$out"
out=$(cd "$out" && pwd)
cxxflags=(-x cuda --cuda-path="$root/$tk" --cuda-gpu-arch=sm_70 --cuda-device-only -O3 -std=c++17
  -Wno-unknown-cuda-version -D__CLANG_CUDA_TEXTURE_INTRINSICS_H__ -Isrc -I.
  -Xcuda-ptxas -v)
for tu in flash_attention_sm70 flash_attention; do
  if ! "$clang" "${cxxflags[@]}" -c "kernels/$tu.cu" -o "$out/$tu.sm_70.cubin" \
    >"$out/$tu.ptxas.log" 2>&1; then
    cat "$out/$tu.ptxas.log" >&2
    echo "build_sm70: FAILED: kernels/$tu.cu does not compile for sm_70" >&2
    exit 1
  fi
done

# ---- check -----------------------------------------------------------------------
nvdisasm=${NVDISASM:-$(command -v nvdisasm || true)}
"$python" - "$out" "$nvdisasm" <<'PY'
import re, struct, subprocess, sys

out, nvdisasm = sys.argv[1], sys.argv[2]
HMMA, LDL, STL = 0x236, 0x983, 0x387  # Volta opcodes (bits 0-11)


def ptxas_stats(log):
    """kernel -> (stack bytes, spill stores + loads, registers) from ptxas -v."""
    stats, name = {}, None
    for line in open(log):
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            stats[name] = [int(m.group(1)), int(m.group(2)) + int(m.group(3)), 0]
        m = re.search(r"Used (\d+) registers", line)
        if m and name in stats:
            stats[name][2] = int(m.group(1))
    return stats


def opcode_counts(cubin):
    """kernel -> {HMMA, LDL, STL} counted in its .text section."""
    d = open(cubin, "rb").read()
    shoff = struct.unpack_from("<Q", d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    strtab = secs[shstrndx][4]
    counts = {}
    for s in secs:
        name = d[strtab + s[0]:d.index(b"\0", strtab + s[0])].decode()
        if not name.startswith(".text."):
            continue
        ops = [struct.unpack_from("<Q", d, s[4] + i)[0] & 0xFFF for i in range(0, s[5], 16)]
        counts[name[len(".text."):]] = {k: ops.count(v) for k, v in
                                       (("HMMA", HMMA), ("LDL", LDL), ("STL", STL))}
    return counts


def short(mangled):
    try:
        n = subprocess.run(["c++filt", mangled], capture_output=True, text=True).stdout.strip()
    except OSError:
        return mangled
    n = re.sub(r"rotor::kernels::\(anonymous namespace\)::", "", n)
    return re.sub(r"\(.*\)$", "", n).replace("__nv_bfloat16", "bf16").replace("__half", "half")


def disasm_hmma(cubin):
    """HMMA count by a disassembler that reads sm_70, or None."""
    if not nvdisasm:
        return None
    r = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return sum(1 for line in r.stdout.splitlines() if re.search(r"\bHMMA\b", line))


failures, summary = [], []
for tu, tensor_cores in (("flash_attention_sm70", True), ("flash_attention", False)):
    cubin = f"{out}/{tu}.sm_70.cubin"
    stats, ops = ptxas_stats(f"{out}/{tu}.ptxas.log"), opcode_counts(cubin)
    print(f"kernels/{tu}.cu (sm_70):")
    print(f"  {'kernel':58} {'regs':>4} {'stack':>5} {'spill':>5} {'HMMA':>5} {'LDL':>4} {'STL':>4}")
    for k in sorted(stats):
        stack, spill, regs = stats[k]
        o = ops.get(k, {"HMMA": 0, "LDL": 0, "STL": 0})
        print(f"  {short(k)[:58]:58} {regs:4} {stack:5} {spill:5} {o['HMMA']:5} {o['LDL']:4} {o['STL']:4}")
        if spill:
            failures.append(f"{short(k)} spills {spill} bytes")
        if tensor_cores and (stack or o["LDL"] or o["STL"]):
            failures.append(f"{short(k)} uses local memory (stack {stack} B)")
        is_attention = re.search(r"_(fwd|bwd)_kernel", k)
        if tensor_cores and is_attention and o["HMMA"] == 0:
            failures.append(f"{short(k)} has no HMMA")
        if not tensor_cores and o["HMMA"]:
            failures.append(f"{short(k)}: HMMA in a portable kernel (opcode table wrong?)")
    if not stats:
        failures.append(f"kernels/{tu}.cu: no kernels in the ptxas log")
    total = sum(o["HMMA"] for o in ops.values())
    check = disasm_hmma(cubin)
    if check is not None and check != total:
        failures.append(f"kernels/{tu}.cu: {check} HMMA by nvdisasm, {total} by the opcode scan")
    hmma = ", ".join(re.sub(r"^void |flash_sm70_|_kernel", "", short(k)) + f" {ops[k]['HMMA']}"
                     for k in sorted(ops) if ops[k]["HMMA"])
    summary.append(f"{tu}.cu {len(stats)} kernels, max spill {max((s[1] for s in stats.values()), default=0)} B"
                   + (f", HMMA: {hmma}" if tensor_cores else ""))

if failures:
    for f in failures:
        print(f"build_sm70: FAILED: {f}", file=sys.stderr)
    sys.exit(1)
with open(f"{out}/sass_summary.txt", "w") as f:
    f.write("sm_70 SASS (CUDA 12.9 ptxas): " + "; ".join(summary) + "\n")
PY

# ---- the WMMA kernels' device code run on the CPU ----------------------------------
# tests/emulation/flash_sm70_emulate.cpp runs the kernels' device section with
# one fiber per CUDA thread and a WMMA stand-in, against attention in
# double: the tiling, indexing, masks, dropout draws and synchronization.
cxx=${CXX:-c++}
emulation="CPU emulation skipped (no C++20 compiler)"
if command -v "$cxx" >/dev/null; then
  "$python" - kernels/flash_attention_sm70.cu "$out/flash_attention_sm70.device.inc" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
begin = re.search(r"^namespace \{$", src, re.M).start()
end = re.search(r"^#endif  // ROTOR_FLASH_SM70_DEVICE$", src, re.M).start()
section = src[begin:end]
section = section.replace("#if ROTOR_FLASH_SM70_DEVICE\n", "")
shared = "extern __shared__ __align__(128) unsigned char smem_raw[];"
assert shared in section, "the kernels' shared-memory declaration changed"
section = section.replace(shared, "unsigned char* smem_raw = emu::shared_memory();")
open(sys.argv[2], "w").write(section + "}  // namespace\n")
PY
  emuflags=(-O2)
  ((tsan)) && emuflags=(-O1 -g -fsanitize=thread)
  if ! "$cxx" -std=c++20 "${emuflags[@]}" -pthread -Wno-unknown-pragmas -I. -Isrc -I"$tk/include" \
    -DROTOR_SM70_SECTION="\"$out/flash_attention_sm70.device.inc\"" \
    tests/emulation/flash_sm70_emulate.cpp -o "$out/flash_sm70_emulate" 2>"$out/emulate.log"; then
    cat "$out/emulate.log" >&2
    echo "build_sm70: FAILED: the CPU emulation of the WMMA kernels does not compile" >&2
    exit 1
  fi
  if ! TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$out/flash_sm70_emulate" | tee "$out/emulate.txt"; then
    echo "build_sm70: FAILED: the CPU emulation of the WMMA kernels disagrees with attention in double" >&2
    exit 1
  fi
  emulation="CPU emulation of the WMMA kernels$( ((tsan)) && echo ' under ThreadSanitizer'): $(tail -1 "$out/emulate.txt" | sed 's/^emulation: //')"
fi
echo "build_sm70: OK: $(cat "$out/sass_summary.txt"); $emulation"
