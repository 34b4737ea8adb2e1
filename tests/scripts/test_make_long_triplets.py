#!/usr/bin/env python3
"""scripts/data/make_long_triplets.py on a tiny hand-made WikiText corpus:
every word names its article ("a3w17"), so that each segment's article is
known. Checks: the splits are disjoint by article (A, B and C alike), B is
from A's article and C from another, every segment has more than
--segment-bytes bytes, the labels are balanced and say where B is, the same
--seed gives the same files and another seed other ones, --relabel adds
copies through one-to-one word maps and leaves valid and test alone, and bad
arguments are one-line errors."""
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "data", "make_long_triplets.py")


def write_corpus(path, first, count, words):
    with open(path, "w", encoding="utf-8") as f:
        f.write(" \n")
        for a in range(first, first + count):
            f.write(f" = Article {a} = \n \n")
            for p in range(3):
                f.write(" " + " ".join(f"a{a}w{p * 1000 + i}" for i in range(words)) + " \n \n")
                f.write(f" = = Section {p} = = \n \n")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def read(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0] == "label\tcontext\tchoice_0\tchoice_1", lines[0]
    return [line.split("\t") for line in lines[1:] if line]


def article(segment):
    found = set(re.findall(r"\ba(\d+)w\d+\b", segment))
    assert len(found) == 1, f"a segment of {len(found)} articles: {segment[:80]}"
    assert "Section" not in segment and "Article" not in segment, segment[:80]
    return found.pop()


def main():
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        # 20 articles of 3 x 150 words of 6-8 bytes: ~3 KB, 4-5 segments of 600 bytes.
        write_corpus(os.path.join(d, "test.txt"), 0, 12, 150)
        write_corpus(os.path.join(d, "valid.txt"), 12, 8, 150)
        inputs = ["--input", os.path.join(d, "test.txt"), "--input", os.path.join(d, "valid.txt")]
        common = inputs + ["--segment-bytes", "600", "--per-article", "6", "--valid", "0.2",
                           "--test", "0.2"]
        r = run(*common, "--output", os.path.join(d, "a"), "--seed", "3")
        check(r.returncode == 0, f"the script failed: {r.stderr}")
        if r.returncode != 0:
            print("\n".join(failures))
            return 1
        seen = {}
        for split in ("train", "valid", "test"):
            rows = read(os.path.join(d, "a", split + ".tsv"))
            check(len(rows) > 0, f"{split}: no triples")
            ones = 0
            arts = set()
            for label, context, c0, c1 in rows:
                check(label in ("0", "1"), f"{split}: label {label}")
                same, other = (c1, c0) if label == "1" else (c0, c1)
                ones += label == "1"
                a, b, c = article(context), article(same), article(other)
                check(a == b, f"{split}: B from article {b}, A from {a}")
                check(c != a, f"{split}: C from A's article {a}")
                check(context != same, f"{split}: A and B are the same segment")
                for s in (context, c0, c1):
                    check(len(s.encode("utf-8")) >= 600, f"{split}: a segment of {len(s)} bytes")
                    check(len(s.encode("utf-8")) > 512, f"{split}: not longer than 512 bytes")
                arts |= {a, c}
            check(ones == len(rows) // 2, f"{split}: {ones} of {len(rows)} labels are 1")
            seen[split] = arts
        check(not (seen["train"] & seen["valid"]), "an article in train and valid")
        check(not (seen["train"] & seen["test"]), "an article in train and test")
        check(not (seen["valid"] & seen["test"]), "an article in valid and test")
        check(sum(len(s) for s in seen.values()) == 20, f"articles used: {seen}")

        # Deterministic with --seed; another seed, other triples.
        run(*common, "--output", os.path.join(d, "b"), "--seed", "3")
        run(*common, "--output", os.path.join(d, "c"), "--seed", "4")
        for split in ("train", "valid", "test"):
            a, b, c = (open(os.path.join(d, x, split + ".tsv"), encoding="utf-8").read()
                       for x in "abc")
            check(a == b, f"{split}: the same seed gave other files")
            check(a != c, f"{split}: another seed gave the same files")

        # --relabel 3, on a corpus of shared words with Zipf-like frequencies
        # and tokens that must stay (",", "1990", "<unk>", "@-@"): valid and
        # test are the files made without it; train holds the same triples plus
        # 3 copies of each, every copy the image of one original under a
        # one-to-one word map shared by A, B and C that keeps the label, the
        # --relabel-keep most frequent words, the other tokens and the band.
        zipf = os.path.join(d, "zipf.txt")
        rng = random.Random(5)
        vocab = [f"v{i}" for i in range(300)] + [",", "1990", "<unk>", "@-@"]
        weights = [1 / (i + 1) for i in range(300)] + [0.2, 0.05, 0.05, 0.05]
        with open(zipf, "w", encoding="utf-8") as f:
            f.write(" \n")
            for a in range(20):
                f.write(f" = Article {a} = \n \n")
                f.write(" " + " ".join(rng.choices(vocab, weights, k=400)) + " \n \n")
        zargs = ["--input", zipf, "--segment-bytes", "600", "--per-article", "6", "--valid",
                 "0.2", "--test", "0.2", "--seed", "3"]
        r = run(*zargs, "--output", os.path.join(d, "z"))
        check(r.returncode == 0, f"zipf corpus: {r.stderr}")
        relabel = ["--relabel", "3", "--relabel-keep", "5", "--relabel-band", "40"]
        r = run(*zargs, *relabel, "--output", os.path.join(d, "r"))
        check(r.returncode == 0 and "3 relabelled copies" in r.stdout, f"--relabel: {r.stderr}")
        for split in ("valid", "test"):
            same = [open(os.path.join(d, x, split + ".tsv"), encoding="utf-8").read()
                    for x in "zr"]
            check(same[0] == same[1], f"--relabel changed {split}")
        plain = [tuple(row) for row in read(os.path.join(d, "z", "train.tsv"))]
        rows = [tuple(row) for row in read(os.path.join(d, "r", "train.tsv"))]
        check(len(rows) == 4 * len(plain), f"--relabel 3: {len(rows)} rows of {len(plain)}")
        check(sorted(plain) == sorted(t for t in rows if t in set(plain)),
              "--relabel: the original triples are not all there once")
        counts = {}  # over the distinct segments of the training triples, as the script
        for segment in {x for row in plain for x in row[1:]}:
            for w in segment.split():
                if w.startswith("v"):
                    counts[w] = counts.get(w, 0) + 1
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        kept = set(ranked[:5])
        changed = total = 0
        for copy in (t for t in rows if t not in set(plain)):
            matches = []
            for row in plain:
                if row[0] != copy[0] or any(len(x.split()) != len(y.split())
                                            for x, y in zip(row[1:], copy[1:])):
                    continue
                fwd, back, ok = {}, {}, True
                for x, y in zip(" ".join(row[1:]).split(), " ".join(copy[1:]).split()):
                    if fwd.setdefault(x, y) != y or back.setdefault(y, x) != x:
                        ok = False
                        break
                if ok:
                    matches.append(fwd)
            check(len(matches) == 1, f"a relabelled row is the one-to-one image of "
                                     f"{len(matches)} triples: {copy[1][:60]}")
            if len(matches) != 1:
                continue
            for x, y in matches[0].items():
                if not x.startswith("v"):
                    check(x == y, f"the token {x} relabelled to {y}")
                    continue
                total += 1
                changed += x != y
                check(x not in kept or x == y, f"kept word {x} relabelled to {y}")
                check(x in kept or y not in kept, f"{x} relabelled to the kept word {y}")
                rx, ry = ranked.index(x), ranked.index(y) if y in counts else -1
                check(ry >= 0 and (rx - 5) // 40 == (ry - 5) // 40,
                      f"{x} (rank {rx}) relabelled out of its band to {y}")
        check(total and changed > total // 2, f"--relabel changed {changed} of {total} words")
        run(*zargs, *relabel, "--output", os.path.join(d, "r2"))
        check(open(os.path.join(d, "r", "train.tsv"), encoding="utf-8").read() ==
              open(os.path.join(d, "r2", "train.tsv"), encoding="utf-8").read(),
              "--relabel: the same seed gave another train.tsv")

        # Bad arguments and input: one line naming what.
        for args, expect in [
            (inputs + ["--segment-bytes", "512"], "--segment-bytes 512"),
            (inputs + ["--segment-bytes", "100000"], "articles with a segment"),
            (["--input", os.path.join(d, "missing.txt")], "missing.txt"),
            (inputs + ["--relabel", "-1"], "--relabel -1"),
            (inputs + ["--relabel", "2", "--relabel-band", "1"], "--relabel-band 1"),
        ]:
            r = run(*args, "--output", os.path.join(d, "x"))
            lines = r.stderr.strip().split("\n")
            check(r.returncode != 0 and len(lines) == 1 and expect in lines[0],
                  f"{args}: {r.returncode} {r.stderr!r}")
        with open(os.path.join(d, "bad.txt"), "w", encoding="utf-8") as f:
            f.write("stray text\n = Article = \n")
        r = run("--input", os.path.join(d, "bad.txt"), "--output", os.path.join(d, "x"))
        check(r.returncode != 0 and "bad.txt:1: text before" in r.stderr, r.stderr)

    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
