#!/usr/bin/env bash
# The one command of a GPU window (issue 37; docs/performance.md, "A GPU
# window"): run at the repository root on the GPU machine, it unpacks the
# archive of scripts/gpu/pack.sh, runs the measure.sh inside it and leaves
# everything in one folder, at most 8 files:
#   table.md       the table for docs/performance.md, one row appended per step
#                  as it ends (a call cut off at its limit still returns it)
#   window.log     this script's and measure.sh's output, as it is written
#   versions.txt   date, nvidia-smi (GPU, driver, CUDA), nvcc, python3's torch
#                  (CUDA, cuDNN), transformers and triton, the archive's commit
#   rotor-info.txt `rotor info` of the unpacked rotor
#   results.json   every JSON that measure.sh wrote (rotor's bench, the peers),
#                  keyed by file name
#   logs.tar.gz    every step's log and JSON (measure.sh's work folder, without
#                  data and models)
#
#   bash scripts/gpu/window.sh [--archive FILE] [--out DIR] [--budget SECONDS]
#                              [--dry-run] [-- MEASURE.SH ARGUMENTS...]
#
#   --archive FILE  default out/rotor-gpu.tar.xz (the device tool's `carry`
#                   brings it: see docs/performance.md)
#   --out DIR       default $OUT when set (the device tool's output folder), else
#                   runs/window
#   --budget S      seconds from this script's start to the end of measure.sh
#                   (default 540: a 10-minute call keeps a minute for packing and
#                   the transfer back); measure.sh gets what is left after the
#                   versions and the unpacking
#   --dry-run       unpack nothing and write nothing: say what would run (the
#                   archive, its commit, the files that would come back) and
#                   print measure.sh --dry-run's steps with their limits
# Exit status: measure.sh's (0 when the table was written), 1 without an
# archive or rotor, 2 on bad usage.
set -uo pipefail
t0=$SECONDS
caller=$(pwd)
cd "$(dirname "$0")/../.."

archive=out/rotor-gpu.tar.xz
out=${OUT:-runs/window}
budget=540
dry=0
out_given=0
measure_args=()
while (($#)); do
  case $1 in
    --archive) archive=${2:?}; shift 2 ;;
    --out) out=${2:?} out_given=1; shift 2 ;;
    --budget) budget=${2:?}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --) shift; measure_args=("$@"); break ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
done
[[ $budget =~ ^[0-9]+$ ]] || { echo "window.sh: --budget takes whole seconds, got $budget" >&2; exit 2; }
# Paths given relative to where the command was started (the repository root
# in a window); the script itself works from the repository root.
[[ $archive == /* || ! -f $caller/$archive ]] || archive=$caller/$archive
[[ $out == /* || $out_given == 0 ]] || out=$caller/$out

work=${TMPDIR:-/tmp}/rotor-window
tree=$work/rotor-gpu
files="table.md window.log versions.txt rotor-info.txt results.json logs.tar.gz"

if ((dry)); then
  echo "window.sh --dry-run: nothing is unpacked or written"
  if [[ -f $archive ]]; then
    size=$(stat -c %s "$archive")
    commit=$(tar xJf "$archive" -O rotor-gpu/share/rotor/COMMIT 2>/dev/null | head -n 1)
    echo "archive: $archive, $size bytes, commit ${commit:-unknown}"
    ((size < 60000000)) || echo "window.sh: warning: $archive is over 60 MB: with the working tree it may pass the device tool's 64 MiB"
  else
    echo "archive: $archive is not there yet (scripts/gpu/pack.sh --output $archive)"
  fi
  echo "would unpack it into $tree, run measure.sh with --budget (${budget} s less the seconds"
  echo "spent before it) and leave in $out: $files"
  echo
  # The measure.sh of this checkout stands in for the unpacked one.
  bash scripts/gpu/measure.sh --dry-run --prefix "$tree" --data "$tree/data" --out "$work/measure" \
    --table "$out/table.md" --info "$out/rotor-info.txt" --budget "$((budget - 10))" "${measure_args[@]}"
  exit $?
fi

mkdir -p "$out"
# More than 8 files in $out would not all come back: start from an empty folder.
for f in "$out"/*; do
  [[ -e $f ]] || continue
  echo "window.sh: $out is not empty ($(ls "$out" | head -n 5 | tr '\n' ' ')...); use an empty --out" >&2
  exit 2
done
out=$(cd "$out" && pwd)
export PYTHONUNBUFFERED=1

window() {
echo "window.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget $budget s, output in $out"

# ---- versions (a minute at most; seconds as a rule) -----------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -srm)"
  echo "archive: $archive ($(stat -c %s "$archive" 2>/dev/null || echo missing) bytes)"
  echo "checkout: $(git describe --always --dirty 2>/dev/null || echo 'no git here')"
  echo
  echo "== nvidia-smi --query-gpu"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,persistence_mode,mig.mode.current --format=csv 2>&1 || echo "(nvidia-smi failed)"
  echo
  echo "== nvidia-smi"
  timeout 20 nvidia-smi 2>&1 || true
  echo
  echo "== nvcc --version"
  timeout 10 nvcc --version 2>&1 || timeout 10 /usr/local/cuda/bin/nvcc --version 2>&1 || echo "(no nvcc)"
  echo
  echo "== python3"
  timeout 60 python3 - <<'PY' 2>&1 || echo "(python3 failed)"
import sys
print("python", sys.version.split()[0], sys.executable)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda,
          "cudnn", torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
          "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None)
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        print("device", p.name, f"sm_{p.major}{p.minor}", p.multi_processor_count, "SMs",
              f"{p.total_memory / 2**30:.1f} GiB")
except Exception as e:
    print("torch:", type(e).__name__, e)
for name in ("transformers", "triton", "numpy"):
    try:
        print(name, __import__(name).__version__)
    except Exception as e:
        print(name + ":", type(e).__name__, e)
PY
} >"$out/versions.txt" 2>&1
sed -n '/== nvidia-smi --query-gpu/,/^$/p;/== python3/,$p' "$out/versions.txt"

# ---- unpack --------------------------------------------------------------------------
if [[ ! -f $archive ]]; then
  echo "window.sh: no archive at $archive: build and pack first (docs/performance.md), then carry it" >&2
  echo "no archive at $archive: nothing measured" >"$out/table.md"
  return 1
fi
rm -rf "$work"
mkdir -p "$work"
if ! tar xJf "$archive" -C "$work"; then
  echo "window.sh: could not unpack $archive" >&2
  echo "could not unpack $archive: nothing measured" >"$out/table.md"
  return 1
fi
echo "window.sh: unpacked $archive (commit $(head -n 1 "$tree/share/rotor/COMMIT" 2>/dev/null)) in $((SECONDS - t0)) s"
echo "commit: $(head -n 1 "$tree/share/rotor/COMMIT" 2>/dev/null)" >>"$out/versions.txt"

# ---- measure ------------------------------------------------------------------------
left=$((budget - (SECONDS - t0)))
echo "window.sh: measure.sh gets $left s"
rc=0
timeout --kill-after=10 "$((left + 20))" bash "$tree/share/rotor/scripts/gpu/measure.sh" \
  --prefix "$tree" --data "$tree/data" --out "$work/measure" --table "$out/table.md" \
  --info "$out/rotor-info.txt" --budget "$left" "${measure_args[@]}" || rc=$?
echo "window.sh: measure.sh exit $rc after $((SECONDS - t0)) s in all"

# ---- pack the logs and results (a few seconds) ------------------------------------------
(
  cd "$work/measure" 2>/dev/null || exit 0
  find . -type f \( -name '*.log' -o -name '*.json' -o -name '*.jsonl' -o -name '*.txt' -o -name '*.md' \) \
    -size -4M -print0 | tar czf "$out/logs.tar.gz" --null -T - 2>/dev/null
) || echo "window.sh: could not pack the logs" >&2
python3 - "$work/measure" "$out/results.json" <<'PY' || echo "window.sh: could not gather the JSON results" >&2
import json, os, sys
root, dest = sys.argv[1], sys.argv[2]
results = {}
for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
    if name.endswith(".json"):
        try:
            with open(os.path.join(root, name)) as f:
                results[name] = json.load(f)
        except (OSError, ValueError) as e:
            results[name] = {"unreadable": str(e)}
with open(dest, "w") as f:
    json.dump(results, f, indent=1)
PY
echo "window.sh: $(ls "$out" | wc -l) files in $out: $(ls "$out" | tr '\n' ' ')"
return "$rc"
}

window 2>&1 | tee -a "$out/window.log"
exit "${PIPESTATUS[0]}"
