#!/usr/bin/env python3
"""The data scripts (scripts/data/make_translation_pairs.py,
make_long_triplets.py, make_multilabel_tsv.py) follow rotor's rules for the
files a user points them at (docs/training.md, "Nothing is lost"), row by row of a
table: each row is a command run in a fresh copy of one fixture folder, its
exit status (0, 1 or 2), the text its one error line must hold, and the files
it may change. For every row: no traceback, no hang (a timeout), a failure
is exactly one line `SCRIPT: error: ...`, no file other than the row's
outputs changed (inputs named as outputs included), no temporary left
behind, and an output set is either wholly the old one or wholly the new
one. Standard library only; run with any python3.
"""
import hashlib
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "scripts", "data")
TP, LT, ML = "make_translation_pairs.py", "make_long_triplets.py", "make_multilabel_tsv.py"
TMP_TAG = b".tmp-datascript-"
ENV = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", LC_ALL="C.UTF-8")

LT_ARGS = ["--segment-bytes", "600", "--per-article", "3"]
LT_INPUTS = ["--input", "wiki/test.txt", "--input", "wiki/valid.txt"]
ML_ARGS = ["--train", "40", "--valid", "10", "--test", "10"]


# ---------------------------------------------------------------- fixture ----
def write_article(f, a, paragraphs, words):
    """One WikiText article whose words name it ("a3w17")."""
    f.write(f" = Article {a} = \n \n")
    for p in range(paragraphs):
        f.write(" " + " ".join(f"a{a}w{p * 1000 + i}" for i in range(words)) + " \n \n")
        f.write(f" = = Section {p} = = \n \n")


def write_corpus(path, first, count, single=()):
    """`count` articles of 3 x 150 words (several 600-byte segments each);
    the articles numbered in `single` have one segment only."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(" \n")
        for a in range(first, first + count):
            if a in single:
                write_article(f, a, 1, 150)  # ~940 bytes: one segment of 600
            else:
                write_article(f, a, 3, 150)


def dead_pid():
    """The id of a process that has exited."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def run_script(cwd, script, args, limit=None, stdout=None):
    """(exit status, stdout, stderr) of scripts/data/SCRIPT ARGS in `cwd`;
    `limit` is RLIMIT_FSIZE in bytes (SIGXFSZ ignored: writes fail with
    EFBIG), `stdout` a file to send standard output to."""
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = open(stdout, "wb") if stdout else subprocess.PIPE
    try:
        r = subprocess.run([sys.executable, os.path.join(DATA, script)] + list(args), cwd=cwd,
                           stdout=out, stderr=subprocess.PIPE, preexec_fn=preexec, env=ENV,
                           timeout=60, stdin=subprocess.DEVNULL)
    finally:
        if stdout:
            out.close()
    return (r.returncode, (r.stdout or b"").decode("utf-8", "replace"),
            r.stderr.decode("utf-8", "replace"))


def make_fixture(d):
    """The folder every row starts from: inputs and complete earlier outputs."""
    rng = random.Random(1)
    with open(os.path.join(d, "c.en"), "w", encoding="utf-8") as f, \
            open(os.path.join(d, "c.de"), "w", encoding="utf-8") as g:
        for i in range(40):
            f.write(f"sentence {i} {rng.randrange(100)}\twith a tab\n")
            g.write(f"Satz {i} über {rng.randrange(100)}\n")
    with open(os.path.join(d, "blank.en"), "w") as f, open(os.path.join(d, "blank.de"), "w") as g:
        f.write("\n \n\n")
        g.write("x\n\ny\n")
    with open(os.path.join(d, "bad.en"), "wb") as f:
        f.write(b"".join(b"line %d\n" % i if i != 2 else b"caf\xe9 latin-1\n" for i in range(40)))
    with open(os.path.join(d, "short.de"), "w") as f:
        f.write("eins\nzwei\n")
    os.mkdir(os.path.join(d, "wiki"))
    write_corpus(os.path.join(d, "wiki", "test.txt"), 0, 12)
    write_corpus(os.path.join(d, "wiki", "valid.txt"), 12, 8)
    with open(os.path.join(d, "wiki", "latin1.txt"), "wb") as f:
        f.write(" \n = Article = \n \n caf\xe9 \n".encode("latin-1"))
    # Articles 0..9 after the script's shuffle with --seed 1: the two that
    # land in the valid split get one segment each, so that train has
    # triples and valid none (the failure comes after train is computed).
    order = list(range(10))
    random.Random(1).shuffle(order)
    write_corpus(os.path.join(d, "wiki", "novalid.txt"), 0, 10, single=set(order[2:4]))
    os.mkdir(os.path.join(d, "sub"))
    os.symlink("c.en", os.path.join(d, "link.en"))
    for script, args in ((TP, ["--src", "c.en", "--tgt", "c.de", "--output", "pairs.tsv"]),
                         (LT, LT_INPUTS + LT_ARGS + ["--output", "lt"]),
                         (ML, ML_ARGS + ["--output", "ml"])):
        status, _, err = run_script(d, script, args)
        assert status == 0, f"fixture: {script}: {err}"


def snapshot(d):
    """{relative path (bytes): what it is} of everything under `d`, the
    content of regular files as a hash (FIFOs are not opened)."""
    seen = {}
    base = os.fsencode(d)
    for top, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, base)
            st = os.lstat(path)
            if os.path.islink(path):
                seen[rel] = b"link " + os.readlink(path)
            elif os.path.isdir(path):
                seen[rel] = b"dir"
            elif not os.path.isfile(path):
                seen[rel] = b"special %o" % st.st_mode
            else:
                with open(path, "rb") as f:
                    seen[rel] = hashlib.sha1(f.read()).hexdigest().encode()
    return seen


def output_set(d, folder, names):
    """{name: hash} of the files `names` in `folder` under `d`."""
    return {n: snapshot(d).get(os.fsencode(os.path.join(folder, n))) for n in names}


ML_FILES = ["train.tsv", "valid.tsv", "test.tsv", "words.txt"]
LT_FILES = ["train.tsv", "valid.tsv", "test.tsv"]


# ------------------------------------------------------------------ table ----
# name, script, args (str or bytes), status, text of the error line (or of
# stdout for status 0), paths that may change (besides what `setup` made),
# and options: setup(d) before the run, limit (RLIMIT_FSIZE), stdout (file),
# same_as: (folder, reference args) -- the folder's files must equal a fresh
# run of the reference args into an empty folder.
LEFTOVER = {}


def leftover(folder, name):
    """setup: a temporary of `name` as a killed run would have left it."""
    def setup(d):
        path = os.path.join(d, folder, "." + name + TMP_TAG.decode() + str(dead_pid()))
        with open(path, "w") as f:
            f.write("half a file")
        LEFTOVER["path"] = path
    return setup


ROWS = [
    # make_translation_pairs.py
    ("pairs: a new output", TP, ["--src", "c.en", "--tgt", "c.de", "--output", "new.tsv"], 0,
     "new.tsv:", ["new.tsv"], dict(same_as=("new.tsv", "pairs.tsv"))),
    ("pairs: replace the earlier output", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "pairs.tsv", "--seed", "2"], 0,
     "pairs.tsv:", ["pairs.tsv"], {}),
    ("pairs: output is --src", TP, ["--src", "c.en", "--tgt", "c.de", "--output", "c.en"], 1,
     "the output is the input c.en", [], {}),
    ("pairs: output is --tgt by ../", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "sub/../c.de"], 1,
     "the output is the input c.de", [], {}),
    ("pairs: output is a symlink to --src", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "link.en"], 1,
     "the output is the input c.en", [], {}),
    ("pairs: output is --src by absolute path", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "@/c.en"], 1,
     "the output is the input", [], {}),
    ("pairs: output folder missing", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "missing/x.tsv"], 1,
     "the folder missing does not exist", [], {}),
    ("pairs: output is a directory", TP, ["--src", "c.en", "--tgt", "c.de", "--output", "sub"],
     1, "sub: it is a directory", [], {}),
    ("pairs: output under /proc", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "/proc/self/no/x.tsv"], 1,
     "cannot write /proc/self/no/x.tsv", [], {}),
    ("pairs: input missing", TP, ["--src", "none.en", "--tgt", "c.de", "--output", "x.tsv"], 1,
     "cannot read none.en: No such file", [], {}),
    ("pairs: input is a directory", TP, ["--src", "sub", "--tgt", "c.de", "--output", "x.tsv"],
     1, "sub: it is a directory", [], {}),
    ("pairs: input /dev/zero", TP, ["--src", "/dev/zero", "--tgt", "c.de", "--output", "x.tsv"],
     1, "/dev/zero: it is a character device", [], {}),
    ("pairs: input a FIFO", TP, ["--src", "fifo", "--tgt", "c.de", "--output", "x.tsv"], 1,
     "fifo: it is a FIFO", [], {}),
    ("pairs: input not UTF-8", TP, ["--src", "bad.en", "--tgt", "c.de", "--output", "x.tsv"], 1,
     "bad.en:3: invalid UTF-8", [], {}),
    ("pairs: inputs of different lengths", TP,
     ["--src", "c.en", "--tgt", "short.de", "--output", "x.tsv"], 1, "has 40 lines", [], {}),
    ("pairs: no pair to write", TP,
     ["--src", "blank.en", "--tgt", "blank.de", "--output", "x.tsv"], 1, "nothing written", [],
     {}),
    ("pairs: output name not UTF-8", TP,
     [b"--src", b"c.en", b"--tgt", b"c.de", b"--output", b"caf\xe9\n.tsv"], 0,
     "caf\\xe9\\x0a.tsv:", [b"caf\xe9\n.tsv"], {}),
    ("pairs: input name not UTF-8, missing", TP,
     [b"--src", b"caf\xe9.en", b"--tgt", b"c.de", b"--output", b"x.tsv"], 1,
     "cannot read caf\\xe9.en", [], {}),
    ("pairs: --seed not a number", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "x.tsv", "--seed", "x"], 2,
     "argument --seed", [], {}),
    ("pairs: a full disk (ulimit -f)", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "pairs.tsv", "--seed", "2"], 1,
     "cannot write pairs.tsv: File too large", [], dict(limit=1000)),
    ("pairs: standard output full", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "pairs.tsv", "--seed", "2"], 1,
     "cannot write standard output", ["pairs.tsv"], dict(stdout="/dev/full")),
    ("pairs: a killed run's temporary is removed", TP,
     ["--src", "c.en", "--tgt", "c.de", "--output", "pairs.tsv", "--seed", "2"], 0,
     "pairs.tsv:", ["pairs.tsv"], dict(setup=leftover(".", "pairs.tsv"))),

    # make_multilabel_tsv.py
    ("multilabel: --train -1", ML, ["--output", "ml", "--train", "-1"], 2,
     "argument --train: -1: must be at least 1", [], {}),
    ("multilabel: --valid 0", ML, ["--output", "ml", "--valid", "0"], 2, "argument --valid",
     [], {}),
    ("multilabel: --test 1.5", ML, ["--output", "ml", "--test", "1.5"], 2, "argument --test",
     [], {}),
    ("multilabel: --output missing", ML, ["--train", "5"], 2, "--output", [], {}),
    ("multilabel: output is a file", ML, ["--output", "c.en"] + ML_ARGS, 1,
     "c.en: it exists and is not a directory", [], {}),
    ("multilabel: output under /proc", ML, ["--output", "/proc/self/no/ml"] + ML_ARGS, 1,
     "cannot create the directory /proc/self/no/ml", [], {}),
    ("multilabel: replace the earlier set", ML, ["--output", "ml", "--seed", "2"] + ML_ARGS, 0,
     "", ["ml/train.tsv", "ml/valid.tsv", "ml/test.tsv"],
     dict(same_as=("ml", ML_ARGS + ["--seed", "2"]))),
    ("multilabel: missing folders are made", ML, ["--output", "new/deeper/ml"] + ML_ARGS, 0, "",
     ["new", "new/deeper", "new/deeper/ml"] + [f"new/deeper/ml/{n}" for n in ML_FILES],
     dict(same_as=("new/deeper/ml", ML_ARGS))),
    ("multilabel: a full disk keeps the earlier set", ML,
     ["--output", "ml", "--seed", "2", "--train", "3000"], 1, "File too large", [],
     dict(limit=20000)),
    ("multilabel: a full disk makes no folder", ML,
     ["--output", "new/ml", "--train", "3000"], 1, "File too large", [], dict(limit=20000)),
    ("multilabel: a killed run's temporary is removed", ML,
     ["--output", "ml", "--seed", "2"] + ML_ARGS, 0, "",
     ["ml/train.tsv", "ml/valid.tsv", "ml/test.tsv"], dict(setup=leftover("ml", "valid.tsv"))),

    # make_long_triplets.py
    ("triplets: replace the earlier set", LT,
     LT_INPUTS + LT_ARGS + ["--output", "lt", "--seed", "2"], 0, "-> lt/test.tsv",
     ["lt/" + n for n in LT_FILES],
     dict(same_as=("lt", LT_INPUTS + LT_ARGS + ["--seed", "2"]))),
    ("triplets: an output file is an input", LT,
     ["--input", "lt/train.tsv"] + LT_ARGS + ["--output", "lt"], 1,
     "lt/train.tsv: the output is the input", [], {}),
    ("triplets: an output file is an input by ../", LT,
     LT_INPUTS + ["--input", "lt/valid.tsv"] + LT_ARGS + ["--output", "sub/../lt"], 1,
     "the output is the input lt/valid.tsv", [], {}),
    ("triplets: output is the input file", LT,
     LT_INPUTS + LT_ARGS + ["--output", "wiki/test.txt"], 1, "is not a directory", [], {}),
    ("triplets: input missing", LT, ["--input", "wiki/none.txt"] + LT_ARGS + ["--output", "lt"],
     1, "cannot read wiki/none.txt", [], {}),
    ("triplets: input is a directory", LT, ["--input", "wiki"] + LT_ARGS + ["--output", "lt"],
     1, "wiki: it is a directory", [], {}),
    ("triplets: input /dev/zero", LT, ["--input", "/dev/zero"] + LT_ARGS + ["--output", "lt"],
     1, "character device", [], {}),
    ("triplets: input /proc/self/status", LT,
     ["--input", "/proc/self/status"] + LT_ARGS + ["--output", "lt"], 1,
     "/proc/self/status:1: text before", [], {}),
    ("triplets: input not UTF-8", LT,
     ["--input", "wiki/latin1.txt"] + LT_ARGS + ["--output", "lt"], 1,
     "wiki/latin1.txt:4: invalid UTF-8", [], {}),
    ("triplets: input name not UTF-8", LT,
     [b"--input", b"wiki/\xff.txt", b"--output", b"lt"], 1, "cannot read wiki/\\xff.txt", [],
     {}),
    ("triplets: the valid split fails after train", LT,
     ["--input", "wiki/novalid.txt", "--output", "lt", "--seed", "1"] + LT_ARGS, 1,
     "split valid: no article", [], {}),
    ("triplets: a full disk keeps the earlier set", LT,
     LT_INPUTS + LT_ARGS + ["--output", "lt", "--seed", "2"], 1, "File too large", [],
     dict(limit=30000)),
    ("triplets: --per-article 0", LT, LT_INPUTS + ["--per-article", "0", "--output", "lt"], 2,
     "--per-article 0", [], {}),
    ("triplets: --segment-bytes -5", LT,
     LT_INPUTS + ["--segment-bytes", "-5", "--output", "lt"], 2, "--segment-bytes -5", [], {}),
    ("triplets: --valid 0", LT, LT_INPUTS + ["--valid", "0", "--output", "lt"], 2,
     "argument --valid", [], {}),
    ("triplets: too few articles", LT,
     LT_INPUTS + ["--segment-bytes", "100000", "--output", "lt"], 1, "0 articles", [], {}),
    ("triplets: a killed run's temporary is removed", LT,
     LT_INPUTS + LT_ARGS + ["--output", "lt", "--seed", "2"], 0, "",
     ["lt/" + n for n in LT_FILES], dict(setup=leftover("lt", "test.tsv"))),
]


class DataScripts(unittest.TestCase):
    """One subTest per row of ROWS."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.fixture = os.path.join(cls.tmp.name, "fixture")
        os.mkdir(cls.fixture)
        make_fixture(cls.fixture)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_rows(self):
        self.assertGreaterEqual(len(ROWS), 20)
        for number, row in enumerate(ROWS):
            with self.subTest(row=row[0]):
                self.check_row(number, *row)

    def check_row(self, number, name, script, args, status, expect, changes, options):
        d = os.path.join(self.tmp.name, f"row{number}")
        shutil.copytree(self.fixture, d, symlinks=True)
        os.mkfifo(os.path.join(d, "fifo"))  # copytree copies no FIFO
        args = [a.replace("@", d) if isinstance(a, str) else a for a in args]
        if "setup" in options:
            options["setup"](d)
        before = snapshot(d)
        code, out, err = run_script(d, script, args, options.get("limit"), options.get("stdout"))
        after = snapshot(d)
        what = f"{name}: exit {code}, stdout {out!r}, stderr {err!r}"
        self.assertEqual(code, status, what)
        self.assertNotIn("Traceback", err, what)
        if status:
            lines = err.split("\n")
            self.assertEqual(len(lines), 2, what)  # one line and its "\n"
            self.assertEqual(lines[1], "", what)
            self.assertTrue(lines[0].startswith(f"{script}: error: "), what)
            self.assertIn(expect, lines[0], what)
        else:
            self.assertEqual(err, "", what)
            self.assertIn(expect, out, what)
        allowed = {os.fsencode(c) for c in changes}
        if "setup" in options:
            allowed.add(os.fsencode(os.path.relpath(LEFTOVER["path"], d)))
            self.assertFalse(os.path.exists(LEFTOVER["path"]), f"{name}: the leftover stays")
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        self.assertEqual(changed - allowed, set(), f"{name}: changed what it should not")
        self.assertEqual([p for p in after if TMP_TAG in p], [], f"{name}: a temporary stays")
        if "same_as" in options:
            folder, reference = options["same_as"]
            if isinstance(reference, str):  # a file of the fixture
                self.assertEqual(after[os.fsencode(folder)], before[os.fsencode(reference)], name)
            else:  # wholly the new set: as a run into an empty folder makes it
                fresh = os.path.join(self.tmp.name, f"fresh{number}")
                shutil.copytree(self.fixture, fresh, symlinks=True)
                code, _, err = run_script(fresh, script, reference + ["--output", "out"])
                self.assertEqual(code, 0, err)
                names = LT_FILES if script == LT else ML_FILES
                self.assertEqual(output_set(d, folder, names), output_set(fresh, "out", names),
                                 f"{name}: not wholly the new set")
        for folder, names in (("ml", ML_FILES), ("lt", LT_FILES)):
            # Every earlier set is wholly old or wholly new.
            old = output_set(self.fixture, folder, names)
            now = output_set(d, folder, names)
            if now != old:
                for n in names:
                    if n != "words.txt":
                        self.assertNotEqual(now[n], old[n], f"{name}: {folder} is mixed")
        shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main(verbosity=1)
