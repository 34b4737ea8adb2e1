#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file differs from what .clang-format makes of
# it, naming the files and the command that fixes them. scripts/test.sh runs
# it first. clang-format 14 (Debian's clang-format-14) is the reference: other
# versions may break lines differently, so without it the check is skipped
# with a note rather than failed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check_format: not a git checkout; skipped" >&2
  exit 0
fi
fmt=""
for c in clang-format-14 clang-format; do
  if command -v "$c" >/dev/null && "$c" --version | grep -q 'version 14\.'; then
    fmt=$c
    break
  fi
done
if [[ -z "$fmt" ]]; then
  echo "check_format: clang-format 14 not found; skipped" >&2
  exit 0
fi
bad=()
while IFS= read -r -d '' f; do
  if ! "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done < <(git ls-files -z -- '*.cpp' '*.h' '*.cu' '*.cuh')
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} file(s) not formatted by .clang-format:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: $fmt -i ${bad[*]}" >&2
  exit 1
fi
echo "check_format: $(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh' | wc -l) files formatted"
