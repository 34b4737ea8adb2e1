#!/usr/bin/env python3
"""Long-document matching triples from a corpus's articles (RoFormer's
section 4.5, issue 28): each example is a context A and two candidates, B
from A's article and C from another article; the model picks the one that
belongs with A.

    make_long_triplets.py --input test.txt --input valid.txt --output DIR
        [--segment-bytes 1100] [--per-article 8] [--valid 0.1] [--test 0.1]
        [--seed 1] [--relabel 0 [--relabel-keep 100] [--relabel-band 200]]

Articles start at WikiText's title lines, " = Title = " (one '=' a side;
" = = Section = = " lines are headings inside an article, dropped with the
title). An article's text, its lines joined by spaces, is cut at word
boundaries into consecutive segments of at least --segment-bytes UTF-8 bytes
(what rotor's byte tokenizer counts as tokens; the default 1100 is over 1024,
so that a model at 1024 tokens sees more of each segment than one at 512);
a last, shorter piece is dropped. Articles of two or more segments give up to
--per-article triples: A and B two different segments of the article, C a
segment of another article of the same split.

The articles are shuffled (--seed) and split into train, valid and test by
article: no article, as A, B or C, is in two splits. The right choice's
position is random, with as many 0s as 1s in each split (one more 0 when the
count is odd). The same inputs and --seed give the same files.

Writes DIR/{train,valid,test}.tsv for `task: classification` with
`data.choices: 2`:

    label<TAB>context<TAB>choice_0<TAB>choice_1     (header line)
    1<TAB>A<TAB>C<TAB>B

and prints a summary per split to standard output.

--relabel K adds K relabelled copies of each training triple (valid and test
are never touched, and are the same files as without it). In a copy every
word of the triple is replaced through one random one-to-one map of the
words of the training triples' distinct segments, the same map for A, B and
C, so that which words of B recur in A is kept while which words they are is
not. The --relabel-keep
most frequent words (function words) are kept, and a word is mapped only to
a word of the same frequency band (--relabel-band ranks), so that a copy
reads like text of the same statistics. Tokens without a letter, and
WikiText's markup (<unk>, @-@), are kept. Why: with a hundred training
articles, a small model trained from scratch learns which segments and which
words go together (article identity) instead of how to match words across
the pair, and scores chance on unseen articles; in a relabelled copy article
identity is gone and only the matching pays (docs/results.md).

The three files are written under temporary names and renamed only when all
are complete: an error leaves the previous ones as they were. DIR is created
when missing; none of its files may be an input. Errors are one line: exit
status 2 for a bad command line, 1 for anything else (an unreadable or
non-UTF-8 input, too few articles, a full disk).
"""
import math
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datascript as ds  # noqa: E402

TITLE = re.compile(r"^ = [^=].* = $")
HEADING = re.compile(r"^ (= )+.*( =)+ $")


def read_articles(path):
    """(title, text) of each article of a WikiText file, in file order."""
    lines = ds.read_text(path).split("\n")
    articles, title, body = [], None, []
    for number, line in enumerate(lines, 1):
        if TITLE.match(line):
            if title is not None:
                articles.append((title, " ".join(body)))
            title, body = line.strip(" ="), []
        elif title is None:
            if line.strip():
                ds.fail(f"{ds.show(path)}:{number}: text before the first ' = Title = ' line")
        elif line.strip() and not HEADING.match(line):
            body.append(" ".join(line.split()))  # tabs and runs of spaces: one space
    if title is not None:
        articles.append((title, " ".join(body)))
    return articles


def segments(text, min_bytes):
    """Consecutive pieces of `text`, cut between words, each of at least
    `min_bytes` UTF-8 bytes; the last shorter piece dropped."""
    out, words, size = [], [], 0
    for word in text.split(" "):
        if not word:
            continue
        words.append(word)
        size += len(word.encode("utf-8")) + (1 if len(words) > 1 else 0)
        if size >= min_bytes:
            out.append(" ".join(words))
            words, size = [], 0
    return out


def triples(articles, per_article, rng):
    """(A, B, C, article of A/B, article of C) for the articles of one split."""
    pieces = [segs for _, segs in articles]
    out = []
    for i, segs in enumerate(pieces):
        if len(segs) < 2 or len(pieces) < 2:
            continue
        pairs = [(a, b) for a in range(len(segs)) for b in range(len(segs)) if a != b]
        rng.shuffle(pairs)
        for a, b in pairs[:per_article]:
            j = rng.choice([k for k in range(len(pieces)) if k != i])
            out.append((segs[a], segs[b], rng.choice(pieces[j]), i, j))
    return out


WORD = re.compile(r"(?=.*[^\W\d_])\w[\w'.-]*")  # a letter; not <unk> or @-@


class Relabeller:
    """One-to-one maps of a split's words within frequency bands."""

    def __init__(self, texts, keep, band, rng):
        counts = {}
        for text in texts:
            for w in text.split(" "):
                if WORD.fullmatch(w):
                    counts[w] = counts.get(w, 0) + 1
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        self.movable = ranked[keep:]
        self.rank = {w: i for i, w in enumerate(self.movable)}
        self.band, self.rng = band, rng

    def copy(self, texts):
        """`texts` through one fresh map: in each band of `band` ranks, rank r
        goes to (a r + b) mod n with a coprime to n, a and b drawn per band."""
        maps = {}

        def image(w):
            r = self.rank.get(w)
            if r is None:
                return w
            start = r - r % self.band
            n = min(self.band, len(self.movable) - start)
            if start not in maps:
                a = self.rng.randrange(1, n) if n > 1 else 1
                while math.gcd(a, n) != 1:
                    a = self.rng.randrange(1, n)
                maps[start] = (a, self.rng.randrange(n))
            a, b = maps[start]
            return self.movable[start + (a * (r - start) + b) % n]

        return [" ".join(image(w) for w in text.split(" ")) for text in texts]


def split_text(rows):
    """The TSV of rows (label, context, choice_0, choice_1), header first."""
    return "".join(["label\tcontext\tchoice_0\tchoice_1\n"] +
                   ["\t".join(map(str, row)) + "\n" for row in rows])


def main():
    p = ds.parser(__doc__.split("\n\n")[0])
    p.add_argument("--input", action="append", required=True, help="a WikiText file (repeatable)")
    p.add_argument("--output", required=True, help="directory for train/valid/test.tsv")
    p.add_argument("--segment-bytes", type=ds.int_arg(), default=1100,
                   help="the least UTF-8 bytes of a segment (default 1100; more than 512)")
    p.add_argument("--per-article", type=ds.int_arg(), default=8,
                   help="triples per article (default 8)")
    p.add_argument("--valid", type=ds.float_arg(0, 1), default=0.1,
                   help="share of articles (default 0.1)")
    p.add_argument("--test", type=ds.float_arg(0, 1), default=0.1,
                   help="share of articles (default 0.1)")
    p.add_argument("--seed", type=ds.int_arg(), default=1)
    p.add_argument("--relabel", type=ds.int_arg(), default=0,
                   help="relabelled copies of each training triple (default 0)")
    p.add_argument("--relabel-keep", type=ds.int_arg(), default=100,
                   help="most frequent words kept as they are (default 100)")
    p.add_argument("--relabel-band", type=ds.int_arg(), default=200,
                   help="words map within bands of this many frequency ranks (default 200)")
    a = p.parse_args()
    if a.relabel < 0 or a.relabel_keep < 0 or a.relabel_band < 2:
        ds.usage(f"--relabel {a.relabel}, --relabel-keep {a.relabel_keep}, --relabel-band "
                 f"{a.relabel_band}: the first two at least 0, the band at least 2")
    if a.segment_bytes <= 512:
        ds.usage(f"--segment-bytes {a.segment_bytes}: segments must be longer than 512 bytes")
    if a.per_article < 1:
        ds.usage(f"--per-article {a.per_article}: at least 1")
    if not (0 < a.valid < 1 and 0 < a.test < 1 and a.valid + a.test < 1):
        ds.usage(f"--valid {a.valid} and --test {a.test}: each in (0, 1), together below 1")
    for path in a.input:
        ds.check_input(path)
    names = ["train.tsv", "valid.tsv", "test.tsv"]
    ds.check_output_dir(a.output, names, a.input)

    articles = []
    for path in a.input:
        articles += [(t, segments(text, a.segment_bytes)) for t, text in read_articles(path)]
    articles = [x for x in articles if x[1]]
    if len(articles) < 6:
        ds.fail(f"{len(articles)} articles with a segment of {a.segment_bytes} bytes; need at "
                "least 6 (two a split)")
    rng = random.Random(a.seed)
    rng.shuffle(articles)
    n = len(articles)
    n_valid = max(2, round(n * a.valid))
    n_test = max(2, round(n * a.test))
    if n - n_valid - n_test < 2:
        ds.fail(f"{n} articles leave fewer than 2 for training")
    splits = {"test": articles[:n_test], "valid": articles[n_test:n_test + n_valid],
              "train": articles[n_test + n_valid:]}
    texts, summaries = [], []
    for name in ("train", "valid", "test"):
        rows = triples(splits[name], a.per_article, rng)
        if not rows:
            ds.fail(f"split {name}: no article has two segments of {a.segment_bytes} bytes")
        labels = [i % 2 for i in range(len(rows))]
        rng.shuffle(labels)
        path = os.path.join(a.output, name + ".tsv")
        out = [(label, context) + ((other, same) if label == 1 else (same, other))
               for (context, same, other, _, _), label in zip(rows, labels)]
        copies = ""
        if name == "train" and a.relabel > 0:
            # Its own generator: valid and test are the files made without --relabel.
            relabel_rng = random.Random(f"relabel {a.seed}")
            relabeller = Relabeller(sorted({s for r in rows for s in r[:3]}),
                                    a.relabel_keep, a.relabel_band, relabel_rng)
            out += [(row[0], *relabeller.copy(row[1:])) for _ in range(a.relabel) for row in out]
            relabel_rng.shuffle(out)
            copies = (f" (with {a.relabel} relabelled copies of each: {len(out)} rows; "
                      f"{len(relabeller.movable)} words relabelled)")
        texts.append((path, split_text(out)))
        lengths = sorted(len(s.encode("utf-8")) for r in rows for s in r[:3])
        summaries.append(f"{name}: {len(splits[name])} articles, {len(rows)} triples{copies}, "
                         f"{sum(labels)} with the right choice second, segment bytes "
                         f"{lengths[0]}..{lengths[-1]} (median {lengths[len(lengths) // 2]}) "
                         f"-> {ds.show(path)}")
    with ds.Outputs() as files:
        files.make_dir(a.output)
        for path, text in texts:
            files.add(path, text)
        files.commit()
    for line in summaries:
        ds.say(line)


if __name__ == "__main__":
    ds.run(main)
