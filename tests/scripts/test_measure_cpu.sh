#!/usr/bin/env bash
# scripts/gpu/measure.sh and scripts/gpu/window.sh on a machine without a GPU:
# their argument checks; the steps of a GPU run (--dry-run: in order of value,
# each with its limit and the running sum, a default budget that leaves a
# minute of a 10-minute call); the CPU fallback (--cpu: rotor bench train of
# three tiny configs, the Hugging Face peers on PyTorch's CPU where torch and
# transformers import, else marked absent, the attention peer at tiny shapes,
# linear attention), whose table must have its header and one row per config
# with rotor's time in it; that a row is in table.md as soon as its step ends
# (while the next step still runs) and that a step cut at its limit is a row
# that says so; window.sh --dry-run; and scripts/bench/perf_table.py on
# missing and absent peers.
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

# A GPU run, dry: every step, in order of value, with its limit and the sum.
bash scripts/gpu/measure.sh --dry-run --build "$build" --out "$tmp/dry" >"$tmp/dry.txt" 2>&1 ||
  { cat "$tmp/dry.txt" >&2; fail "--dry-run failed"; }
grep -q '^measure.sh --dry-run: budget 540 s' "$tmp/dry.txt" || fail "--dry-run: the default budget is not 540 s"
grep -qE '^ +1  gpu_tests +limit +[0-9]+ s  sum +[0-9]+ s' "$tmp/dry.txt" ||
  { cat "$tmp/dry.txt" >&2; fail "--dry-run: the gpu tests are not step 1 with a limit and a sum"; }
last=0
for want in "ctest --test-dir $build -L gpu" "configs/mlm/roformer_base.yaml" \
  "train_peer.py --bench $tmp/dry/train1.rotor.json --mode eager" "configs/mlm/bert_base.yaml" \
  "configs/wmt14_en_de/transformer_base.yaml" "precision=fp32" "attention_peer.py --dtype bf16" \
  "bench_attention --dtype bf16 --impl auto" "configs/lm/enwik8_paper.yaml" "bench_linear_attention --device cuda" \
  "launch_check.sh" "attention.rope_in_kernel=true" "--mode compile"; do
  line=$(grep -nF -- "$want" "$tmp/dry.txt" | head -n 1 | cut -d: -f1)
  [[ -n $line ]] || fail "--dry-run does not run '$want'"
  ((line > last)) || { cat "$tmp/dry.txt" >&2; fail "--dry-run runs '$want' out of order (line $line, before $last)"; }
  last=$line
done
# The running sum is the sum of the limits.
awk '/^ +[0-9]+  / { s += $4; if ($7 != s) { print "sum " $7 " after " s; bad = 1 } } END { exit bad }' \
  "$tmp/dry.txt" || fail "--dry-run: the running sum is not the sum of the limits"
# An installed tree without its tests yet: the programs the install would hold.
bash scripts/gpu/measure.sh --dry-run --prefix "$tmp/none" --budget 300 >"$tmp/dry2.txt" 2>&1
grep -qF "$tmp/none/libexec/rotor/tests/gpu_test_" "$tmp/dry2.txt" || fail "--dry-run --prefix lists no gpu test program"
grep -q '^measure.sh --dry-run: budget 300 s' "$tmp/dry2.txt" || fail "--budget 300 not taken"

# window.sh --dry-run: safe here, writes nothing, shows measure.sh's steps.
OUT="$tmp/window_out" bash scripts/gpu/window.sh --dry-run --archive "$tmp/none.tar.xz" >"$tmp/window.txt" 2>&1 ||
  { cat "$tmp/window.txt" >&2; fail "window.sh --dry-run failed"; }
[[ ! -e $tmp/window_out ]] || fail "window.sh --dry-run wrote $tmp/window_out"
grep -q 'gpu_test_.*limit' "$tmp/window.txt" || { cat "$tmp/window.txt" >&2; fail "window.sh --dry-run shows no steps"; }
rc=0
bash scripts/gpu/window.sh --frobnicate >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "window.sh --frobnicate: exit $rc, expected 2"

# The CPU fallback.
bash scripts/gpu/measure.sh --cpu --build "$build" --out "$tmp/cpu" >"$tmp/cpu.txt" 2>&1 ||
  { cat "$tmp/cpu.txt" >&2; fail "measure.sh --cpu failed"; }
grep -q '^| model, precision | rotor ms | peer | peer ms | peer/rotor |' "$tmp/cpu.txt" ||
  { cat "$tmp/cpu.txt" >&2; fail "no table header"; }
rows=$(grep -cE '^\| [^|]*CPU fp32 \| [0-9]+\.[0-9] \| ' "$tmp/cpu.txt" || true)
((rows == 3)) || { cat "$tmp/cpu.txt" >&2; fail "expected 3 rows with rotor's time, got $rows"; }
grep -q 'gpu tests: not run' "$tmp/cpu.txt" || fail "the CPU fallback should not run the gpu tests"
grep -q '^# attention_peer.py --device cpu --tiny' "$tmp/cpu.txt" || fail "no attention peer block"
grep -q '^# bench_linear_attention --device cpu' "$tmp/cpu.txt" || fail "no linear attention block"
grep -q '^finished in [0-9]* s' "$tmp/cpu/table.md" || fail "table.md has no closing line"
cmp -s <(sed -n '/^## Measured/,$p' "$tmp/cpu.txt") "$tmp/cpu/table.md" ||
  fail "table.md differs from the printed table"

# Rows as steps end: a peer that hangs (a python3 that sleeps) is cut at the
# budget's end; rotor's row is in table.md while the peer still runs, and the
# peer's row then says it was cut.
cat >"$tmp/slowpy" <<'EOF'
#!/bin/sh
[ "$1" = -c ] && { echo "python 0, torch 0, transformers 0"; exit 0; }
exec sleep 60
EOF
chmod +x "$tmp/slowpy"
PYTHON=$tmp/slowpy bash scripts/gpu/measure.sh --cpu --only mlm --budget 25 --build "$build" --out "$tmp/slow" \
  >"$tmp/slow.txt" 2>&1 &
pid=$!
seen=0
for _ in $(seq 1 200); do
  if grep -qE '^\| RoFormer-tiny MLM, CPU fp32 \| [0-9]+\.[0-9] \| \(no peer\) \|' "$tmp/slow/table.md" 2>/dev/null; then
    kill -0 "$pid" 2>/dev/null && seen=1
    break
  fi
  sleep 0.1
done
wait "$pid" || { cat "$tmp/slow.txt" >&2; fail "measure.sh with a hanging peer failed"; }
((seen)) || { cat "$tmp/slow.txt" >&2; fail "rotor's row was not in table.md while the peer ran"; }
grep -qE '^\| RoFormer-tiny MLM, CPU fp32 \| [0-9]+\.[0-9] \| no train1.eager.json \(timed out at its limit of [0-9]+ s' \
  "$tmp/slow/table.md" || { cat "$tmp/slow/table.md" >&2; fail "the cut peer's row does not say so"; }

# perf_table.py: a failed rotor run, an absent peer, a missing peer file.
printf '{"step_ms": 20.0, "peak_bytes": 2000000000, "losses": [9.1]}' >"$tmp/r.json"
printf '{"peer": "MarianMTModel", "mode": "compile", "absent": "no GPU answers to PyTorch"}' >"$tmp/a.json"
printf '{"peer": "MarianMTModel", "mode": "eager", "step_ms": 50.0, "peak_bytes": 3000000000, "losses": [9.2]}' >"$tmp/p.json"
printf '{"peer": "BertForMaskedLM", "mode": "eager", "attention": "sdpa", "step_ms": 10.0, "losses": [9.2]}' >"$tmp/s.json"
python3 scripts/bench/perf_table.py --row "A=$tmp/r.json:$tmp/p.json,$tmp/a.json,$tmp/missing.json" \
  --row "B=$tmp/none.json:" --row "C=$tmp/r.json:$tmp/s.json" --row "D=$tmp/r.json:" >"$tmp/t.md"
grep -qF '| A | 20.0 | MarianMTModel eager | 50.0 | 2.50 | 2.0 GB / 3.0 GB | 9.100 / 9.200 |' "$tmp/t.md" ||
  { cat "$tmp/t.md" >&2; fail "perf_table: the ratio row"; }
grep -qF '| A | 20.0 | MarianMTModel compile: absent (no GPU answers to PyTorch) |' "$tmp/t.md" ||
  fail "perf_table: the absent peer"
grep -qF '| A | 20.0 | no missing.json (the run failed: see its log) |' "$tmp/t.md" ||
  fail "perf_table: the missing peer file"
grep -qF '| B | no none.json (the run failed: see its log) |' "$tmp/t.md" || fail "perf_table: the failed rotor run"
grep -qF '| C | 20.0 | BertForMaskedLM eager (sdpa attention) | 10.0 | 0.50 |' "$tmp/t.md" ||
  fail "perf_table: the peer's attention"
grep -qF '| D | 20.0 | (no peer) |' "$tmp/t.md" || { cat "$tmp/t.md" >&2; fail "perf_table: rotor alone"; }
python3 scripts/bench/perf_table.py --no-header --why "skipped" --row "E=$tmp/none.json:" >"$tmp/t2.md"
[[ $(cat "$tmp/t2.md") == "| E | no none.json (skipped) | | | | | |" ]] ||
  { cat "$tmp/t2.md" >&2; fail "perf_table: --no-header --why"; }
echo "test_measure_cpu: usage, --dry-run, window.sh --dry-run, --cpu, rows as steps end and perf_table.py as expected"
