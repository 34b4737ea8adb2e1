#!/usr/bin/env bash
# The EHR next-visit table of docs/results.md (issue 42): the shipped tiny
# next-visit configs, from scratch and fine-tuned from the shipped tiny masked
# LMs, against the baselines of scripts/eval/ehr_baselines.py, on synthetic
# cohorts from `rotor synth ehr` at three settings and two seeds each:
#
#   shipped  the generator's defaults (34 codes: chronic recurrence,
#            comorbidity chains, age-dependent incidence, uniform noise);
#   chains   20 next-visit chains of strength 0.6 and 200 Zipf(1.1) noise
#            codes, up to 4 a visit (250 codes: the rare-label regime);
#   weak     weaker recurrence (0.5), a sharper age effect (2), 10 chains of
#            strength 0.8, 100 Zipf(1) noise codes, up to 3 a visit;
#   other    not `synth ehr` but scripts/eval/ehr_other_cohort.py, a generator
#            the recipes were not designed on (290 codes, 7.8 labels a
#            patient, up to 20 visits: 43% of histories exceed data.seq_len).
#
#   scripts/ehr_cohorts.sh [ROTOR] [RUNS_DIR] [PYTHON]
#       (defaults: build-cpu/rotor, runs/ehr_cohorts, the checkout's .venv
#       python3 or else python3; it needs numpy)
#   COHORTS="chains_s1 weak_s2" scripts/ehr_cohorts.sh ...   (a subset)
#   MODELS=behrt scripts/ehr_cohorts.sh ...   (BEHRT only; default "behrt corebehrt")
#
# 10000 patients each, prepared with --min-visits 3 (one next-visit example
# per patient), the masked-LM and next-visit directories from the same input
# and seed (same split and vocabulary). Runs with nice, OMP_NUM_THREADS=2 and
# OMP_WAIT_POLICY=passive; a run that has finished (RUN/wall_seconds) is
# not run again. Prints Markdown tables of the test
# sample-averaged AP and macro AUROC, and each run's training wall time.
set -euo pipefail
ROTOR=${1:-build-cpu/rotor}
RUNS=${2:-runs/ehr_cohorts}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=python3
[ -x "$HERE/../.venv/bin/python3" ] && PY=$HERE/../.venv/bin/python3  # scripts/deps.sh --with-python
PY=${3:-$PY}
CONFIGS=$HERE/../configs/ehr
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=passive
declare -A KNOBS=(
  [shipped]=""
  [chains]="--chains 20 --chain-strength 0.6 --noise-codes 200 --noise-zipf 1.1 --noise-per-visit 4"
  [weak]="--recur 0.5 --age-effect 2 --chains 10 --chain-strength 0.8 --noise-codes 100 --noise-zipf 1 --noise-per-visit 3"
)
COHORTS=${COHORTS:-"shipped_s1 shipped_s2 chains_s1 chains_s2 weak_s1 weak_s2 other_s1"}
MODELS=${MODELS:-"behrt corebehrt"}

done_run() { [ -f "$1/wall_seconds" ]; }  # written when a run has finished
train() {  # CONFIG DATA_DIR RUN [--set ...]
  local config=$1 data=$2 run=$3
  shift 3
  done_run "$run" && return 0
  local t0=$SECONDS
  nice "$ROTOR" train "$CONFIGS/$config" --set data.train="$data/train" \
    --set data.valid="$data/valid" --set data.test="$data/test" --set output_dir="$run" \
    --overwrite "$@" > /dev/null
  echo $((SECONDS - t0)) > "$run/wall_seconds"
}

for c in $COHORTS; do
  setting=${c%_s*} seed=${c##*_s} d=$RUNS/$c
  mkdir -p "$d"
  if [ "$setting" = other ]; then
    mkdir -p "$d/synth"
    [ -f "$d/synth/cohort.jsonl" ] ||
      "$PY" "$HERE/eval/ehr_other_cohort.py" "$seed" 10000 "$d/synth/cohort.jsonl"
    input=(--jsonl "$d/synth/cohort.jsonl")
  else
    # shellcheck disable=SC2086  # the knobs are words
    [ -f "$d/synth/patients.csv" ] ||
      "$ROTOR" synth ehr --patients 10000 --seed "$seed" ${KNOBS[$setting]} --output "$d/synth" > /dev/null
    input=(--events "$d/synth/events.csv" --patients "$d/synth/patients.csv")
  fi
  for x in mlm nextvisit; do
    [ -f "$d/$x/ehr.json" ] && continue
    labels=()
    [ "$x" = nextvisit ] && labels=(--labels next_visit)
    "$ROTOR" prepare-ehr "${input[@]}" --output "$d/$x" --min-visits 3 "${labels[@]}" > /dev/null
  done
  [ -f "$d/baselines.json" ] ||
    nice "$PY" "$HERE/eval/ehr_baselines.py" "$d/nextvisit" --json "$d/baselines.json" > /dev/null
  for m in $MODELS; do
    train ${m}_mlm_tiny.yaml "$d/mlm" "$d/${m}_mlm"
    train ${m}_nextvisit_tiny.yaml "$d/nextvisit" "$d/${m}_nv_scratch"
    train ${m}_nextvisit_tiny.yaml "$d/nextvisit" "$d/${m}_nv_pretrained" \
      --set model.init_from="$d/${m}_mlm:best"
  done
done

"$PY" - "$RUNS" $COHORTS <<'PY'
import json, os, sys
runs, cohorts = sys.argv[1], sys.argv[2:]
models = ["behrt_nv_scratch", "behrt_nv_pretrained", "corebehrt_nv_scratch", "corebehrt_nv_pretrained"]
base = ["label frequency", "history rule", "history rule, last visit", "logistic regression"]
def finished(run):
    return os.path.exists(run + "/wall_seconds")
def test_record(run):
    rec = [json.loads(l) for l in open(run + "/metrics.jsonl")]
    return [r for r in rec if r["split"] == "test"][-1]
for metric in ("ap", "auroc_macro"):
    print("\ntest %s\n" % metric)
    print("| cohort | " + " | ".join(base + models) + " |")
    print("|---" * (1 + len(base) + len(models)) + "|")
    for c in cohorts:
        b = json.load(open("%s/%s/baselines.json" % (runs, c)))["results"]
        row = ["%.4f" % b[k][metric] for k in base]
        lr = b["logistic regression"][metric]
        for m in models:
            if not finished("%s/%s/%s" % (runs, c, m)):
                row.append("not run")
                continue
            v = test_record("%s/%s/%s" % (runs, c, m))[metric]
            row.append("%.4f%s" % (v, " (+)" if v >= lr else " (-)") if metric == "ap" else "%.4f" % v)
        print("| %s | %s |" % (c, " | ".join(row)))
print("\n(+): at least the logistic regression's test AP; (-): below it.")
print("\ntraining wall time (s, masked LM + fine-tuning for the pretrained runs)\n")
print("| cohort | " + " | ".join(models) + " |")
print("|---" * (1 + len(models)) + "|")
for c in cohorts:
    w = lambda r: int(open("%s/%s/%s/wall_seconds" % (runs, c, r)).read())
    row = []
    for m in models:
        if not finished("%s/%s/%s" % (runs, c, m)):
            row.append("not run")
            continue
        s = w(m)
        if m.endswith("pretrained"):
            s = "%d + %d" % (w(m.split("_")[0] + "_mlm"), s)
        row.append(str(s))
    print("| %s | %s |" % (c, " | ".join(row)))
PY
