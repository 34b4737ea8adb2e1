#!/usr/bin/env bash
# The EHR comparison of docs/results.md on a CPU, from the shipped tiny configs
# (configs/ehr/*_tiny.yaml) on a synthetic cohort: masked-LM pretraining
# (learned visit positions, token RoPE), then next-visit fine-tuning from each
# pretrained encoder and from scratch, and sinusoidal token positions and
# learned token positions from scratch, Time2Vec ages instead of the age table
# from scratch; prints a Markdown table of the test
# scores of each run's best checkpoint beside the label-frequency baseline and
# the history rule (P(code next | code in the history), counted on the
# training patients).
#
#   scripts/ehr_results.sh [ROTOR] [RUNS_DIR]     (defaults: build-cpu/rotor, runs/ehr)
#
# Runs with nice, OMP_NUM_THREADS=2 and OMP_WAIT_POLICY=passive, on 10000
# synthetic patients (one example each); two to three minutes per run on two
# shared cores.
set -euo pipefail
ROTOR=${1:-build-cpu/rotor}
RUNS=${2:-runs/ehr}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=passive
train() { nice "$ROTOR" train "$@" --overwrite > /dev/null; }
mkdir -p "$RUNS"
[ -f "$RUNS/synth/events.csv" ] || "$ROTOR" synth ehr --patients 10000 --seed 1 --output "$RUNS/synth"
for d in mlm nextvisit; do
  [ -f "$RUNS/$d/ehr.json" ] && continue
  labels=(); [ "$d" = nextvisit ] && labels=(--labels next_visit)
  "$ROTOR" prepare-ehr --events "$RUNS/synth/events.csv" --patients "$RUNS/synth/patients.csv" \
    --output "$RUNS/$d" --min-visits 3 "${labels[@]}"
done
data() {  # --set overrides for data directory $1 and output directory $2
  echo --set data.train="$RUNS/$1/train" --set data.valid="$RUNS/$1/valid" \
    --set data.test="$RUNS/$1/test" --set output_dir="$RUNS/$2"
}
train configs/ehr/behrt_mlm_tiny.yaml $(data mlm behrt_mlm_tiny)
train configs/ehr/corebehrt_mlm_tiny.yaml $(data mlm corebehrt_mlm_tiny)
train configs/ehr/behrt_nextvisit_tiny.yaml $(data nextvisit behrt_nv_scratch)
train configs/ehr/behrt_nextvisit_tiny.yaml $(data nextvisit behrt_nv_pretrained) \
  --set model.init_from="$RUNS/behrt_mlm_tiny:best"
train configs/ehr/corebehrt_nextvisit_tiny.yaml $(data nextvisit corebehrt_nv_scratch)
train configs/ehr/corebehrt_nextvisit_tiny.yaml $(data nextvisit corebehrt_nv_pretrained) \
  --set model.init_from="$RUNS/corebehrt_mlm_tiny:best"
train configs/ehr/behrt_nextvisit_tiny.yaml $(data nextvisit learned_token_nv_scratch) \
  --set model.position_source=token
train configs/ehr/sinusoidal_nextvisit_tiny.yaml $(data nextvisit sinusoidal_nv_scratch)
train configs/ehr/behrt_nextvisit_tiny_time2vec.yaml $(data nextvisit time2vec_nv_scratch)

python3 - "$RUNS" <<'PY'
import json, struct, sys, array
runs = sys.argv[1]
def load(prefix):
    idx = open(prefix + ".idx", "rb").read()
    n = (len(idx) - 48) // 8
    off = struct.unpack("<%dQ" % n, idx[48:])
    b = array.array("i"); b.frombytes(open(prefix + ".bin", "rb").read())
    return [b[off[i]:off[i + 1]].tolist() for i in range(n - 1)]
def ap(s, t):  # average precision of one example (scikit-learn's, ties by rank)
    if not any(t): return None
    order = sorted(range(len(s)), key=lambda i: -s[i])
    hits = total = 0
    for r, i in enumerate(order, 1):
        if t[i]: hits += 1; total += hits / r
    return total / sum(t)
d = runs + "/nextvisit"
C = sum(1 for _ in open(d + "/vocab.txt")) - 7
train, test = load(d + "/train.labels"), load(d + "/test.labels")
freq = [0.0] * C
for l in train:
    for c in l: freq[c - 7] += 1 / len(train)
def auroc(s, t):  # ROC AUC of one example, ties counted half
    pos = [s[i] for i in range(len(s)) if t[i]]
    neg = [s[i] for i in range(len(s)) if not t[i]]
    if not pos or not neg: return None
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))
truth = [[1 if k + 7 in l else 0 for k in range(C)] for l in test]
def codes(prefix):  # the code ids of each example's history
    return [set(x[0::3]) - {6} for x in load(prefix)]
# The history rule: P(code next | code in the history) and P(code next | not).
hits = [[0, 0] for _ in range(C)]; seen = [[0, 0] for _ in range(C)]
for h, l in zip(codes(d + "/train"), train):
    for k in range(C):
        i = (k + 7) in h; seen[k][i] += 1; hits[k][i] += (k + 7) in l
rule = lambda h: [hits[k][(k + 7) in h] / max(1, seen[k][(k + 7) in h]) for k in range(C)]
def mean(scores):  # sample-averaged ap and auroc of per-example score lists
    aps = [a for a in (ap(s, t) for s, t in zip(scores, truth)) if a is not None]
    aucs = [a for a in (auroc(s, t) for s, t in zip(scores, truth)) if a is not None]
    return sum(aps) / len(aps), sum(aucs) / len(aucs)
print("| run | positions | init | test ap | test auroc | ap_micro | auroc_macro |")
print("|---|---|---|---|---|---|---|")
print("| label-frequency baseline | - | - | %.4f | %.4f | - | 0.5000 |" % mean([freq] * len(truth)))
print("| history rule | - | - | %.4f | %.4f | - | - |" % mean([rule(h) for h in codes(d + "/test")]))
for name, pos, init in [("behrt_nv_scratch", "learned, visit", "scratch"),
                        ("behrt_nv_pretrained", "learned, visit", "behrt_mlm_tiny"),
                        ("learned_token_nv_scratch", "learned, token", "scratch"),
                        ("corebehrt_nv_scratch", "rope, token", "scratch"),
                        ("corebehrt_nv_pretrained", "rope, token", "corebehrt_mlm_tiny"),
                        ("sinusoidal_nv_scratch", "sinusoidal, token", "scratch"),
                        ("time2vec_nv_scratch", "learned, visit; Time2Vec ages", "scratch")]:
    rec = [json.loads(l) for l in open("%s/%s/metrics.jsonl" % (runs, name))]
    t = [r for r in rec if r["split"] == "test"][-1]
    print("| %s | %s | %s | %.4f | %.4f | %.4f | %.4f |" % (name, pos, init, t["ap"], t["auroc"],
                                                         t["ap_micro"], t["auroc_macro"]))
print("\nThe baseline scores every patient with each code's share of the training labels;")
print("its macro AUROC is 0.5 (one score per code ties all patients). The history rule")
print("scores a code by its training rate of recurring in the next visit when the")
print("patient's history has it, and of appearing when it does not.")
PY
