#!/usr/bin/env bash
# The data-parallel path at world size 1, on whatever this machine has (a GPU:
# NCCL, its unique id through rotor's file rendezvous; no GPU: Gloo):
#   1. configs/quickstart/numbers_rope.yaml is trained twice for UPDATES
#      updates, plainly (`rotor train`) and through `rotor launch -n 1`; the
#      training losses logged in metrics.jsonl must agree (relative difference
#      at most TOL; world size 1 sums one rank, so they should be equal);
#   2. `rotor bench train` of the same config, plainly and through the
#      launcher: the wrapper's cost in step time (goal: at most 5 %).
#
#   scripts/gpu/launch_check.sh [--rotor BIN] [--updates N] [--steps N] [--out DIR] [--tol T]
#
# Defaults: ROTOR or build/rotor, 200 updates, 30 timed bench steps, runs/launch_check,
# TOL 1e-5. Prints one summary block; exits 1 when the losses disagree or a run
# fails, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/../.."

rotor=${ROTOR:-build/rotor}
updates=200
steps=30
out=runs/launch_check
tol=1e-5
while (($#)); do
  case $1 in
    --rotor) rotor=$2; shift 2 ;;
    --updates) updates=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --tol) tol=$2; shift 2 ;;
    *) sed -n '2,17p' "$0" >&2; exit 2 ;;
  esac
done
[[ -x $rotor ]] || { echo "launch_check.sh: no rotor binary at $rotor (set ROTOR or --rotor)" >&2; exit 2; }

config=configs/quickstart/numbers_rope.yaml
mkdir -p "$out"
data=$out/data
[[ -f $data/valid.de ]] || "$rotor" synth numbers-en-de --output "$data" --seed 1 >/dev/null
# One tokenizer for every run.
[[ -f $out/spm.model ]] ||
  "$rotor" spm-train --input "$data/train.en" --input "$data/train.de" --model-prefix "$out/spm" \
    --vocab-size 400 >/dev/null 2>&1
common=(--set "data.train=$data/train" --set "data.valid=$data/valid" --set "data.spm_model=$out/spm.model"
  --set "train.max_updates=$updates" --set train.log_interval=10 --set train.valid_interval=0
  --set train.save_interval=0)

run() {  # NAME COMMAND...: runs it with its output in $out/NAME.log, or says why it failed
  local name=$1
  shift
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "launch_check.sh: $name failed; the end of $out/$name.log:" >&2
    tail -n 20 "$out/$name.log" >&2
    exit 1
  fi
}

# Training losses, one per logged update: "STEP LOSS" lines.
losses() { sed -n 's/.*"step":\([0-9]*\),"split":"train","loss":\([-0-9.eE+]*\).*/\1 \2/p' "$1"; }
json_number() { sed -n "s/.*\"$2\": *\\([-0-9.eE+]*\\).*/\\1/p" "$1" | head -n 1; }

rm -rf "$out/plain" "$out/launch"
run train_plain "$rotor" train "$config" --set "output_dir=$out/plain" "${common[@]}"
run train_launch "$rotor" launch -n 1 -- train "$config" --set "output_dir=$out/launch" "${common[@]}"
backend=$(grep -o '[0-9]* rank(s) ([a-z]* backend)' "$out/launch/train.log" | head -n 1 || true)
device=$(grep -o 'rotor [^ ]* on [^:]*' "$out/launch/train.log" | head -n 1 | sed 's/.* on //' || true)
compare=$(join <(losses "$out/plain/metrics.jsonl") <(losses "$out/launch/metrics.jsonl") |
  awk -v tol="$tol" '{ d = $2 - $3; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2);
                      if (r > worst) worst = r; n++ }
                    END { printf "%d %.3g %s", n, worst, (n > 0 && worst <= tol) ? "ok" : "FAIL" }')
read -r n_losses worst verdict <<<"$compare"
# Whether the launched run took the data-parallel path (gradient buckets).
dp_path=yes
grep -q "gradient all-reduce:" "$out/launch/train.log" || dp_path=no

rm -rf "$out/bench_plain" "$out/bench_launch"
bench=(bench train "$config" "${common[@]}" --steps "$steps" --warmup 5)
run bench_plain "$rotor" "${bench[@]}" --set "output_dir=$out/bench_plain" --json "$out/bench_plain.json"
run bench_launch "$rotor" launch -n 1 -- "${bench[@]}" --set "output_dir=$out/bench_launch" \
  --json "$out/bench_launch.json"
plain_ms=$(json_number "$out/bench_plain.json" step_ms | awk '{ printf "%.3f", $1 }')
launch_ms=$(json_number "$out/bench_launch.json" step_ms | awk '{ printf "%.3f", $1 }')
cost=$(awk -v a="$plain_ms" -v b="$launch_ms" 'BEGIN { printf "%+.1f", 100 * (b / a - 1) }')

echo "== rotor launch -n 1 vs the plain run ($device, $backend)"
echo "losses: $n_losses logged updates, max relative difference $worst (tolerance $tol): $verdict"
echo "data-parallel path in the launched run (gradient buckets): $dp_path"
if [[ $dp_path == no ]]; then
  echo "  (the trainer gates buckets and count all-reduces on world size > 1; at world size 1"
  echo "   the launch measures the rendezvous, the communicator and the launcher only)"
fi
echo "bench train step: plain $plain_ms ms, through rotor launch $launch_ms ms ($cost %; goal <= +5 %)"
echo "logs and runs: $out"
[[ $verdict == ok ]]
