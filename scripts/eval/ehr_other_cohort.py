#!/usr/bin/env python3
"""A synthetic EHR cohort from a generator that is not rotor's `synth ehr`.

  python3 scripts/eval/ehr_other_cohort.py SEED PATIENTS OUT.jsonl

Issue 42's check that the EHR recipes learn on a cohort the project did not
design them on: prepare-ehr's JSON lines (one patient a line, visits with an
age in months and codes), with
  - 30 chronic codes C00..C29: an onset chance per visit that rises or falls
    with age (a log-linear slope per code), then recurrence at each later
    visit with a per-code chance of 0.5 to 0.9;
  - 30 chains: a trigger T00..T29 at a visit (chance 0.02 to 0.08) makes its
    target U00..U29 appear at the next visit with a chance of 0.4 to 0.8;
  - 200 noise codes N000..N199, one to three a visit, Zipf(1.1) frequencies;
  - 3 to 20 visits a patient, 1 to 18 months apart, first ages 0 to 70 years.
The per-code parameters are drawn from SEED + 1000, the patients from SEED.
numpy only. docs/results.md, "EHR next-visit: cohorts of known difficulty".
"""
import json
import sys

import numpy as np

if len(sys.argv) != 4:
    sys.exit("usage: ehr_other_cohort.py SEED PATIENTS OUT.jsonl")
seed = int(sys.argv[1]); n = int(sys.argv[2]); out = sys.argv[3]
rng = np.random.default_rng(seed)
g = np.random.default_rng(1000 + seed)
NCH, NCHAIN, NNOISE = 30, 30, 200
chronic = ["C%02d" % i for i in range(NCH)]
ch_base = g.uniform(0.005, 0.04, NCH); ch_slope = g.normal(0, 1.5, NCH)
ch_recur = g.uniform(0.5, 0.9, NCH)
trig = ["T%02d" % i for i in range(NCHAIN)]; targ = ["U%02d" % i for i in range(NCHAIN)]
trig_p = g.uniform(0.02, 0.08, NCHAIN); chain_p = g.uniform(0.4, 0.8, NCHAIN)
noise = ["N%03d" % i for i in range(NNOISE)]
zw = 1.0 / np.arange(1, NNOISE + 1) ** 1.1; zw /= zw.sum()
with open(out, "w") as f:
    for i in range(n):
        age = int(rng.integers(0, 70 * 12)); nv = int(rng.integers(3, 21))
        has = np.zeros(NCH, bool); prev_trig = []
        visits = []
        for v in range(nv):
            yrs = age / 12; codes = []
            z = (yrs - 45) / 20
            for k in range(NCH):
                if has[k]:
                    if rng.random() < ch_recur[k]: codes.append(chronic[k])
                elif rng.random() < ch_base[k] * np.exp(ch_slope[k] * z):
                    has[k] = True; codes.append(chronic[k])
            for j in prev_trig:
                if rng.random() < chain_p[j]: codes.append(targ[j])
            prev_trig = [j for j in range(NCHAIN) if rng.random() < trig_p[j]]
            codes += [trig[j] for j in prev_trig]
            for c in rng.choice(NNOISE, size=int(rng.integers(1, 4)), p=zw):
                if noise[c] not in codes: codes.append(noise[c])
            if not codes: codes.append(noise[0])
            visits.append({"age": age, "codes": codes})
            age += int(rng.integers(1, 19))
        f.write(json.dumps({"patient_id": "Q%06d" % i, "visits": visits}) + "\n")
