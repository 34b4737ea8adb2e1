#!/usr/bin/env bash
# Checks an archive made by scripts/gpu/pack.sh the way a GPU machine without
# network or Debian libraries will use it; CI runs it on its CUDA build tree
# (scripts/test.sh). Unpacks ARCHIVE into a temporary directory and checks:
#   - the archive is under 40 MB (40,000,000 bytes);
#   - share/rotor/COMMIT names a commit (and, inside a git checkout, this one);
#   - every program (bin/, libexec/) has RUNPATH $ORIGIN/<its way to lib/>, and
#     every bundled library in lib/ has RUNPATH $ORIGIN;
#   - ldd, without LD_LIBRARY_PATH, resolves every library of every program
#     and bundled library into the tree's lib/, except those the GPU machine
#     provides: glibc and the loader, the NVIDIA driver, CUDA, cuDNN, NCCL
#     (these may resolve anywhere or be missing);
#   - `measure.sh --cpu` runs from the unpacked tree and prints the commit.
#
#   scripts/gpu/check_pack.sh ARCHIVE
set -euo pipefail
archive=${1:?usage: check_pack.sh ARCHIVE}
[[ -f $archive ]] || { echo "check_pack.sh: $archive: not a file" >&2; exit 2; }
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "check_pack.sh: $*" >&2; failures=$((failures + 1)); }

limit=40000000
size=$(stat -c %s "$archive")
((size < limit)) || fail "$archive is $size bytes, over the limit of $limit"

tar xJf "$archive" -C "$tmp"
tree=$tmp/rotor-gpu
[[ -x $tree/bin/rotor ]] || { echo "check_pack.sh: no rotor-gpu/bin/rotor in $archive" >&2; exit 1; }

commit=$(head -n 1 "$tree/share/rotor/COMMIT" 2>/dev/null || true)
[[ -n $commit && $commit != unknown ]] || fail "share/rotor/COMMIT is missing or says '${commit}'"
if here=$(git -C "$src" describe --always --dirty 2>/dev/null); then
  [[ $commit == "$here" ]] || fail "share/rotor/COMMIT says $commit, the checkout is at $here"
fi

# The libraries the GPU machine provides: provided NAME.
# shellcheck source=../install/provided_libs.sh
source "$src/scripts/install/provided_libs.sh"

elves=()
while IFS= read -r -d '' f; do
  head -c 4 "$f" | grep -q ELF && elves+=("$f")
done < <(find "$tree/bin" "$tree/libexec" "$tree/lib" -type f -print0 2>/dev/null)
programs=0
for f in "${elves[@]}"; do
  rel=${f#"$tree"/}
  case $rel in
    lib/*) want='$ORIGIN' ;;
    *)
      want="\$ORIGIN/$(realpath --relative-to="$(dirname "$f")" "$tree/lib")"
      programs=$((programs + 1))
      ;;
  esac
  runpath=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  [[ $runpath == "$want" ]] || fail "$rel: RUNPATH '$runpath', expected '$want'"
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue
    provided "$name" && continue
    if [[ $path == not ]]; then
      fail "$rel: $name not found"
    elif [[ $(realpath "$path") != "$tree"/lib/* ]]; then
      fail "$rel: $name resolves to $path, outside the tree's lib/"
    fi
  done < <(env -u LD_LIBRARY_PATH ldd "$f" 2>/dev/null)
done
((programs >= 1)) || fail "no programs under bin/ and libexec/"

# measure.sh from the unpacked tree: the CPU fallback, with the commit in its report.
if ! (cd / && bash "$tree/share/rotor/scripts/gpu/measure.sh" --cpu --out "$tmp/measure") \
  >"$tmp/measure.txt" 2>&1; then
  cat "$tmp/measure.txt" >&2
  fail "measure.sh --cpu failed from the unpacked tree"
elif ! grep -qF "rotor at $commit;" "$tmp/measure.txt"; then
  cat "$tmp/measure.txt" >&2
  fail "measure.sh --cpu does not print 'rotor at $commit'"
fi

if ((failures)); then
  echo "check_pack.sh: $archive: $failures problem(s)" >&2
  exit 1
fi
echo "check_pack.sh: $archive: $size bytes, commit $commit, ${#elves[@]} ELF files" \
  "($programs programs) with their RUNPATH, ldd resolved in the tree, measure.sh --cpu ran"
