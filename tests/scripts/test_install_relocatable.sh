#!/usr/bin/env bash
# The relocatable install (CMakeLists.txt, "install"): `cmake --install` of the
# build tree BUILD, the tree moved elsewhere, then with LD_LIBRARY_PATH empty:
# `rotor info` and a tiny training on the CPU run from the moved tree, `ldd`
# resolves every library either into the tree's lib/ or to what the target
# machine provides (glibc, CUDA, cuDNN, NCCL), never into the build or source
# tree, and `readelf` shows RUNPATH $ORIGIN/../lib on bin/rotor and $ORIGIN on
# the bundled libraries. Exits 77 (skip) without patchelf.
#   tests/scripts/test_install_relocatable.sh BUILD
set -euo pipefail
build=$(cd "${1:?usage: test_install_relocatable.sh BUILD}" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
command -v patchelf >/dev/null || { echo "SKIPPED: patchelf not found (scripts/deps.sh)"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install_relocatable: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/stage" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
mkdir -p "$tmp/elsewhere"
mv "$tmp/stage" "$tmp/elsewhere/rotor"
tree=$tmp/elsewhere/rotor
for d in bin/rotor share/rotor/configs/quickstart/numbers_rope.yaml share/rotor/scripts/gpu/measure.sh lib; do
  [[ -e $tree/$d ]] || fail "the installed tree lacks $d"
done
export LD_LIBRARY_PATH=

# RUNPATHs.
runpath() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p'; }
# shellcheck disable=SC2016  # literal $ORIGIN
[[ $(runpath "$tree/bin/rotor") == '$ORIGIN/../lib' ]] ||
  fail "bin/rotor RUNPATH is '$(runpath "$tree/bin/rotor")', expected \$ORIGIN/../lib"
nlibs=0
for lib in "$tree"/lib/*.so*; do
  nlibs=$((nlibs + 1))
  # shellcheck disable=SC2016
  [[ $(runpath "$lib") == '$ORIGIN' ]] || fail "$(basename "$lib") RUNPATH is '$(runpath "$lib")'"
done
((nlibs > 5)) || fail "only $nlibs libraries bundled in lib/"

# Every library of every program: in the tree, or provided by the machine.
provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libutil\.so|libresolv\.so|libmvec\.so|libcuda\.so|libnvidia-|libcudart\.so|libcublas|libnvrtc|libnvJitLink|libcudnn|libnccl)'
while IFS= read -r -d '' program; do
  head -c 4 "$program" | grep -q ELF || continue
  while read -r line; do
    name=$(basename "$(awk '{print $1}' <<<"$line")")
    [[ $line == *"not found"* ]] && fail "$program: $line"
    [[ $line == *"$build"* || $line == *"$source_dir"* ]] && fail "$program resolves into the build: $line"
    [[ $name =~ $provided ]] && continue
    [[ $line == *"=> $tree/"* ]] || fail "$program: $name is not bundled: $line"
  done < <(ldd "$program" | sed 's/^[[:space:]]*//')
done < <(find "$tree/bin" "$tree/libexec" "$tree/lib" -type f -print0 2>/dev/null)

# The moved tree runs.
(cd "$tmp" && "$tree/bin/rotor" info >"$tmp/info.txt" 2>&1) ||
  { cat "$tmp/info.txt" >&2; fail "rotor info failed from the moved tree"; }
grep -q "^rotor " "$tmp/info.txt" || fail "rotor info printed no version"
"$tree/bin/rotor" synth numbers-en-de --output "$tmp/data" --seed 1 >/dev/null
(cd "$tmp" && "$tree/bin/rotor" train "$tree/share/rotor/configs/quickstart/numbers_rope.yaml" \
  --set device=cpu --set "output_dir=$tmp/run" --set "data.train=$tmp/data/train" \
  --set "data.valid=$tmp/data/valid" --set train.max_updates=3 --set train.log_interval=1 \
  --set train.valid_interval=3 --set train.save_interval=3 >"$tmp/train.log" 2>&1) ||
  { tail -n 20 "$tmp/train.log" >&2; fail "a tiny training failed from the moved tree"; }
grep -q '"step":3' "$tmp/run/metrics.jsonl" || fail "the tiny training logged no update 3"
echo "test_install_relocatable: $nlibs bundled libraries; rotor info and a 3-update training ran from $tree"
