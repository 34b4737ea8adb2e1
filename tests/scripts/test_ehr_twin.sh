#!/usr/bin/env bash
# rotor's EHR next-visit training against its PyTorch twin on the same batches
# (tests/reference/ehr_twin.py replay; issue 42): a small synthetic cohort,
# each shipped tiny next-visit config (BEHRT: learned visit positions;
# CORE-BEHRT: RoPE; both with label attention) and BEHRT with the [CLS] head
# (model.classifier_head cls) trained for a few dozen updates without dropout
# from the same initial weights by rotor and by the twin, which replays
# rotor's Philox shuffle and schedule. Weights and test
# probabilities must agree (ehr_twin.py's tolerance). A wrong gradient, label
# alignment or optimizer step in either makes them part.
# Usage: test_ehr_twin.sh ROTOR_BINARY. Exit 77 (skipped) without a python3
# that has torch, numpy and yaml (scripts/deps.sh --with-python).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rotor=${1:?usage: test_ehr_twin.sh ROTOR_BINARY}
py=""
for cand in "${ROTOR_TWIN_PYTHON:-}" "$root/.venv/bin/python3" python3 /usr/bin/python3; do
  [[ -n $cand ]] || continue
  if command -v "$cand" >/dev/null && "$cand" -c "import numpy, torch, yaml" 2>/dev/null; then
    py=$cand
    break
  fi
done
if [[ -z $py ]]; then
  echo "SKIPPED: no python3 with torch, numpy and yaml"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
quiet() {  # runs rotor with its log kept aside, shown when it fails
  "$rotor" "$@" >"$work/log" 2>&1 || { cat "$work/log"; return 1; }
}
quiet synth ehr --patients 600 --seed 3 --output "$work/synth"
quiet prepare-ehr --events "$work/synth/events.csv" --patients "$work/synth/patients.csv" \
  --output "$work/nv" --min-visits 3 --labels next_visit
updates=40
for model in behrt corebehrt behrt_cls; do
  config=$root/configs/ehr/${model%_cls}_nextvisit_tiny.yaml
  common=(--set data.train="$work/nv/train" --set data.valid="$work/nv/valid"
    --set data.test="$work/nv/test" --set train.log_interval=10 --set train.keep_last=1)
  [[ $model == *_cls ]] && common+=(--set model.classifier_head=cls)
  # The initial weights: one update at a learning rate of nothing.
  quiet train "$config" "${common[@]}" --set output_dir="$work/${model}_init" \
    --set train.max_updates=1 --set optim.warmup_updates=0 --set optim.lr=1e-12 \
    --set train.valid_interval=1 --set train.save_interval=1
  quiet train "$config" "${common[@]}" --set output_dir="$work/${model}_run" \
    --set model.init_from="$work/${model}_init:best" --set model.dropout=0 \
    --set model.attention_dropout=0 --set train.max_updates=$updates \
    --set optim.warmup_updates=4 --set train.valid_interval=$updates \
    --set train.save_interval=$updates
  echo "$model:"
  "$py" "$root/tests/reference/ehr_twin.py" replay --init "$work/${model}_init" \
    --run "$work/${model}_run" --dir "$work/nv" --tolerance 1e-5
done
