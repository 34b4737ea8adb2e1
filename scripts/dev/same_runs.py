#!/usr/bin/env python3
"""Trains every tiny config a few updates with two rotor binaries and compares
what they logged, number for number.

For changes that must not change a result (a refactor, a move of code): the
binary of main before the change against the one after it, on the same data
and threads. Every record of each run's metrics.jsonl (losses, accuracy,
validation scores, learning rates, gradient norms) must be equal; timings
are left out. The data is made once under --work by the recipes of
scripts/bench/cpu_peers.py.

  python3 scripts/dev/same_runs.py --before OLD/rotor --after build/rotor

Exit status 0 when every config gave the same records, 1 otherwise (the first
difference is printed), 2 on bad usage.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts/bench"))
import cpu_peers  # noqa: E402  (the tiny configs and their data recipes)

# What a record holds that depends on the machine's speed, not the model.
TIMED = ("tokens_per_s", "time", "elapsed", "seconds", "eta", "mem_mib")


def records(run_dir):
    out = []
    for line in open(run_dir / "metrics.jsonl"):
        r = json.loads(line)
        out.append({k: v for k, v in r.items() if not any(t in k for t in TIMED)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the rotor binary before the change")
    ap.add_argument("--after", required=True, help="the rotor binary after it")
    ap.add_argument("--configs", default=",".join(c for c, _ in cpu_peers.CONFIGS))
    ap.add_argument("--updates", type=int, default=12)
    ap.add_argument("--threads", default="2", help="OMP_NUM_THREADS of both")
    ap.add_argument("--work", default=str(ROOT / "runs/same_runs"))
    ap.add_argument("--shared", default=str(ROOT.parent / "shared/data"))
    a = ap.parse_args()
    known = dict(cpu_peers.CONFIGS)
    wanted = [c for c in a.configs.split(",") if c]
    for c in wanted:
        if c not in known:
            sys.exit(f"--configs: unknown config {c} (known: {', '.join(known)})")
    for b in (a.before, a.after):
        if not os.access(b, os.X_OK):
            print(f"no rotor at {b}", file=sys.stderr)
            return 2
    if a.updates < 2:
        print("--updates must be at least 2", file=sys.stderr)
        return 2
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    data = cpu_peers.Data(a.after, work, pathlib.Path(a.shared))
    env = dict(os.environ, OMP_NUM_THREADS=a.threads)
    half = max(1, a.updates // 2)
    differ = 0
    for name in wanted:
        sets = data.sets(known[name]) + [
            "device=cpu", f"train.max_updates={a.updates}", "train.max_epochs=0",
            f"train.log_interval={max(1, a.updates // 3)}", f"train.valid_interval={half}",
            f"train.save_interval={a.updates}"]
        got = []
        for tag, rotor in (("before", a.before), ("after", a.after)):
            out = work / name.replace("/", "_") / tag
            shutil.rmtree(out, ignore_errors=True)
            cmd = [rotor, "train", str(ROOT / "configs" / f"{name}.yaml"),
                   "--set", f"output_dir={out}"]
            for s in sets:
                cmd += ["--set", s]
            r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
            got.append(records(out) if r.returncode == 0 else r.stderr.strip().splitlines()[-1:])
        same = got[0] == got[1]
        print(f"{name}: {'same' if same else 'DIFFERENT'} ({len(got[1])} records)", flush=True)
        if not same:
            differ += 1
            for x, y in zip(got[0], got[1]):
                if x != y:
                    print(f"  before: {x}\n  after:  {y}")
                    break
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
