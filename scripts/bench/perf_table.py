#!/usr/bin/env python3
"""The markdown table of one scripts/gpu/measure.sh run, for docs/performance.md:
one training update of rotor (`rotor bench train --json`) against its Hugging
Face peers (scripts/bench/train_peer.py --json), measured in the same call.

  python3 scripts/bench/perf_table.py [--no-header] [--why TEXT]
                                      --row 'LABEL=ROTOR.json[:PEER.json,PEER.json]' ...

A missing or failed file is a row that says so (--why TEXT: what to say
instead of "the run failed: see its log", e.g. measure.sh's exit status and
log name); a peer that could not run says why ("absent: ..."). A row without
peers is rotor's alone ("(no peer)"). Ratios are peer time / rotor time
(above 1: rotor is faster). Peak memory: rotor's CUDA pool peak /
torch.cuda.max_memory_allocated. The peer column names the attention the
peer ran (SDPA or the model's eager attention) where its JSON says.
--no-header prints the rows alone (measure.sh appends them to its table one
step at a time).
"""
import argparse
import json
import math
import os
import sys

HEADER = ("| model, precision | rotor ms | peer | peer ms | peer/rotor | "
          "peak memory rotor / peer | first loss rotor / peer |")
RULE = "|---|---|---|---|---|---|---|"


def load(path, why=None):
    """(data, error): the JSON of path, or why there is none."""
    if not path:
        return None, "not run"
    if not os.path.exists(path):
        return None, f"no {os.path.basename(path)} ({why or 'the run failed: see its log'})"
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, f"unreadable {os.path.basename(path)}: {e}"


def gb(n):
    return f"{n / 1e9:.1f} GB" if n else "-"


def first_loss(d):
    losses = d.get("losses") or []
    return f"{losses[0]:.3f}" if losses and math.isfinite(losses[0]) else "-"


def parse_row(spec):
    if "=" not in spec:
        raise ValueError(f"--row {spec!r}: expected LABEL=ROTOR.json[:PEER.json,...]")
    label, files = spec.split("=", 1)
    rotor, _, peers = files.partition(":")
    return label, rotor, [p for p in peers.split(",") if p]


def peer_label(peer):
    name = f"{peer.get('peer', '?')} {peer.get('mode', '')}".strip()
    if peer.get("attention"):
        name += f" ({peer['attention']} attention)"
    return name


def rows(label, rotor_path, peer_paths, why=None):
    rotor, err = load(rotor_path, why)
    if rotor is None:
        yield f"| {label} | {err} | | | | | |"
        return
    ms = rotor.get("step_ms", 0.0)
    rotor_cells = f"{ms:.1f}"
    if not peer_paths:
        yield (f"| {label} | {rotor_cells} | (no peer) | | | {gb(rotor.get('peak_bytes', 0))} | "
               f"{first_loss(rotor)} |")
        return
    for path in peer_paths:
        peer, perr = load(path, why)
        if peer is None:
            yield f"| {label} | {rotor_cells} | {perr} | | | | |"
            continue
        name = peer_label(peer)
        if "absent" in peer:
            yield f"| {label} | {rotor_cells} | {name}: absent ({peer['absent']}) | | | | |"
            continue
        pms = peer.get("step_ms", 0.0)
        ratio = f"{pms / ms:.2f}" if ms > 0 else "-"
        yield (f"| {label} | {rotor_cells} | {name} | {pms:.1f} | {ratio} | "
               f"{gb(rotor.get('peak_bytes', 0))} / {gb(peer.get('peak_bytes', 0))} | "
               f"{first_loss(rotor)} / {first_loss(peer)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--row", action="append", default=[],
                    help="LABEL=ROTOR.json[:PEER.json,PEER.json...] (repeatable)")
    ap.add_argument("--no-header", action="store_true", help="the rows alone")
    ap.add_argument("--why", help="what a missing file's cell says instead of 'the run failed'")
    args = ap.parse_args()
    if not args.row:
        ap.error("at least one --row")
    try:
        specs = [parse_row(r) for r in args.row]
    except ValueError as e:
        ap.error(str(e))
    if not args.no_header:
        print(HEADER)
        print(RULE)
    for label, rotor, peers in specs:
        for line in rows(label, rotor, peers, args.why):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
