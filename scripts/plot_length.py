#!/usr/bin/env python3
"""Loss against evaluation length: `rotor eval --lengths ... --json` outputs -> one PNG.

    rotor eval --checkpoint RUN --input FILE --lengths 128,256,512,1024 --json > run.json
    python3 scripts/plot_length.py RUN.json... --output length.png
        [--label NAME]... [--metric loss|bpb|ppl|accuracy] [--title TEXT] [--table]

Each JSON file (one run, or one setting of a run such as a context scaling)
is one line of --metric against the block length, on a log2 x axis. A run
whose model stops at its position table (the JSON's "stopped") ends there.
--table prints a Markdown table: one row per length, one column per run,
"-" where a run has no figure (with a note below the table naming why).
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import math
import os
import sys


def read_eval(path, metric):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"plot_length: {path}: cannot read ({e.strerror})")
    try:
        j = json.loads(text)
    except json.JSONDecodeError as e:
        sys.exit(f"plot_length: {path}:{e.lineno}: not JSON ({e.msg})")
    rows = j.get("lengths") if isinstance(j, dict) else None
    if not isinstance(rows, list) or not rows:
        sys.exit(f"plot_length: {path}: no \"lengths\" list (the output of rotor eval --lengths ... --json)")
    points = {}
    for k, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("length"), int) or metric not in r:
            sys.exit(f"plot_length: {path}: lengths[{k}] has no integer \"length\" and \"{metric}\"")
        # a non-finite figure is written as null: a gap, not an error
        v = r[metric]
        points[r["length"]] = float("nan") if v is None else float(v)
    return points, j.get("stopped", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evals", nargs="+", help="JSON files written by rotor eval --lengths ... --json")
    ap.add_argument("--output", "-o", required=True, help="PNG to write")
    ap.add_argument("--label", action="append", default=[], help="one label per file, in order")
    ap.add_argument("--metric", default="loss", help="loss (default), bpb, ppl or accuracy")
    ap.add_argument("--title", default="")
    ap.add_argument("--table", action="store_true", help="print a Markdown table (lengths x runs)")
    a = ap.parse_args()
    if a.label and len(a.label) != len(a.evals):
        sys.exit(f"plot_length: {len(a.label)} labels for {len(a.evals)} files")
    runs = []
    for i, path in enumerate(a.evals):
        points, stopped = read_eval(path, a.metric)
        label = a.label[i] if a.label else os.path.splitext(os.path.basename(path))[0]
        runs.append((label, points, stopped))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_length: matplotlib is missing (apt-get install python3-matplotlib)")

    lengths = sorted({n for _, points, _ in runs for n in points})
    fig, ax = plt.subplots(figsize=(9.5, 5))
    markers = "osD^vP*Xh<>"
    for i, (label, points, _) in enumerate(runs):
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker=markers[i % len(markers)], markersize=5,
                color=f"C{i % 10}", linestyle="-" if i < 10 else "--", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(n) for n in lengths])
    ax.set_xlabel("evaluation length (tokens per block)")
    ax.set_ylabel({"loss": "loss (nats per token)", "bpb": "bits per byte"}.get(a.metric, a.metric))
    if a.title:
        ax.set_title(a.title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: lines cross anywhere
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)
    print(f"wrote {a.output}")

    if a.table:
        print("| length | " + " | ".join(label for label, _, _ in runs) + " |")
        print("|---:|" + "---:|" * len(runs))
        for n in lengths:
            cells = []
            for _, points, _ in runs:
                v = points.get(n)
                cells.append("-" if v is None else ("nan" if math.isnan(v) else f"{v:.4f}"))
            print(f"| {n} | " + " | ".join(cells) + " |")
        for label, points, stopped in runs:
            missing = [n for n in lengths if n not in points]
            if missing:
                why = stopped or "not in its file"
                print(f"\n{label}: no {a.metric} at {', '.join(map(str, missing))} ({why})")


if __name__ == "__main__":
    main()
