#!/usr/bin/env python3
"""Every registered position encoding, side by side, on the same tiny runs.

    python3 scripts/compare_positions.py [--rotor build-cpu/rotor] [--out runs/compare_positions]
        [--tasks translation,mlm,lm] [--encodings rope,t5,...] [--updates N] [--seed N]
        [--lengths 128,256,512,1024] [--eval-bytes 131072] [--set KEY=VALUE]...
        [--test-lines N] [--valid-bytes N]   (smaller scoring, for smoke runs)
    python3 scripts/compare_positions.py --plot-only [--out DIR]   (the PNG again, from the JSON)

The encodings are the ones the binary accepts for model.position (read from
its "expected one of a | b | ..." error), so a newly registered encoding
joins without a change here; --encodings picks a subset. The tasks, each a
shipped tiny config trained once per encoding with only model.position
changed (same seed, updates and data):

  translation  configs/quickstart/numbers_sinusoidal.yaml, the numbers
               translator of the quickstart. Data: data/numbers, written by
               `rotor synth numbers-en-de --seed 1` into OUT/data/numbers
               where the checkout has none. Scored as scripts/quickstart.sh
               and docs/results.md do: `rotor translate` with the last
               checkpoint on test and test_long, `rotor bleu --tokenize char`
               (a German number is one compound word: word BLEU is 0 for
               every system) and exact match (lines equal to the reference).
  mlm          configs/mlm/roformer_tiny.yaml, the tiny masked LM on
               WikiText-2 (bert_tiny.yaml is the same file with another
               position, so either gives the same runs); valid loss and
               accuracy.
  lm           configs/lm/wikitext2_char_tiny.yaml, the byte-level causal
               LM, also scored by `rotor eval --lengths` at 1x, 2x, 4x and 8x
               its training length (data.seq_len 128: 128,256,512,1024; see
               --lengths) on the first --eval-bytes bytes of its valid file,
               cut back to the last line break (the slice of docs/results.md,
               "Loss against length").

model.max_positions of the lm runs: the largest evaluation length (at least
data.seq_len), for every encoding. A position table (learned, sinusoidal)
must have a row for every position scored, and setting it for all encodings
keeps one model shape per task. Training never reads rows past data.seq_len:
sinusoidal rows are fixed, so its model is the one a 128-row table gives;
learned rows past it keep their random initialization, so learned's loss
past 1x shows that it cannot extrapolate (with a 128-row table `rotor eval`
would stop at 128 instead).

Outputs in OUT (default runs/compare_positions under the repository), for
the runs this invocation names (--tasks x --encodings):
  results.md             one Markdown table, a row per (task, encoding), with
                         notes: final valid loss (and accuracy), BLEU and
                         exact match, loss at each length, ms per update (the
                         training loop less its validations, over the
                         updates), train s (the loop with validations);
  compare_positions.json everything: settings, encodings, every run's
                         figures, valid and train loss curves, eval output;
  compare_positions.png  valid (dashed) and train (solid) loss against the
                         update per task, and the lm's loss against length.
                         Needs matplotlib; without it in this python3, an
                         interpreter that has it (/usr/bin/python3 with
                         Debian's python3-matplotlib, .venv) draws it, else
                         the PNG is skipped with a note;
  TASK/ENCODING/         each run's directory (train.log, metrics.jsonl,
                         checkpoints, test.hyp, test_long.hyp,
                         eval_lengths.json, compare_done.json);
  logs/TASK-ENCODING.*   what rotor printed; data/  the data made here.

An encoding that rotor refuses for a task (a one-line "rotor: error: ...",
no checkpoint written) gets the row "refused: <that line>"; a run that fails
later (diverged, translate or eval failed) gets "failed: <line>" and the
script exits 1 once everything else is done.

Resume: runs go one at a time, in the order of --tasks, then of the
encodings. Running the same command again skips every run that has
TASK/ENCODING/compare_done.json (written after its scoring). A run
interrupted midway (Ctrl-C: rotor saves a checkpoint on SIGINT and SIGTERM)
continues with `rotor train --resume` when its directory has
checkpoint_last; a run whose training had ended goes straight to scoring;
one without a checkpoint starts again with --overwrite (its files moved
aside by rotor). Refused and failed runs are tried again. OUT/settings.json
holds the options that change results (--updates, --seed, --lengths,
--eval-bytes, --test-lines, --valid-bytes, --set); another value of one in
the same OUT is refused: use another --out.

--set adds an override to every run (a refused one is a row like any
other). --test-lines translates only the first N lines of each test split;
--valid-bytes validates mlm and lm on the first N bytes of their valid file
(the same slice for every encoding): both only make a smoke run fast, e.g.
tests/scripts/test_compare_positions.sh:
    --updates 3 --encodings rope,t5 --tasks translation,lm --lengths 128,256
    --eval-bytes 8192 --test-lines 50 --valid-bytes 16384
"""
import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import plot_curves  # noqa: E402  (metrics.jsonl reading)
import plot_length  # noqa: E402  (rotor eval --json reading)

TASKS = {
    "translation": "configs/quickstart/numbers_sinusoidal.yaml",
    "mlm": "configs/mlm/roformer_tiny.yaml",
    "lm": "configs/lm/wikitext2_char_tiny.yaml",
}
TEST_SPLITS = ("test", "test_long")
DONE = "compare_done.json"
JSON_NAME = "compare_positions.json"
PNG_NAME = "compare_positions.png"


def fail(msg):
    sys.exit(f"compare_positions: {msg}")


def say(msg):
    print(msg, flush=True)


def rotor_output(cmd):
    """Runs a short rotor command in the repository root: (exit status, stdout + stderr)."""
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def run_logged(cmd, log_path, stdout_path=None):
    """Runs cmd in the repository root, its output into files: (exit status, seconds).
    Ctrl-C reaches rotor too (same process group), which saves a checkpoint and
    exits: it is waited for, then the script stops."""
    start = time.monotonic()
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        out = open(stdout_path, "w", encoding="utf-8") if stdout_path else log
        try:
            p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=log)
            interrupted = False
            while True:
                try:
                    rc = p.wait()
                    break
                except KeyboardInterrupt:
                    interrupted = True
        finally:
            if stdout_path:
                out.close()
    if interrupted:
        fail("interrupted; run the same command again to continue where it stopped")
    return rc, time.monotonic() - start


def error_line(log_path, rc=1):
    """rotor's one-line error in the last command of a log, else its last line."""
    if rc < 0:
        return f"killed by signal {-rc}"
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        return "(no output)"
    starts = [i for i, ln in enumerate(lines) if ln.startswith("$ ")]
    lines = lines[starts[-1] + 1:] if starts else lines
    errors = [ln for ln in lines if ln.startswith("rotor: error:")]
    return errors[-1] if errors else (lines[-1] if lines else "(no output)")


def registered_encodings(rotor, config):
    """The values of model.position that this rotor accepts, in its order."""
    rc, out = rotor_output([rotor, "train", config, "--set", "model.position=not-an-encoding",
                            "--dump-config"])
    m = re.search(r"model\.position: expected one of (.+?), got", out)
    if rc == 0 or not m:
        fail(f"{rotor} did not list its position encodings for an invalid model.position "
             f"(exit {rc}): {out.strip()[-400:]}")
    return [e.strip() for e in m.group(1).split("|") if e.strip()]


def resolved_config(rotor, config, sets, encodings=(), user=()):
    """The config rotor would train, as {"section.key": "value"} (two levels). The user's
    overrides (--set) that hold for some encodings only (model.rope.*) are resolved with
    the first encoding that takes them, else left out: the runs show who refuses them."""
    tries = [sets] + [sets + [f"model.position={e}"] for e in encodings]
    for k, attempt in enumerate(tries + [[x for x in sets if x not in user]]):
        cmd = [rotor, "train", config, "--dump-config"]
        for s in attempt:
            cmd += ["--set", s]
        rc, out = rotor_output(cmd)
        if rc == 0:
            break
        if k == 0:
            first_error = out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"
    if rc != 0:
        fail(f"{config}: {first_error}")
    keys, section = {}, ""
    for line in out.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^( *)([A-Za-z0-9_]+):\s*(.*?)\s*$", line)
        if not m:
            continue
        indent, key, value = len(m.group(1)), m.group(2), m.group(3)
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if indent == 0:
            section = key
            if value:
                keys[key] = value
        elif indent == 2:
            keys[f"{section}.{key}"] = value
    return keys


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def trained_step(run_dir):
    """The update of run_dir's last checkpoint, and its trainer state (None: no checkpoint)."""
    state = read_json(os.path.join(run_dir, "checkpoint_last", "trainer_state.json"))
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        return None, None
    return state["step"], state


def validation_seconds(run_dir):
    """Seconds spent in validations, from train.log ("valid at update N | ... | S.Ss"); an
    update validated twice (repeated after a resume) counts once."""
    per_update = {}
    try:
        with open(os.path.join(run_dir, "train.log"), encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.search(r"\bvalid at update +(\d+) \|.*\| ([0-9.]+)s\s*$", line)
                if m:
                    per_update[int(m.group(1))] = float(m.group(2))
    except OSError:
        pass
    return sum(per_update.values())


def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def eval_slice(src, nbytes, dst):
    """The first nbytes of src cut back to its last line break (all of src when shorter)."""
    with open(src, "rb") as f:
        data = f.read(nbytes + 1)
    if len(data) > nbytes:
        data = data[:nbytes]
        cut = data.rfind(b"\n")
        if cut >= 0:
            data = data[:cut + 1]
    if not data:
        fail(f"{src}: empty")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    old = None
    if os.path.exists(dst):
        with open(dst, "rb") as f:
            old = f.read()
    if old != data:
        with open(dst + ".tmp", "wb") as f:
            f.write(data)
        os.replace(dst + ".tmp", dst)
    return len(data)


def head_lines(src, n, dst):
    with open(src, encoding="utf-8") as f:
        lines = f.readlines()
    if n:
        lines = lines[:n]
    with open(dst, "w", encoding="utf-8") as f:
        f.writelines(lines)
    return len(lines)


class Context:
    def __init__(self, args, out, rotor):
        self.args = args
        self.out = out
        self.rotor = rotor
        self.logs = os.path.join(out, "logs")
        self.numbers = None  # the numbers task's data directory
        self.lengths = []  # lm evaluation lengths
        self.max_positions = 0  # lm model.max_positions
        self.eval_input = None  # lm evaluation slice
        self.eval_bytes = 0
        self.eval_source = None
        self.valid_files = {}  # task -> its --valid-bytes slice of data.valid


def numbers_data(ctx):
    """data/numbers of the checkout, else OUT/data/numbers written by rotor synth (seed 1,
    as scripts/quickstart.sh)."""
    for d in (os.path.join(ROOT, "data", "numbers"), os.path.join(ctx.out, "data", "numbers")):
        if all(os.path.exists(os.path.join(d, f"{s}.{l}"))
               for s in ("train", "valid") + TEST_SPLITS for l in ("en", "de")):
            return d
    d = os.path.join(ctx.out, "data", "numbers")
    log = os.path.join(ctx.logs, "synth-numbers.log")
    say(f"writing the numbers task into {d} (rotor synth numbers-en-de --seed 1)")
    os.makedirs(os.path.dirname(d), exist_ok=True)
    rc, _ = run_logged([ctx.rotor, "synth", "numbers-en-de", "--output", d, "--seed", "1"], log)
    if rc != 0:
        fail(f"rotor synth numbers-en-de: {error_line(log, rc)}")
    return d


def task_sets(ctx, task):
    """The overrides of every run of a task (not model.position, not output_dir)."""
    a = ctx.args
    sets = []
    if a.seed is not None:
        sets.append(f"seed={a.seed}")
    if a.updates is not None:
        sets.append(f"train.max_updates={a.updates}")
    if task == "translation":
        sets += [f"data.train={ctx.numbers}/train", f"data.valid={ctx.numbers}/valid"]
    if task in ctx.valid_files:
        sets.append(f"data.valid={ctx.valid_files[task]}")
    if task == "lm":
        sets.append(f"model.max_positions={ctx.max_positions}")
    return sets + list(a.set)


def collect_metrics(rec, run_dir):
    """Figures of metrics.jsonl, checkpoint_last and train.log into rec."""
    _, rows = plot_curves.read_metrics(run_dir)
    vx, vy = plot_curves.series(rows, "valid", "loss")
    tx, ty = plot_curves.series(rows, "train", "loss")
    rec["valid_curve"] = [[x, y if math.isfinite(y) else None] for x, y in zip(vx, vy)]
    rec["train_curve"] = [[x, y if math.isfinite(y) else None] for x, y in zip(tx, ty)]
    valid = [r for r in rows if r.get("split") == "valid"]
    last = max(valid, key=lambda r: r["step"]) if valid else {}
    rec["valid_step"] = last.get("step")
    for key, field in (("valid_loss", "loss"), ("valid_accuracy", "accuracy"), ("valid_bpb", "bpb")):
        rec[key] = last.get(field)
    step, state = trained_step(run_dir)
    rec["updates"] = step
    rec["train_seconds"] = state.get("train_seconds") if state else None
    rec["valid_seconds"] = validation_seconds(run_dir)
    if step and finite(rec["train_seconds"]):
        loop = max(rec["train_seconds"] - rec["valid_seconds"], 0.0)
        rec["ms_per_update"] = 1000.0 * loop / step
    else:
        rec["ms_per_update"] = None


def score_translation(ctx, rec, run_dir, name):
    """rotor translate + rotor bleu --tokenize char + exact match on test and test_long."""
    rec["translation"] = {}
    for split in TEST_SPLITS:
        src, ref = (os.path.join(ctx.numbers, f"{split}.{l}") for l in ("en", "de"))
        if ctx.args.test_lines:
            n = ctx.args.test_lines
            src_cut = os.path.join(ctx.out, "data", f"numbers_{split}_{n}.en")
            ref_cut = os.path.join(ctx.out, "data", f"numbers_{split}_{n}.de")
            os.makedirs(os.path.dirname(src_cut), exist_ok=True)
            head_lines(src, n, src_cut)
            head_lines(ref, n, ref_cut)
            src, ref = src_cut, ref_cut
        hyp = os.path.join(run_dir, f"{split}.hyp")
        log = os.path.join(ctx.logs, f"{name}.translate.log")
        rc, secs = run_logged([ctx.rotor, "translate", "--checkpoint", run_dir, "--input", src,
                               "--output", hyp], log)
        if rc != 0:
            return f"rotor translate: {error_line(log, rc)}"
        log = os.path.join(ctx.logs, f"{name}.bleu.log")
        bleu_out = os.path.join(ctx.logs, f"{name}.bleu.txt")
        rc, _ = run_logged([ctx.rotor, "bleu", "--tokenize", "char", "--score-only", "--ref", ref, hyp],
                           log, stdout_path=bleu_out)
        if rc != 0:
            return f"rotor bleu: {error_line(log, rc)}"
        with open(bleu_out, encoding="utf-8") as f:
            bleu = float(f.read().strip())
        with open(hyp, encoding="utf-8") as f:
            hyps = [ln.rstrip("\n") for ln in f]
        with open(ref, encoding="utf-8") as f:
            refs = [ln.rstrip("\n") for ln in f]
        if len(hyps) != len(refs):
            return f"{hyp}: {len(hyps)} lines for {len(refs)} references"
        exact = 100.0 * sum(h == r for h, r in zip(hyps, refs)) / max(len(refs), 1)
        rec["translation"][split] = {"bleu_char": bleu, "exact": exact, "lines": len(refs),
                                     "decode_seconds": secs}
    return None


def score_lengths(ctx, rec, run_dir, name):
    """rotor eval --lengths on the evaluation slice."""
    out = os.path.join(run_dir, "eval_lengths.json")
    log = os.path.join(ctx.logs, f"{name}.eval.log")
    cmd = [ctx.rotor, "eval", "--checkpoint", run_dir, "--input", ctx.eval_input, "--lengths",
           ",".join(map(str, ctx.lengths)), "--json"]
    rc, secs = run_logged(cmd, log, stdout_path=out + ".tmp")
    if rc != 0:
        return f"rotor eval: {error_line(log, rc)}"
    os.replace(out + ".tmp", out)
    points, stopped = plot_length.read_eval(out, "loss")
    rec["lengths"] = [{"length": n, "loss": None if math.isnan(v) else v} for n, v in sorted(points.items())]
    rec["eval_stopped"] = stopped
    rec["eval_seconds"] = secs
    return None


def do_run(ctx, task, enc, config, updates, index, total):
    name = f"{task}-{enc}"
    run_dir = os.path.join(ctx.out, task, enc)
    rec = {"task": task, "position": enc, "config": config, "run_dir": run_dir, "status": "done",
           "error": None}
    head = f"[{index}/{total}] {task} {enc}:"
    done = read_json(os.path.join(run_dir, DONE))
    if isinstance(done, dict) and done.get("status") == "done":
        say(f"{head} done before, skipped")
        return done
    sets = task_sets(ctx, task) + [f"model.position={enc}", f"output_dir={run_dir}"]
    cmd = [ctx.rotor, "train", config]
    for s in sets:
        cmd += ["--set", s]
    step, _ = trained_step(run_dir)
    if step is not None and step >= updates:
        say(f"{head} trained to update {step} before; scoring")
        cmd = None
    elif step is not None:
        say(f"{head} resuming from update {step} of {updates}")
        cmd.append("--resume")
    elif os.path.isdir(run_dir):
        say(f"{head} restarting ({run_dir} has no checkpoint; rotor moves its files aside)")
        cmd.append("--overwrite")
    else:
        say(f"{head} training {updates} updates")
    rec["command"] = None if cmd is None else " ".join(cmd[1:])
    wall = 0.0
    os.makedirs(ctx.logs, exist_ok=True)
    log = os.path.join(ctx.logs, f"{name}.train.log")
    if cmd is not None:
        rc, wall = run_logged(cmd, log)
        if rc != 0:
            line = error_line(log, rc)
            # refused: rotor's one-line error before it wrote a checkpoint
            refused = line.startswith("rotor: error:") and trained_step(run_dir)[0] is None
            rec["status"] = "refused" if refused else "failed"
            rec["error"] = line
            say(f"{head} {rec['status']}: {line}")
            return rec
    rec["train_wall_seconds"] = wall
    collect_metrics(rec, run_dir)
    error = None
    if task == "translation":
        error = score_translation(ctx, rec, run_dir, name)
    elif task == "lm":
        error = score_lengths(ctx, rec, run_dir, name)
    if error:
        rec["status"], rec["error"] = "failed", error
        say(f"{head} failed: {error}")
        return rec
    write_json(os.path.join(run_dir, DONE), rec)
    say(f"{head} {summary(rec)}")
    return rec


def num(v, fmt):
    return fmt.format(v) if finite(v) else "-"


def summary(rec):
    parts = [f"valid loss {num(rec.get('valid_loss'), '{:.4f}')}"]
    if rec.get("translation"):
        parts.append("BLEU (char) " + " / ".join(num(rec["translation"].get(s, {}).get("bleu_char"), "{:.2f}")
                                                 for s in TEST_SPLITS) + " (test / test_long)")
    if rec.get("lengths"):
        parts.append("loss at " + ", ".join(f"{p['length']}: {num(p['loss'], '{:.4f}')}"
                                            for p in rec["lengths"]))
    parts.append(f"{num(rec.get('ms_per_update'), '{:.1f}')} ms/update")
    return "; ".join(parts)


def markdown(report):
    """The results table and its notes."""
    runs = report["runs"]
    tasks = [t for t in report["settings"]["tasks"]]
    s = report["settings"]
    lengths = s.get("lengths") or []
    cols = ["task", "position", "updates", "valid loss"]
    if "mlm" in tasks or "lm" in tasks:
        cols.append("valid acc")
    if "translation" in tasks:
        cols += ["test BLEU (char)", "test exact", "test_long BLEU (char)", "test_long exact"]
    if "lm" in tasks:
        cols += [f"loss @{n}" for n in lengths]
    cols += ["ms / update", "train s"]
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---" if c in ("task", "position") else "---:" for c in cols) + "|"]
    for r in runs:
        cells = {"task": r["task"], "position": r["position"]}
        if r["status"] != "done":
            cells["updates"] = "-"
            cells["valid loss"] = f"{r['status']}: {r['error']}".replace("|", "\\|")
        else:
            cells["updates"] = str(r.get("updates"))
            cells["valid loss"] = num(r.get("valid_loss"), "{:.4f}")
            if r["task"] in ("mlm", "lm"):
                cells["valid acc"] = num(r.get("valid_accuracy"), "{:.4f}")
            for split in TEST_SPLITS:
                t = (r.get("translation") or {}).get(split)
                if t:
                    cells[f"{split} BLEU (char)"] = num(t.get("bleu_char"), "{:.2f}")
                    cells[f"{split} exact"] = num(t.get("exact"), "{:.1f}%")
            for p in r.get("lengths") or []:
                cells[f"loss @{p['length']}"] = num(p.get("loss"), "{:.4f}")
            cells["ms / update"] = num(r.get("ms_per_update"), "{:.1f}")
            cells["train s"] = num(r.get("train_seconds"), "{:.1f}")
        lines.append("| " + " | ".join(cells.get(c, "-") for c in cols) + " |")
    seed = s["seed"] if s["seed"] is not None else "of the config"
    updates = s["updates"] if s["updates"] is not None else "the configs' own"
    overrides = f", overrides {' '.join(s['set'])}" if s["set"] else ""
    configs = ", ".join(f"{t} {s['configs'][t]}" for t in tasks)
    notes = [f"Encodings: {', '.join(report['encodings'])} (as {s['rotor_version']} registers "
             f"them). Configs: {configs}; only model.position changes between the runs of a task; "
             f"seed {seed}, {updates} updates{overrides}."]
    valid = ""
    if s.get("valid_bytes") and ("mlm" in tasks or "lm" in tasks):
        valid = (f" (mlm and lm: on the first {s['valid_bytes']} bytes of their valid file, cut at "
                 "a line break)")
    smoothed = "; translation's with label smoothing, as rotor logs it" if "translation" in tasks else ""
    notes.append(f"valid loss: the last validation{valid}, nats per token{smoothed}; ms / update: the "
                 "training loop less its validations, over the updates; train s: the loop with "
                 "validations.")
    if "translation" in tasks:
        lim = f"first {s['test_lines']} lines of " if s.get("test_lines") else ""
        notes.append(f"BLEU: `rotor translate` (last checkpoint, the config's beam) on the {lim}"
                     "numbers test and test_long splits, `rotor bleu --tokenize char`; "
                     "exact: lines equal to the reference.")
    if "lm" in tasks:
        notes.append(f"loss @N: `rotor eval --lengths {','.join(map(str, lengths))}` on the first "
                     f"{s['eval_bytes']} bytes of {s['eval_source']} (cut at a line break), nats per "
                     f"byte. Every lm run has model.max_positions = {s['lm_max_positions']} (the "
                     "largest length), so all share one model shape and a position table covers "
                     "every length scored; rows past data.seq_len are never trained, so learned "
                     "positions past 1x are untrained rows.")
    notes.append(f"Made by scripts/compare_positions.py on {s['date']}.")
    return "\n".join(lines) + "\n\n" + "\n\n".join(notes) + "\n"


def plot(report, path):
    """The PNG: loss curves per task, the lm's loss against length. False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    tasks = report["settings"]["tasks"]
    encs = report["encodings"]
    runs = {(r["task"], r["position"]): r for r in report["runs"] if r["status"] == "done"}
    panels = list(tasks) + (["lengths"] if "lm" in tasks else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for i, enc in enumerate(encs):
            r = runs.get(("lm" if panel == "lengths" else panel, enc))
            if not r:
                continue
            color = f"C{i % 10}"
            if panel == "lengths":
                pts = [(p["length"], p["loss"]) for p in r.get("lengths") or [] if p["loss"] is not None]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4,
                            color=color, label=enc)
                continue
            tr = [p for p in r.get("train_curve") or [] if p[1] is not None]
            va = [p for p in r.get("valid_curve") or [] if p[1] is not None]
            if tr:
                ax.plot([p[0] for p in tr], [p[1] for p in tr], color=color, linewidth=1.0, alpha=0.6)
            if va:
                ax.plot([p[0] for p in va], [p[1] for p in va], color=color, linestyle="--",
                        marker="o", markersize=4, label=enc)
        if panel == "lengths":
            lengths = report["settings"]["lengths"]
            ax.set_xscale("log", base=2)
            ax.set_xticks(lengths)
            ax.set_xticklabels([str(n) for n in lengths])
            ax.set_xlabel("evaluation length (bytes per block)")
            ax.set_ylabel("loss (nats per byte)")
            ax.set_title("lm: loss against length")
        else:
            ax.set_xlabel("update")
            ax.set_ylabel("loss (valid dashed, train solid)")
            ax.set_title(f"{panel}: {os.path.basename(report['settings']['configs'][panel])}")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_anywhere(out):
    """Draws OUT's PNG here, else with another python3 that has matplotlib."""
    report = read_json(os.path.join(out, JSON_NAME))
    png = os.path.join(out, PNG_NAME)
    if plot(report, png):
        return png
    here = os.path.realpath(sys.executable)
    for cand in ("/usr/bin/python3", os.path.join(ROOT, ".venv", "bin", "python3")):
        if not os.path.exists(cand) or os.path.realpath(cand) == here:
            continue
        if subprocess.run([cand, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            continue
        p = subprocess.run([cand, os.path.abspath(__file__), "--plot-only", "--out", out])
        if p.returncode == 0:
            return png
    return None


def parse_list(text):
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rotor", default=os.path.join(ROOT, "build-cpu", "rotor"), help="the rotor binary")
    ap.add_argument("--out", default=os.path.join(ROOT, "runs", "compare_positions"), help="output directory")
    ap.add_argument("--tasks", default=",".join(TASKS), help="subset of " + ",".join(TASKS))
    ap.add_argument("--encodings", default="", help="subset of the registered encodings (default: all)")
    ap.add_argument("--updates", type=int, help="train.max_updates of every run (default: the configs')")
    ap.add_argument("--seed", type=int, help="seed of every run (default: the configs')")
    ap.add_argument("--lengths", default="", help="lm evaluation lengths (default: 1,2,4,8 x data.seq_len)")
    ap.add_argument("--eval-bytes", type=int, default=131072, help="bytes of the lm's valid file evaluated")
    ap.add_argument("--valid-bytes", type=int, default=0,
                    help="validate mlm and lm on the first N bytes of their valid file (0: all)")
    ap.add_argument("--test-lines", type=int, default=0,
                    help="translate only the first N lines of each test split (0: all)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="another override for every run (rotor train --set)")
    ap.add_argument("--plot-only", action="store_true", help="draw the PNG from OUT's JSON and stop")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    if a.plot_only:
        if not os.path.exists(os.path.join(out, JSON_NAME)):
            fail(f"{out}: no {JSON_NAME}")
        if not plot(read_json(os.path.join(out, JSON_NAME)), os.path.join(out, PNG_NAME)):
            fail("matplotlib is missing (apt-get install python3-matplotlib)")
        return 0
    rotor = os.path.abspath(a.rotor)
    if not os.access(rotor, os.X_OK):
        fail(f"no rotor binary at {rotor} (--rotor)")
    tasks = parse_list(a.tasks)
    for t in tasks:
        if t not in TASKS:
            fail(f"--tasks: unknown task {t} (known: {', '.join(TASKS)})")
    if not tasks:
        fail("--tasks: none given")
    if a.updates is not None and a.updates < 1:
        fail("--updates: at least 1")
    if a.eval_bytes < 1 or a.test_lines < 0 or a.valid_bytes < 0:
        fail("--eval-bytes must be positive, --test-lines and --valid-bytes not negative")
    registered = registered_encodings(rotor, TASKS[tasks[0]])
    encs = parse_list(a.encodings) or registered
    for e in encs:
        if e not in registered:
            fail(f"--encodings: {e} is not registered in {rotor} ({', '.join(registered)})")
    _, version = rotor_output([rotor, "--version"])

    ctx = Context(a, out, rotor)
    os.makedirs(ctx.logs, exist_ok=True)
    lm_cfg = None
    if "lm" in tasks:
        lm_cfg = resolved_config(rotor, TASKS["lm"], list(a.set), encs, a.set)
        seq_len = int(lm_cfg["data.seq_len"])
        try:
            ctx.lengths = [int(x) for x in parse_list(a.lengths)] or [seq_len * k for k in (1, 2, 4, 8)]
        except ValueError:
            fail(f"--lengths {a.lengths}: expected increasing integers such as 128,256,512")
        if any(n < 1 for n in ctx.lengths) or ctx.lengths != sorted(set(ctx.lengths)):
            fail(f"--lengths {a.lengths}: expected increasing positive integers")
        ctx.max_positions = max(max(ctx.lengths), seq_len)
    settings = {"updates": a.updates, "seed": a.seed, "lengths": ctx.lengths or None,
                "eval_bytes": a.eval_bytes if "lm" in tasks else None, "test_lines": a.test_lines,
                "valid_bytes": a.valid_bytes, "set": list(a.set)}
    settings_path = os.path.join(out, "settings.json")
    before = read_json(settings_path)
    if isinstance(before, dict):
        # lengths and eval_bytes are compared only where both invocations ran the lm
        for k, v in settings.items():
            if k in ("lengths", "eval_bytes") and (v is None or before.get(k) is None):
                continue
            if k in before and before[k] != v:
                fail(f"{out} holds runs made with {k} = {before[k]}, not {v}: use another --out")
        settings = {k: (v if v is not None else before.get(k)) for k, v in settings.items()}
    write_json(settings_path, settings)
    if "translation" in tasks:
        ctx.numbers = numbers_data(ctx)
    if "lm" in tasks:
        src = os.path.join(ROOT, lm_cfg["data.valid"]) if not os.path.isabs(lm_cfg["data.valid"]) \
            else lm_cfg["data.valid"]
        if not os.path.exists(src):
            fail(f"{src} (data.valid of {TASKS['lm']}) not found")
        ctx.eval_input = os.path.join(out, "data", "lm_eval.txt")
        ctx.eval_bytes = eval_slice(src, a.eval_bytes, ctx.eval_input)
        ctx.eval_source = os.path.relpath(src, ROOT)
    for t in (t for t in tasks if t in ("mlm", "lm") and a.valid_bytes):
        src = resolved_config(rotor, TASKS[t], list(a.set), encs, a.set)["data.valid"]
        src = src if os.path.isabs(src) else os.path.join(ROOT, src)
        if not os.path.exists(src):
            fail(f"{src} (data.valid of {TASKS[t]}) not found")
        ctx.valid_files[t] = os.path.join(out, "data", f"{t}_valid.txt")
        eval_slice(src, a.valid_bytes, ctx.valid_files[t])

    start = time.monotonic()
    plan = []
    for t in tasks:
        cfg = resolved_config(rotor, TASKS[t], task_sets(ctx, t), encs, a.set)
        plan += [(t, e, int(cfg["train.max_updates"])) for e in encs]
    runs = []
    for i, (t, e, updates) in enumerate(plan, 1):
        runs.append(do_run(ctx, t, e, TASKS[t], updates, i, len(plan)))

    report = {
        "settings": {
            "tasks": tasks, "configs": {t: TASKS[t] for t in tasks}, "updates": a.updates,
            "seed": a.seed, "set": list(a.set), "lengths": ctx.lengths, "eval_bytes": ctx.eval_bytes,
            "eval_source": ctx.eval_source, "lm_max_positions": ctx.max_positions or None,
            "test_lines": a.test_lines, "valid_bytes": a.valid_bytes, "rotor": rotor,
            "rotor_version": version.strip(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "date": datetime.date.today().isoformat(),
        },
        "registered": registered,
        "encodings": encs,
        "runs": runs,
    }
    write_json(os.path.join(out, JSON_NAME), report)
    with open(os.path.join(out, "results.md"), "w", encoding="utf-8") as f:
        f.write(markdown(report))
    png = plot_anywhere(out)
    say(f"wrote {os.path.join(out, 'results.md')} and {os.path.join(out, JSON_NAME)}"
        + (f" and {png}" if png else " (no PNG: no python3 with matplotlib found)")
        + f" in {time.monotonic() - start:.0f} s")
    with open(os.path.join(out, "results.md"), encoding="utf-8") as f:
        say(f.read())
    failed = [r for r in runs if r["status"] == "failed"]
    if failed:
        say(f"{len(failed)} run(s) failed: " + ", ".join(f"{r['task']} {r['position']}" for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
