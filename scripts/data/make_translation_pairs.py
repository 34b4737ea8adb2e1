#!/usr/bin/env python3
"""A sentence-pair classification task from a parallel corpus: is sentence2
the translation of sentence1? Each source line appears once, paired with its
own translation (label "translation") or, with probability 1/2, with the
translation of another line drawn at random (label "other"). Writes a
GLUE-style TSV (header sentence1, sentence2, label; tabs inside a sentence
become spaces). Deterministic for a seed.

Usage: make_translation_pairs.py --src F.en --tgt F.de --output F.tsv [--seed 1]
"""
import argparse
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="source sentences, one per line")
    ap.add_argument("--tgt", required=True, help="their translations, line by line")
    ap.add_argument("--output", required=True, help="TSV to write")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    with open(a.src, encoding="utf-8") as f:
        src = [l.rstrip("\n").replace("\t", " ") for l in f]
    with open(a.tgt, encoding="utf-8") as f:
        tgt = [l.rstrip("\n").replace("\t", " ") for l in f]
    if len(src) != len(tgt):
        sys.exit(f"make_translation_pairs: {a.src} has {len(src)} lines, {a.tgt} {len(tgt)}")
    if len(src) < 2:
        sys.exit(f"make_translation_pairs: {a.src}: fewer than two lines")
    rng = random.Random(a.seed)
    counts = {"translation": 0, "other": 0}
    with open(a.output, "w", encoding="utf-8") as out:
        out.write("sentence1\tsentence2\tlabel\n")
        for i, s in enumerate(src):
            if not s.strip() or not tgt[i].strip():
                continue
            if rng.random() < 0.5:
                j, label = i, "translation"
            else:
                j = rng.randrange(len(tgt) - 1)
                j += j >= i  # any other line
                label = "other"
            counts[label] += 1
            out.write(f"{s}\t{tgt[j]}\t{label}\n")
    print(f"{a.output}: {counts['translation']} translation, {counts['other']} other")


if __name__ == "__main__":
    main()
