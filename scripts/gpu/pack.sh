#!/usr/bin/env bash
# Packs what a GPU machine without network or Debian libraries needs for
# scripts/gpu/measure.sh into one archive: the relocatable install of BUILD
# with bench_attention and the gpu test programs (configured here with
# ROTOR_INSTALL_TESTS=ON; stripped; ~20 MB as tar.xz), the commit it was built
# from (share/rotor/COMMIT, which measure.sh prints) and the raw text of the
# benchmarks (Multi30k, WikiText-2) under data/. scripts/gpu/check_pack.sh
# checks an archive (CI runs it on its CUDA build tree).
#
#   scripts/gpu/pack.sh [--build DIR] [--data DIR | --no-data] [--output FILE]
#
# --no-data packs no benchmark text (measure.sh --cpu needs none; CI uses it
# where ../shared/data is absent).
# Defaults: build, ../shared/data, out/rotor-gpu.tar.xz. In a GPU window the
# device tool carries out/rotor-gpu.tar.xz and `bash scripts/gpu/window.sh`
# unpacks it and runs its measure.sh (docs/performance.md, "A GPU window").
# By hand on the GPU machine:
#   tar xJf rotor-gpu.tar.xz -C /tmp && bash /tmp/rotor-gpu/share/rotor/scripts/gpu/measure.sh
# (measure.sh finds the tree it lies in and the data/ beside it).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build
data=${ROTOR_SHARED_DATA:-../shared/data}
output=out/rotor-gpu.tar.xz
while (($#)); do
  case $1 in
    --build) build=${2:?}; shift 2 ;;
    --data) data=${2:?}; shift 2 ;;
    --no-data) data=""; shift ;;
    --output) output=${2:?}; shift 2 ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
done
[[ -f $build/CMakeCache.txt ]] || { echo "pack.sh: $build is not a build tree" >&2; exit 2; }
for f in multi30k/train.en wikitext-2/test.txt; do
  [[ -z $data || -f $data/$f ]] || { echo "pack.sh: $data/$f not found (--data DIR or --no-data)" >&2; exit 2; }
done
cmake -DROTOR_INSTALL_TESTS=ON "$build" >/dev/null
# rotor_installed depends on every program the install step installs.
cmake --build "$build" -j "$(nproc)" --target rotor_installed >/dev/null
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cmake --install "$build" --prefix "$stage/rotor-gpu" --strip >/dev/null
if [[ -n $data ]]; then
  mkdir -p "$stage/rotor-gpu/data"
  cp -r "$data/multi30k" "$data/wikitext-2" "$stage/rotor-gpu/data/"
fi
mkdir -p "$(dirname "$output")"
# One xz stream with a dictionary larger than the tree (~300 MB from a CI
# build of sm_80 and sm_90): every program links librotor and its kernels,
# and the long dictionary stores their copies once (41.7 MB with xz -6's
# 8 MiB dictionary, 19.6 MB with 256 MiB; ~2.6 GB to compress, 256 MiB to
# unpack).
tar cf - -C "$stage" rotor-gpu | xz -T1 --lzma2=preset=6,dict=256MiB >"$output"
echo "pack.sh: $output ($(du -h "$output" | cut -f1)); on the GPU machine:"
echo "  bash scripts/gpu/window.sh --archive $output   (the device tool's carry: [\"$output\"])"
echo "  or: tar xJf $(basename "$output") -C /tmp && bash /tmp/rotor-gpu/share/rotor/scripts/gpu/measure.sh"
