#!/usr/bin/env bash
# Makes an installed rotor tree relocatable (run by `cmake --install`; see
# CMakeLists.txt, "install"): copies into PREFIX/lib every shared library
# that the programs of PREFIX/bin and PREFIX/libexec load, except those the
# target machine provides -- glibc and the loader, the NVIDIA driver, CUDA
# (runtime, cuBLAS, NVRTC), cuDNN and NCCL -- and gives each copy RUNPATH
# $ORIGIN, so that the copies find each other; the programs carry RUNPATH
# $ORIGIN/../lib from the install step. Needs patchelf (scripts/deps.sh).
#
#   scripts/install/bundle.sh [--reference BUILT_PROGRAM] PREFIX
#
# --reference: a program of the build tree (its RUNPATH picks the libraries
# the build linked against, e.g. OpenBLAS's OpenMP build); a library name it
# loads is copied from where it resolves there.
set -euo pipefail

reference=""
while (($#)); do
  case $1 in
    --reference) reference=${2:?}; shift 2 ;;
    -*) echo "bundle.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# == 1)) || { sed -n '2,15p' "$0" >&2; exit 2; }
prefix=$1
[[ -x $prefix/bin/rotor ]] || { echo "bundle.sh: no $prefix/bin/rotor" >&2; exit 2; }
command -v patchelf >/dev/null || {
  echo "bundle.sh: patchelf not found (scripts/deps.sh installs it): $prefix is not relocatable" >&2
  exit 1
}

# Libraries the target machine must provide: provided NAME.
# shellcheck source=provided_libs.sh
source "$(dirname "$0")/provided_libs.sh"

# "name path" lines of the libraries `ldd` resolves for $1.
resolved() { ldd "$1" | sed -n 's/^[[:space:]]*\([^ ]*\) => \(\/[^ ]*\) (0x.*/\1 \2/p'; }

declare -A from_reference=()
if [[ -n $reference ]]; then
  while read -r name path; do from_reference[$name]=$path; done < <(resolved "$reference")
fi

mkdir -p "$prefix/lib"
programs=()
while IFS= read -r -d '' f; do
  head -c 4 "$f" | grep -q ELF && programs+=("$f")
done < <(find "$prefix/bin" "$prefix/libexec" -type f -perm -u+x -print0 2>/dev/null)

copied=0
for program in "${programs[@]}"; do
  if ldd "$program" | grep "not found" >&2; then
    echo "bundle.sh: $program needs libraries not found on this machine (above)" >&2
    exit 1
  fi
  while read -r name path; do
    provided "$name" && continue
    [[ -e $prefix/lib/$name ]] && continue
    src=${from_reference[$name]:-$path}
    cp -L "$src" "$prefix/lib/$name"
    chmod u+w "$prefix/lib/$name"
    # shellcheck disable=SC2016  # a literal $ORIGIN for the loader
    patchelf --set-rpath '$ORIGIN' "$prefix/lib/$name"
    copied=$((copied + 1))
  done < <(resolved "$program")
done
echo "bundle.sh: $copied libraries copied into $prefix/lib (${#programs[@]} programs)"
