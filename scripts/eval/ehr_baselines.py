#!/usr/bin/env python3
"""The baselines of EHR next-visit prediction on a labelled prepare-ehr directory.

  python3 scripts/eval/ehr_baselines.py DIR [--split test] [--json OUT.json]
      [--lr-steps 300] [--lr-rate 0.05] [--lr-l2 1e-4] [--seed 1]

DIR is what `rotor prepare-ehr --labels next_visit` (or window:MONTHS) wrote.
The splits are the directory's, as in training: every baseline is fitted on
DIR/train, the logistic regression's step is chosen on DIR/valid, and the
scores are on --split (test by default). The labels are every code of
DIR/vocab.txt (label k = code id 7 + k), as task multilabel's.

  label frequency   every patient scored with each code's share of the
                    training labels;
  history rule      a code scored by its training rate of appearing in the
                    next visit when the patient's history has it, and when
                    it does not (scripts/ehr_results.sh's rule);
  history rule, last visit
                    the same with three states: in the last visit, earlier
                    in the history only, not in the history;
  logistic regression
                    one logistic regression per code on a bag of codes:
                    whether each code is in the history, whether it is in the
                    last visit, and the age at the last visit (one-hot by
                    decade plus age / 100); full-batch Adam (--lr-steps steps
                    of --lr-rate, L2 --lr-l2, the bias started at the label
                    frequency's logit), the step of best validation AP kept
                    (checked every 10 steps).

The history is the whole stored history of the patient, not the newest
data.seq_len tokens a model sees (at most the same information).

The metrics are rotor's (src/eval/multilabel_metrics.h, scikit-learn's on
defined rows): ap and auroc averaged over patients (BEHRT's), ap/auroc micro
(all pairs) and macro (per label); an example or label without a positive
has no AP, one without a positive and a negative no ROC AUC, and both are
left out of the means. Ties step through distinct scores.

numpy only. Prints a Markdown table; --json writes the figures.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

FIRST_CODE = 7  # ids 0-6: <pad> <unk> <s> </s> [MASK] [CLS] [SEP]
SEP = 6


# ---- reading a prepare-ehr directory (src/data/corpus.h, src/data/ehr.h) ----

def read_corpus(prefix):
    """The sentences of PREFIX.{bin,idx} as a list of int32 arrays."""
    with open(prefix + ".idx", "rb") as f:
        head = f.read(48)
        if head[:8] != b"ROTORIDX":
            sys.exit("ehr_baselines: %s.idx is not a rotor corpus index" % prefix)
        version, dtype, count = struct.unpack("<IIQ", head[8:24])
        if version != 1 or dtype != 1:
            sys.exit("ehr_baselines: %s.idx: version %d dtype %d" % (prefix, version, dtype))
        offsets = np.frombuffer(f.read(8 * (count + 1)), dtype="<u8")
    tokens = np.fromfile(prefix + ".bin", dtype="<i4")
    if len(offsets) != count + 1 or int(offsets[-1]) != len(tokens):
        sys.exit("ehr_baselines: %s.{bin,idx} disagree" % prefix)
    return [tokens[offsets[i]:offsets[i + 1]] for i in range(count)]


class Split:
    """One split: each example's history (codes, ages, visit indices) and labels."""

    def __init__(self, directory, name, num_codes):
        prefix = os.path.join(directory, name)
        examples = read_corpus(prefix)
        labels = read_corpus(prefix + ".labels")
        if len(labels) != len(examples):
            sys.exit("ehr_baselines: %s: %d examples, %d label rows" % (prefix, len(examples), len(labels)))
        n, C = len(examples), num_codes
        self.size = n
        self.history = np.zeros((n, C), dtype=np.float32)  # code in the history
        self.last = np.zeros((n, C), dtype=np.float32)     # code in the last visit
        self.age = np.zeros(n, dtype=np.int64)             # age id at the last visit
        self.truth = np.zeros((n, C), dtype=np.uint8)
        for i, (x, y) in enumerate(zip(examples, labels)):
            x = x.reshape(-1, 3)  # code, age, visit
            codes = x[:, 0]
            is_code = codes >= FIRST_CODE
            self.history[i, codes[is_code] - FIRST_CODE] = 1
            last_visit = x[:, 2].max()
            in_last = is_code & (x[:, 2] == last_visit)
            self.last[i, codes[in_last] - FIRST_CODE] = 1
            self.age[i] = x[x[:, 2] == last_visit, 1].max()
            y = np.asarray(y)
            if (y < FIRST_CODE).any() or (y >= FIRST_CODE + C).any():
                sys.exit("ehr_baselines: %s.labels: example %d has a label outside the codes" % (prefix, i))
            self.truth[i, y - FIRST_CODE] = 1


def load_dir(directory):
    meta = json.load(open(os.path.join(directory, "ehr.json")))
    if not meta.get("labels"):
        sys.exit("ehr_baselines: %s was prepared without --labels" % directory)
    num_codes = meta["vocab_size"] - FIRST_CODE
    splits = {s: Split(directory, s, num_codes) for s in ("train", "valid", "test")
              if meta["examples"].get(s, 0) > 0}
    return meta, splits


# ---- rotor's metrics (src/eval/multilabel_metrics.cpp) ----

def _curve(scores, truth):
    """Cumulative true and false positives at each distinct score, highest first."""
    order = np.argsort(-scores, kind="stable")
    s, t = scores[order], truth[order].astype(np.float64)
    tp, fp = np.cumsum(t), np.cumsum(1 - t)
    last_of_tie = np.ones(len(s), dtype=bool)
    last_of_tie[:-1] = s[1:] != s[:-1]
    return tp[last_of_tie], fp[last_of_tie], t.sum(), len(t) - t.sum()


def average_precision(scores, truth):
    tp, fp, pos, _ = _curve(scores, truth)
    if pos == 0:
        return math.nan
    recall = tp / pos
    return float(np.sum(np.diff(np.concatenate([[0.0], recall])) * tp / (tp + fp)))


def roc_auc(scores, truth):
    tp, fp, pos, neg = _curve(scores, truth)
    if pos == 0 or neg == 0:
        return math.nan
    tp0, fp0 = np.concatenate([[0.0], tp[:-1]]), np.concatenate([[0.0], fp[:-1]])
    return float(np.sum((fp - fp0) * (tp + tp0) / 2) / (pos * neg))


def _mean(values):
    v = [x for x in values if not math.isnan(x)]
    return sum(v) / len(v) if v else math.nan


def multilabel_scores(scores, truth):
    """ap, auroc (sample means), ap/auroc micro and macro of [N, C] scores."""
    scores = np.asarray(scores, dtype=np.float64)
    N, C = scores.shape
    rows = [roc_auc(scores[i], truth[i]) for i in range(N)]
    cols = [(average_precision(scores[:, k], truth[:, k]), roc_auc(scores[:, k], truth[:, k]))
            for k in range(C)]
    return {
        "ap": sample_ap(scores, truth), "auroc": _mean(rows),
        "ap_micro": average_precision(scores.ravel(), truth.ravel()),
        "auroc_micro": roc_auc(scores.ravel(), truth.ravel()),
        "ap_macro": _mean(c[0] for c in cols), "auroc_macro": _mean(c[1] for c in cols),
    }


def sample_ap(scores, truth):
    """The sample-averaged AP of multilabel_scores, all rows at once."""
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, axis=1, kind="stable")
    s = np.take_along_axis(scores, order, axis=1)
    t = np.take_along_axis(truth, order, axis=1).astype(np.float64)
    tp = np.cumsum(t, axis=1)
    precision = tp / np.arange(1, s.shape[1] + 1)
    last_of_tie = np.ones(s.shape, dtype=bool)
    last_of_tie[:, :-1] = s[:, 1:] != s[:, :-1]
    # Each positive counts the precision at the end of its tie group.
    idx = np.where(last_of_tie, np.arange(s.shape[1]), s.shape[1])
    end = np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1]
    pos = t.sum(axis=1)
    ap = (t * np.take_along_axis(precision, end, axis=1)).sum(axis=1)
    defined = pos > 0
    return float((ap[defined] / pos[defined]).mean()) if defined.any() else math.nan


# ---- the baselines ----

def label_frequency(train, split):
    freq = train.truth.mean(axis=0)
    return np.tile(freq, (split.size, 1))


def history_rule(train, split, last_visit=False):
    """Each code's training rate of being a label, by whether the history has it
    (and, with last_visit, whether the last visit has it)."""
    def state(s):
        st = s.history.astype(np.int64)
        if last_visit:
            st = st + s.last.astype(np.int64)  # 0 no, 1 history only, 2 last visit
        return st
    st_train, y = state(train), train.truth
    states = 3 if last_visit else 2
    rate = np.zeros((states, y.shape[1]))
    for k in range(states):
        m = st_train == k
        rate[k] = (y * m).sum(axis=0) / np.maximum(1, m.sum(axis=0))
    st = state(split)
    return rate[st, np.arange(y.shape[1])]


def features(s, age_bins):
    decade = np.minimum(s.age // 10, age_bins - 1)
    onehot = np.zeros((s.size, age_bins), dtype=np.float32)
    onehot[np.arange(s.size), decade] = 1
    return np.concatenate([s.history, s.last, onehot, (s.age / 100.0)[:, None].astype(np.float32)], axis=1)


def logistic_regression(train, valid, others, steps, rate, l2, seed, age_bins=12):
    """Full-batch Adam on the mean BCE; returns the scores of `others` at the
    step of best validation sample AP, and that step."""
    X, Y = features(train, age_bins), train.truth.astype(np.float32)
    Xv = features(valid, age_bins)
    n, F = X.shape
    C = Y.shape[1]
    rng = np.random.default_rng(seed)
    W = (rng.standard_normal((F, C)) * 0.01).astype(np.float32)
    p = np.clip(Y.mean(axis=0), 1e-4, 1 - 1e-4)
    b = np.log(p / (1 - p)).astype(np.float32)
    mW, vW, mb, vb = np.zeros_like(W), np.zeros_like(W), np.zeros_like(b), np.zeros_like(b)
    b1, b2, eps = 0.9, 0.999, 1e-8
    best = (-1.0, 0, W.copy(), b.copy())
    for t in range(1, steps + 1):
        Z = X @ W + b
        G = (1 / (1 + np.exp(-Z)) - Y) / n  # d mean-over-examples BCE (summed over labels)
        gW = X.T @ G + l2 * W
        gb = G.sum(axis=0)
        for g, m, v, w in ((gW, mW, vW, W), (gb, mb, vb, b)):
            m *= b1; m += (1 - b1) * g
            v *= b2; v += (1 - b2) * g * g
            w -= rate * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        if t % 10 == 0 or t == steps:
            ap = sample_ap(Xv @ W + b, valid.truth)
            if ap > best[0]:
                best = (ap, t, W.copy(), b.copy())
    _, step, W, b = best
    return [features(s, age_bins) @ W + b for s in others], step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="a prepare-ehr directory with labels")
    ap.add_argument("--split", default="test", choices=["valid", "test"])
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--lr-steps", type=int, default=300)
    ap.add_argument("--lr-rate", type=float, default=0.05)
    ap.add_argument("--lr-l2", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    meta, sp = load_dir(a.dir)
    for need in ("train", "valid", a.split):
        if need not in sp:
            sys.exit("ehr_baselines: %s has no %s split" % (a.dir, need))
    train, valid, split = sp["train"], sp["valid"], sp[a.split]
    results = {}
    results["label frequency"] = multilabel_scores(label_frequency(train, split), split.truth)
    results["history rule"] = multilabel_scores(history_rule(train, split), split.truth)
    results["history rule, last visit"] = multilabel_scores(history_rule(train, split, True), split.truth)
    (lr_scores,), step = logistic_regression(train, valid, [split], a.lr_steps, a.lr_rate, a.lr_l2, a.seed)
    results["logistic regression"] = multilabel_scores(lr_scores, split.truth)
    results["logistic regression"]["step"] = step
    print("%s (%s: %d patients; train %d; %d codes; labels %.2f a patient)"
          % (a.dir, a.split, split.size, train.size, train.truth.shape[1], split.truth.sum() / split.size))
    print()
    print("| baseline | %s ap | %s auroc | ap_micro | ap_macro | auroc_macro |" % (a.split, a.split))
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        print("| %s | %.4f | %.4f | %.4f | %.4f | %.4f |"
              % (name, r["ap"], r["auroc"], r["ap_micro"], r["ap_macro"], r["auroc_macro"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"dir": a.dir, "split": a.split, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
