#!/usr/bin/env python3
"""rotor against its PyTorch / Hugging Face peers on the CPU, every tiny
config side by side (docs/performance.md, "CPU: rotor against PyTorch 2.x").

For each tiny config of configs/ it makes the data the config needs (in the
work directory: the numbers task, TSVs, EHR cohorts; WikiText-2 and Multi30k
from ../shared/data), then, for --rounds rounds, runs `rotor bench train
CONFIG --json` and, on that JSON, scripts/bench/train_peer.py --device cpu
--mode eager (the same model size, optimizer and micro-batch shapes),
alternately, so that both see the same machine. It prints one markdown row
a config: milliseconds per update (the median over the rounds) of rotor and
of the peer, and rotor's speed relative to the peer's (peer ms / rotor ms:
above 1, rotor is faster). A config without a Hugging Face twin gets rotor's
time alone. A linear-attention config (the Performers) gets a second row:
its twin from performer-pytorch (train_peer.py --peer performer), the
softmax row being a reference point rather than a twin.

  python3 scripts/bench/cpu_peers.py [--rotor build/rotor] [--python PY]
      [--configs quickstart/numbers_sinusoidal,lm/wikitext2_char_tiny,...]
      [--steps 20] [--warmup 3] [--rounds 2] [--work runs/cpu_peers]
      [--markdown table.md] [--rotor-env K=V ...] [--baseline OLD/rotor]

--baseline: another rotor binary (an earlier build, for before-and-after
figures) timed in the same rounds, after rotor and before the peer; the
table gains its milliseconds per update and rotor's speed relative to it
(baseline ms / rotor ms). When the baseline refuses a key added since it
was built, it runs once more on a copy of the config without that key
(the table says which); a config it still cannot run gets rotor's one-line
error there.

--python: the interpreter of the peers; default .venv-hf5's (PyPI's torch
2.x and transformers 5.x, scripts/deps.sh), else .venv's, else python3.
Peers and rotor use every core (OMP_NUM_THREADS unset unless given in the
environment). Exit status 0 when the table was printed; 1 when rotor cannot
run; 2 on bad usage.
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The tiny configs, and the data each needs ("how" names a recipe below).
CONFIGS = [
    ("quickstart/numbers_sinusoidal", "numbers"),
    ("quickstart/numbers_rope", "numbers"),
    ("lm/wikitext2_char_tiny", "wikitext"),
    ("lm/wikitext2_tiny", "wikitext"),
    ("lm/wikitext2_char_tiny_performer_elu1", "wikitext"),
    ("lm/wikitext2_char_tiny_performer_favor", "wikitext"),
    ("mlm/bert_tiny", "wikitext"),
    ("mlm/roformer_tiny", "wikitext"),
    ("mlm/roformer_tiny_linear", "wikitext"),
    ("mlm/roformer_tiny_linear_favor", "wikitext"),
    ("pairs/multi30k_tiny", "pairs"),
    ("multilabel/tiny", "multilabel"),
    ("ehr/behrt_mlm_tiny", "ehr_mlm"),
    ("ehr/behrt_nextvisit_tiny", "ehr_nextvisit"),
    ("ehr/corebehrt_nextvisit_tiny", "ehr_nextvisit"),
]


def fail(msg, code=1):
    print(f"cpu_peers: error: {msg}", file=sys.stderr)
    sys.exit(code)


def run(cmd, env=None, quiet=True):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n"
                           f"{r.stderr.strip()[-2000:]}")
    return r.stdout


def default_python():
    for cand in (ROOT / ".venv-hf5/bin/python3", ROOT / ".venv/bin/python3"):
        if cand.exists():
            return str(cand)
    return "python3"


class Data:
    """Makes (once) the data of each recipe under `work`; returns --set lines."""

    def __init__(self, rotor, work, shared):
        self.rotor, self.work, self.shared = rotor, work, shared
        self.made = {}

    def sets(self, how):
        if how not in self.made:
            self.made[how] = getattr(self, "make_" + how)()
        return self.made[how]

    def make_numbers(self):
        d = self.work / "numbers"
        if not (d / "train.en").exists():
            run([self.rotor, "synth", "numbers-en-de", "--output", d])
        return [f"data.train={d}/train", f"data.valid={d}/valid"]

    def make_wikitext(self):
        w = self.shared / "wikitext-2"
        if not (w / "test.txt").exists():
            raise RuntimeError(f"{w}/test.txt is missing (../shared/data)")
        return [f"data.train={w}/test.txt", f"data.valid={w}/valid.txt"]

    def make_pairs(self):
        d = self.work / "pairs"
        m = self.shared / "multi30k"
        if not (m / "train.en").exists():
            raise RuntimeError(f"{m}/train.en is missing (../shared/data)")
        d.mkdir(parents=True, exist_ok=True)
        for split, src in (("train", "train"), ("valid", "val")):
            if not (d / f"{split}.tsv").exists():
                run([sys.executable, ROOT / "scripts/data/make_translation_pairs.py",
                     "--src", m / f"{src}.en", "--tgt", m / f"{src}.de",
                     "--output", d / f"{split}.tsv"])
        if not (d / "spm.model").exists():
            run([self.rotor, "spm-train", "--input", m / "train.en", "--input", m / "train.de",
                 "--model-prefix", d / "spm", "--vocab-size", "8000",
                 "--user-defined-symbols", "[MASK],[CLS],[SEP]"])
        return [f"data.train={d}/train.tsv", f"data.valid={d}/valid.tsv", "data.test=",
                f"data.spm_model={d}/spm.model", "model.init_from="]

    def make_multilabel(self):
        d = self.work / "multilabel"
        if not (d / "train.tsv").exists():
            run([sys.executable, ROOT / "scripts/data/make_multilabel_tsv.py", "--output", d])
        if not (d / "spm.model").exists():
            run([self.rotor, "spm-train", "--input", d / "words.txt", "--model-prefix",
                 d / "spm", "--vocab-size", "80", "--user-defined-symbols",
                 "[MASK],[CLS],[SEP]"])
        return [f"data.train={d}/train.tsv", f"data.valid={d}/valid.tsv",
                f"data.test={d}/test.tsv", f"data.spm_model={d}/spm.model"]

    def _ehr(self, labels):
        synth = self.work / "ehr_synth"
        if not (synth / "events.csv").exists():
            run([self.rotor, "synth", "ehr", "--output", synth, "--patients", "2000"])
        d = self.work / ("ehr_nextvisit" if labels else "ehr_mlm")
        if not (d / "ehr.json").exists():
            cmd = [self.rotor, "prepare-ehr", "--events", synth / "events.csv", "--patients",
                   synth / "patients.csv", "--output", d]
            if labels:
                cmd += ["--labels", "next_visit"]
            run(cmd)
        return [f"data.train={d}/train", f"data.valid={d}/valid", f"data.test={d}/test"]

    def make_ehr_mlm(self):
        return self._ehr(False)

    def make_ehr_nextvisit(self):
        return self._ehr(True) + ["model.init_from="]


def without_unknown_key(error, config, dest):
    """When rotor's error says `CONFIG:LINE: unknown key a.b.c`, writes the
    config without that key to dest and returns the key; else None. For the
    baseline's timing only: a key added since it was built (an initial
    value such as model.classifier_bias, not a shape) is left out."""
    line = error.strip().splitlines()[-1] if error.strip() else ""
    marker = "unknown key "
    if marker not in line:
        return None
    key = line.split(marker, 1)[1].split()[0].strip("'\"")
    try:
        import yaml
    except ImportError:
        return None
    doc = yaml.safe_load(open(config))
    node, parts = doc, key.split(".")
    for p in parts[:-1]:
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    if not isinstance(node, dict) or parts[-1] not in node:
        return None
    del node[parts[-1]]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(doc, sort_keys=False))
    return key


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rotor", default=str(ROOT / "build/rotor"))
    ap.add_argument("--python", default=None)
    ap.add_argument("--configs", default=",".join(c for c, _ in CONFIGS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default=str(ROOT / "runs/cpu_peers"))
    ap.add_argument("--shared", default=str(ROOT.parent / "shared/data"))
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--baseline", help="an earlier rotor binary, timed alongside (before/after)")
    ap.add_argument("--rotor-env", action="append", default=[], metavar="K=V",
                    help="an environment variable for rotor's runs only (OMP_NUM_THREADS=1)")
    a = ap.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.rounds < 1:
        fail("--steps and --rounds must be at least 1, --warmup at least 0", 2)
    known = dict(CONFIGS)
    wanted = [c for c in a.configs.split(",") if c]
    for c in wanted:
        if c not in known:
            fail(f"--configs: unknown config {c} (known: {', '.join(known)})", 2)
    rotor = pathlib.Path(a.rotor)
    if not os.access(rotor, os.X_OK):
        fail(f"no rotor at {rotor} (--rotor PATH)")
    baseline = pathlib.Path(a.baseline) if a.baseline else None
    if baseline and not os.access(baseline, os.X_OK):
        fail(f"--baseline: no executable at {baseline}", 2)
    python = a.python or default_python()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    data = Data(rotor, work, pathlib.Path(a.shared))
    versions = subprocess.run(
        [python, "-c", "import torch, transformers; print(torch.__version__, "
         "transformers.__version__)"], capture_output=True, text=True).stdout.split()
    header = "| config | peer | rotor ms/update | peer ms/update | rotor / peer speed |"
    rule = "|---|---|---|---|---|"
    if baseline:
        header += " baseline ms/update | rotor / baseline speed |"
        rule += "---|---|"
    header += "\n" + rule
    rows = []
    for name in wanted:
        config = ROOT / "configs" / f"{name}.yaml"
        try:
            sets = data.sets(known[name])
        except RuntimeError as e:
            rows.append(f"| {name} | | not run: {str(e).splitlines()[0]} | | |")
            print(rows[-1], flush=True)
            continue
        out = work / name.replace("/", "_")
        sets = sets + [f"output_dir={out}/run", "device=cpu", "train.log_interval=100000",
                       "train.valid_interval=0"]
        rotor_ms, peer_ms, peer, absent = [], [], "", ""
        base_ms, base_error, base_note = [], "", ""
        twin_ms, twin, twin_absent = [], "", ""
        rotor_env = dict(kv.split("=", 1) for kv in a.rotor_env)
        try:
            for r in range(a.rounds):
                bench_json = out / f"rotor_{r}.json"
                out.mkdir(parents=True, exist_ok=True)
                cmd = [rotor, "bench", "train", config, "--steps", a.steps, "--warmup", a.warmup,
                       "--json", bench_json]
                for s in sets:
                    cmd += ["--set", s]
                run(cmd, env=rotor_env)
                rotor_ms.append(json.load(open(bench_json))["step_ms"])
                if baseline and not base_error:
                    base_json = out / f"baseline_{r}.json"
                    cmd[0] = baseline
                    cmd[cmd.index("--json") + 1] = base_json
                    if base_note:  # an earlier round found the key it refuses
                        cmd[cmd.index(config)] = out / "baseline.yaml"
                    try:
                        try:
                            run(cmd, env=rotor_env)
                        except RuntimeError as e:
                            # An older rotor refuses a key added since: the
                            # config without it (said in the table).
                            old = None if base_note else without_unknown_key(
                                str(e), config, out / "baseline.yaml")
                            if not old:
                                raise
                            base_note = f" (without {old})"
                            cmd[cmd.index(config)] = out / "baseline.yaml"
                            run(cmd, env=rotor_env)
                        base_ms.append(json.load(open(base_json))["step_ms"])
                    except RuntimeError as e:
                        base_error = "failed: " + str(e).splitlines()[-1][:120].replace("|", "/")
                peer_json = out / f"peer_{r}.json"
                run([python, ROOT / "scripts/bench/train_peer.py", "--bench", bench_json,
                     "--device", "cpu", "--mode", "eager", "--json", peer_json])
                p = json.load(open(peer_json))
                peer = p.get("peer", "")
                if "absent" in p:
                    absent = p["absent"]
                else:
                    peer_ms.append(p["step_ms"])
                attention = json.load(open(bench_json))["model"].get("attention") or {}
                if attention.get("kind") == "linear":
                    twin_json = out / f"twin_{r}.json"
                    run([python, ROOT / "scripts/bench/train_peer.py", "--bench", bench_json,
                         "--device", "cpu", "--mode", "eager", "--peer", "performer",
                         "--json", twin_json])
                    t = json.load(open(twin_json))
                    twin = f"{t.get('peer', '')} (performer-pytorch {t.get('performer_pytorch', '?')})"
                    if "absent" in t:
                        twin_absent = t["absent"]
                    else:
                        twin_ms.append(t["step_ms"])
        except RuntimeError as e:
            rows.append(f"| {name} | {peer} | failed: {str(e).splitlines()[0]} | | |")
            print(rows[-1], flush=True)
            continue
        r_ms = statistics.median(rotor_ms)
        base = ""
        if baseline:
            if base_ms:
                b_ms = statistics.median(base_ms)
                base = f" {b_ms:.1f}{base_note} | {b_ms / r_ms:.2f}x |"
            else:
                base = f" {base_error or 'not run'} | |"
        if peer_ms:
            p_ms = statistics.median(peer_ms)
            rows.append(f"| {name} | {peer} | {r_ms:.1f} | {p_ms:.1f} | {p_ms / r_ms:.2f}x |{base}")
        else:
            rows.append(f"| {name} | none: {absent} | {r_ms:.1f} | | |{base}")
        print(rows[-1], flush=True)
        if twin_ms:
            t_ms = statistics.median(twin_ms)
            rows.append(f"| {name} | {twin} | {r_ms:.1f} | {t_ms:.1f} | {t_ms / r_ms:.2f}x |"
                        + (" | |" if baseline else ""))
            print(rows[-1], flush=True)
        elif twin_absent:
            rows.append(f"| {name} | twin none: {twin_absent} | {r_ms:.1f} | | |"
                        + (" | |" if baseline else ""))
            print(rows[-1], flush=True)
        shutil.rmtree(out / "run", ignore_errors=True)
    info = run([rotor, "info"]).splitlines()
    table = "\n".join([
        f"rotor bench train against {os.path.basename(python)}: torch "
        f"{versions[0] if versions else '?'}, transformers {versions[1] if len(versions) > 1 else '?'}; "
        f"{a.rounds} round(s) of {a.steps} timed updates after {a.warmup} warm-up, alternately; "
        f"medians; {os.cpu_count()} CPU cores; rotor: {info[0] if info else '?'}"
        + (f"; baseline: {baseline}" if baseline else ""), "",
        header] + rows) + "\n"
    print("\n" + table)
    if a.markdown:
        pathlib.Path(a.markdown).write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
