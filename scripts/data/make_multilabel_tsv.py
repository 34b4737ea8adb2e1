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

The directory is created when missing. The four files are written under
temporary names and renamed only when all are complete, so that an error
leaves the previous ones as they were. Errors are one line: exit status 2
for a bad command line (a count below 1), 1 for anything else (a full disk).
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datascript as ds  # noqa: E402

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
    ap = ds.parser(__doc__.splitlines()[0])
    ap.add_argument("--output", required=True, help="directory to write into")
    ap.add_argument("--train", type=ds.int_arg(1), default=2000, help="examples (default 2000)")
    ap.add_argument("--valid", type=ds.int_arg(1), default=300, help="examples (default 300)")
    ap.add_argument("--test", type=ds.int_arg(1), default=300, help="examples (default 300)")
    ap.add_argument("--seed", type=ds.int_arg(), default=1)
    a = ap.parse_args()
    names = ["train.tsv", "valid.tsv", "test.tsv", "words.txt"]
    ds.check_output_dir(a.output, names)
    rng = random.Random(a.seed)
    texts = [split(n, rng) for n in (a.train, a.valid, a.test)]
    texts.append("\n".join(TRIGGERS + FILLER) + "\n")
    with ds.Outputs() as out:
        out.make_dir(a.output)
        for name, text in zip(names, texts):
            out.add(os.path.join(a.output, name), text)
        out.commit()


if __name__ == "__main__":
    ds.run(main)
