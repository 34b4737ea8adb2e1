#!/usr/bin/env bash
# scripts/gpu/measure.sh on a machine without a GPU: its argument checks, the
# commands of a GPU run (--dry-run), and the CPU fallback (--cpu: rotor bench
# train of three tiny configs, the Hugging Face peers on PyTorch's CPU where
# torch and transformers import, else marked absent), whose markdown table
# must have its header and one row per config with rotor's time in it; and
# scripts/bench/perf_table.py on missing and absent peers.
#   tests/scripts/test_measure_cpu.sh BUILD
set -euo pipefail
build=$(cd "${1:?usage: test_measure_cpu.sh BUILD}" && pwd)
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_measure_cpu: $*" >&2; exit 1; }

# Bad usage: exit 2, one message.
for bad in "--budget soon" "--only tests,speed" "--frobnicate"; do
  rc=0
  # shellcheck disable=SC2086  # split the arguments
  bash scripts/gpu/measure.sh $bad >/dev/null 2>"$tmp/err" || rc=$?
  ((rc == 2)) || fail "measure.sh $bad: exit $rc, expected 2"
done

# A GPU run, dry: the gpu tests, both attention cores, rotor and each peer.
bash scripts/gpu/measure.sh --dry-run --build "$build" --out "$tmp/dry" >"$tmp/dry.txt" 2>&1
for want in "ctest --test-dir $build -L gpu" "bench_attention --dtype bf16 --impl rotor" \
  "rotor bench train configs/wmt14_en_de/transformer_base.yaml" "configs/mlm/roformer_base.yaml" \
  "configs/mlm/bert_base.yaml" "configs/lm/enwik8_paper.yaml" "train_peer.py --bench $tmp/dry/train1.rotor.json --mode eager" \
  "--mode compile" "precision=fp32"; do
  grep -qF -- "$want" "$tmp/dry.txt" || fail "--dry-run does not run '$want'"
done

# The CPU fallback.
bash scripts/gpu/measure.sh --cpu --build "$build" --out "$tmp/cpu" >"$tmp/cpu.txt" 2>&1 ||
  { cat "$tmp/cpu.txt" >&2; fail "measure.sh --cpu failed"; }
grep -q '^| model, precision | rotor ms | peer | peer ms | peer/rotor |' "$tmp/cpu.txt" ||
  { cat "$tmp/cpu.txt" >&2; fail "no table header"; }
rows=$(grep -cE '^\| [^|]*CPU fp32 \| [0-9]+\.[0-9] \| ' "$tmp/cpu.txt" || true)
((rows == 3)) || { cat "$tmp/cpu.txt" >&2; fail "expected 3 rows with rotor's time, got $rows"; }
grep -q 'gpu tests: not run' "$tmp/cpu.txt" || fail "the CPU fallback should not run the gpu tests"
cmp -s <(sed -n '/^| model/,$p' "$tmp/cpu.txt") <(sed -n '/^| model/,$p' "$tmp/cpu/table.md") ||
  fail "table.md differs from the printed table"

# perf_table.py: a failed rotor run, an absent peer, a missing peer file.
printf '{"step_ms": 20.0, "peak_bytes": 2000000000, "losses": [9.1]}' >"$tmp/r.json"
printf '{"peer": "MarianMTModel", "mode": "compile", "absent": "no GPU answers to PyTorch"}' >"$tmp/a.json"
printf '{"peer": "MarianMTModel", "mode": "eager", "step_ms": 50.0, "peak_bytes": 3000000000, "losses": [9.2]}' >"$tmp/p.json"
python3 scripts/bench/perf_table.py --row "A=$tmp/r.json:$tmp/p.json,$tmp/a.json,$tmp/missing.json" \
  --row "B=$tmp/none.json:" >"$tmp/t.md"
grep -qF '| A | 20.0 | MarianMTModel eager | 50.0 | 2.50 | 2.0 GB / 3.0 GB | 9.100 / 9.200 |' "$tmp/t.md" ||
  { cat "$tmp/t.md" >&2; fail "perf_table: the ratio row"; }
grep -qF '| A | 20.0 | MarianMTModel compile: absent (no GPU answers to PyTorch) |' "$tmp/t.md" ||
  fail "perf_table: the absent peer"
grep -qF '| A | 20.0 | no missing.json (the run failed: see its log) |' "$tmp/t.md" ||
  fail "perf_table: the missing peer file"
grep -qF '| B | no none.json (the run failed: see its log) |' "$tmp/t.md" || fail "perf_table: the failed rotor run"
echo "test_measure_cpu: usage, --dry-run, --cpu and perf_table.py as expected"
