#!/usr/bin/env python3
"""A sentence-pair classification task from a parallel corpus: is sentence2
the translation of sentence1? Each source line appears once, paired with its
own translation (label "translation") or, with probability 1/2, with the
translation of another line drawn at random (label "other"). Writes a
GLUE-style TSV (header sentence1, sentence2, label; tabs inside a sentence
become spaces). Deterministic for a seed.

Usage: make_translation_pairs.py --src F.en --tgt F.de --output F.tsv [--seed 1]

The output may not be an input, and its folder must exist; it is written
under a temporary name and renamed when complete. Errors are one line: exit
status 2 for a bad command line, 1 for anything else (an unreadable or
non-UTF-8 input, inputs of different lengths, no pair to write, a full disk).
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datascript as ds  # noqa: E402


def main():
    ap = ds.parser(__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="source sentences, one per line")
    ap.add_argument("--tgt", required=True, help="their translations, line by line")
    ap.add_argument("--output", required=True, help="TSV to write")
    ap.add_argument("--seed", type=ds.int_arg(), default=1)
    a = ap.parse_args()
    ds.check_input(a.src)
    ds.check_input(a.tgt)
    ds.check_output_file(a.output, [a.src, a.tgt])
    src = [l.replace("\t", " ") for l in ds.read_lines(a.src)]
    tgt = [l.replace("\t", " ") for l in ds.read_lines(a.tgt)]
    if len(src) != len(tgt):
        ds.fail(f"{ds.show(a.src)} has {len(src)} lines, {ds.show(a.tgt)} {len(tgt)}")
    if len(src) < 2:
        ds.fail(f"{ds.show(a.src)}: fewer than two lines")
    rng = random.Random(a.seed)
    counts = {"translation": 0, "other": 0}
    rows = ["sentence1\tsentence2\tlabel\n"]
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
        rows.append(f"{s}\t{tgt[j]}\t{label}\n")
    if len(rows) == 1:
        ds.fail(f"{ds.show(a.src)}, {ds.show(a.tgt)}: no line pair where both are non-blank; "
                f"nothing written to {ds.show(a.output)}")
    ds.write_file(a.output, "".join(rows), [a.src, a.tgt])
    ds.say(f"{ds.show(a.output)}: {counts['translation']} translation, {counts['other']} other")


if __name__ == "__main__":
    ds.run(main)
