#!/usr/bin/env python3
"""A synthetic multi-label TSV set for task multilabel (configs/multilabel/tiny.yaml).

Each example is a short sentence of filler words; each of six labels is
present when its trigger word is, the triggers drawn with different
frequencies (so the label-frequency baseline ranks labels), and a seventh
label, "pair", is present when both "apple" and "boat" are (a comorbidity the
model must combine two words for). About a quarter of the examples have no
label. Writes OUT/train.tsv, OUT/valid.tsv, OUT/test.tsv (columns id,
sentence, codes: labels separated by ",") and OUT/words.txt, the vocabulary
for `rotor spm-train`. Deterministic for a given --seed.

  python3 scripts/data/make_multilabel_tsv.py --output data/multilabel
"""
import argparse
import os
import random

LABELS = ["ant", "bee", "cow", "dog", "eel", "fox"]
TRIGGERS = ["apple", "boat", "cloud", "drum", "egg", "flag"]
FREQUENCY = [0.45, 0.35, 0.25, 0.15, 0.1, 0.05]
FILLER = ("the a red blue small big old new sits runs near far and with "
          "under over green quiet loud slow").split()


def split(n, rng):
    rows = ["id\tsentence\tcodes"]
    for i in range(n):
        words = [rng.choice(FILLER) for _ in range(3 + rng.randrange(6))]
        codes = []
        for label, trigger, p in zip(LABELS, TRIGGERS, FREQUENCY):
            if rng.random() < p:
                words.insert(rng.randrange(len(words) + 1), trigger)
                codes.append(label)
        if "apple" in words and "boat" in words:
            codes.append("pair")
        rows.append(f"{i}\t{' '.join(words)}\t{','.join(codes)}")
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True, help="directory to write into")
    ap.add_argument("--train", type=int, default=2000)
    ap.add_argument("--valid", type=int, default=300)
    ap.add_argument("--test", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.output, exist_ok=True)
    for name, n in (("train", a.train), ("valid", a.valid), ("test", a.test)):
        with open(os.path.join(a.output, name + ".tsv"), "w") as f:
            f.write(split(n, rng))
    with open(os.path.join(a.output, "words.txt"), "w") as f:
        f.write("\n".join(TRIGGERS + FILLER) + "\n")


if __name__ == "__main__":
    main()
