#!/usr/bin/env python3
"""Loss curves of rotor runs: any number of metrics.jsonl files -> one PNG.

    python3 scripts/plot_curves.py RUN_DIR_OR_METRICS... --output curves.png
        [--label NAME]... [--metric loss] [--title TEXT] [--table STEP,STEP,...]
        [--ylim LOW,HIGH]

Each run contributes its train curve (solid) and valid curve (dashed, with
markers) of --metric against the update step. --table prints a Markdown table
of the valid metric at the given steps (the nearest logged step at or before).
--ylim fixes the y range, to see close curves past the first updates' loss.
Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import os
import sys


def read_metrics(path):
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"plot_curves: {path}:{n}: not JSON ({e})")
    if not rows:
        sys.exit(f"plot_curves: {path}: no metrics")
    return path, rows


def series(rows, split, metric):
    # rotor writes a non-finite value (a diverged loss) as null: a gap in the curve.
    pts = [(r["step"], float("nan") if r[metric] is None else r[metric])
           for r in rows if r.get("split") == split and metric in r]
    pts.sort()
    return [p[0] for p in pts], [p[1] for p in pts]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run directories or metrics.jsonl files")
    ap.add_argument("--output", "-o", required=True, help="PNG to write")
    ap.add_argument("--label", action="append", default=[], help="one label per run, in order")
    ap.add_argument("--metric", default="loss")
    ap.add_argument("--title", default="")
    ap.add_argument("--table", default="", help="comma-separated steps for a valid-metric table")
    ap.add_argument("--ylim", default="", help="LOW,HIGH: the y range (default: all points)")
    a = ap.parse_args()
    if a.label and len(a.label) != len(a.runs):
        sys.exit(f"plot_curves: {len(a.label)} labels for {len(a.runs)} runs")
    ylim = None
    if a.ylim:
        try:
            ylim = [float(v) for v in a.ylim.split(",")]
        except ValueError:
            ylim = []
        if len(ylim) != 2 or not ylim[0] < ylim[1]:
            sys.exit(f"plot_curves: --ylim {a.ylim}: expected LOW,HIGH with LOW < HIGH")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_curves: matplotlib is missing (apt-get install python3-matplotlib)")

    fig, ax = plt.subplots(figsize=(8, 5))
    runs = []
    for i, run in enumerate(a.runs):
        path, rows = read_metrics(run)
        label = a.label[i] if a.label else os.path.basename(os.path.dirname(os.path.abspath(path)))
        color = f"C{i}"
        xs, ys = series(rows, "train", a.metric)
        if xs:
            ax.plot(xs, ys, color=color, linewidth=1.2, label=f"{label} train")
        vx, vy = series(rows, "valid", a.metric)
        if vx:
            ax.plot(vx, vy, color=color, linestyle="--", marker="o", markersize=4, label=f"{label} valid")
        runs.append((label, vx, vy))
    ax.set_xlabel("update")
    ax.set_ylabel(a.metric)
    if a.title:
        ax.set_title(a.title)
    if ylim:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.output, dpi=120)
    print(f"wrote {a.output}")

    if a.table:
        steps = [int(s) for s in a.table.split(",") if s.strip()]
        print("| step | " + " | ".join(f"{l} valid {a.metric}" for l, _, _ in runs) + " |")
        print("|---:|" + "---:|" * len(runs))
        for s in steps:
            cells = []
            for _, vx, vy in runs:
                at = [y for x, y in zip(vx, vy) if x <= s]
                cells.append(f"{at[-1]:.4f}" if at else "-")
            print(f"| {s} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
