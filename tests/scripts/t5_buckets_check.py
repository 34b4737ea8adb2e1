#!/usr/bin/env python3
"""rotor's T5 relative position buckets (core/t5_bias.h) against transformers'
own, bucket by bucket: T5Attention._relative_position_bucket, the function
Hugging Face's T5 computes its bias's buckets with.

reference_t5_buckets (tests/reference/t5_buckets.cpp) prints rotor's bucket of
every relative position r = key - query in -3 max_distance .. 3 max_distance
for each (buckets, max_distance) below, bidirectional (an encoder) and causal
(a decoder); each must equal transformers' bucket of the same r. The
log-spaced buckets are computed in float32 and truncated, so a distance whose
log quotient falls on or next to a whole number checks that rotor rounds as
transformers does; some settings are chosen for such distances, and float64
arithmetic must give another bucket somewhere (or the settings check nothing
of the rounding).

The one exception: where torch's own float32 log of a distance ratio is not
the correctly rounded one, transformers' bucket depends on the torch build
(torch 2.x's log of 1.5 is one ulp above, torch 1.13's and glibc's are not),
and a bucket that differs there is listed as a note, not a failure.

The python3 that runs it needs torch and transformers; without them it
re-runs itself under the first that has them, in the order
tests/scripts/test_hf_transformers.sh tries (ROTOR_HF_PYTHON, the checkout's
.venv, python3, /usr/bin/python3; with ROTOR_HF_MAJOR=5 only ROTOR_HF_PYTHON
and .venv-hf5, whose transformers must be 5.x), and exits 77 (skip) when
none has.

Usage: t5_buckets_check.py --tool reference_t5_buckets
Exits 0 when every bucket agrees (but for those notes), 1 otherwise (naming the settings, r and
both buckets of each difference), 77 when skipped.
"""
import argparse
import math
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (buckets, max_distance): model.t5's defaults, wider and narrower tables,
# a reach that is no power of two, one that leaves 2 log-spaced buckets a
# side, a wide one, and three where float32 and float64 arithmetic give
# different buckets (48:81 causal at r = -54 and -36, 96:81 the same
# bidirectional, 36:32 causal at r = -24, where float32 rounds up).
SETTINGS = [(32, 128), (64, 256), (16, 64), (32, 100), (8, 20), (128, 1024), (48, 81), (96, 81),
            (36, 32)]
# Differences listed in full before the rest are only counted.
SHOW = 40
MODULES = "import torch; from transformers.models.t5.modeling_t5 import T5Attention"


def wanted_major_ok():
    """Whether this interpreter's transformers is the major version that
    ROTOR_HF_MAJOR asks for (any without it)."""
    major = os.environ.get("ROTOR_HF_MAJOR", "")
    if not major:
        return True
    import transformers
    return transformers.__version__.split(".")[0] == major


def other_python():
    """The first other python3 with torch and transformers (of the wanted
    major version), or None."""
    major = os.environ.get("ROTOR_HF_MAJOR", "")
    if major == "5":
        candidates = [os.environ.get("ROTOR_HF_PYTHON", ""), os.path.join(ROOT, ".venv-hf5/bin/python3")]
    else:
        candidates = [os.environ.get("ROTOR_HF_PYTHON", ""), os.path.join(ROOT, ".venv/bin/python3"),
                      shutil.which("python3") or "", "/usr/bin/python3"]
    want = MODULES
    if major:
        want += f"; import sys, transformers; sys.exit(transformers.__version__.split('.')[0] != '{major}')"
    for cand in candidates:
        if not cand or not os.access(cand, os.X_OK):
            continue
        # Not the interpreter's real path: a virtualenv's python3 links to
        # the system's, but its modules are its own.
        if os.path.abspath(cand) == os.path.abspath(sys.executable):
            continue
        if subprocess.run([cand, "-c", want], capture_output=True).returncode == 0:
            return cand
    return None


def bucket_f64(r, buckets, max_distance, bidirectional):
    """T5's bucket of r (key - query) with the log-spaced part in float64: to
    show that SETTINGS reach cases where the arithmetic decides."""
    side, dist = 0, max(-r, 0)
    if bidirectional:
        buckets //= 2
        side, dist = (buckets if r > 0 else 0), abs(r)
    exact = buckets // 2
    if dist < exact:
        return side + dist
    steps = math.log(dist / exact) / math.log(max_distance / exact) * (buckets - exact)
    return side + min(exact + int(steps), buckets - 1)


def import_or_reexec():
    """T5Attention from this interpreter, or never returns: re-runs the script
    under another python3 that has it, or exits 77."""
    try:
        import torch  # noqa: F401
        from transformers.models.t5.modeling_t5 import T5Attention
        if wanted_major_ok():
            return T5Attention
        why = f"transformers is not {os.environ['ROTOR_HF_MAJOR']}.x"
    except ImportError as e:
        why = str(e)
    if not os.environ.get("ROTOR_T5_BUCKETS_REEXEC"):
        py = other_python()
        if py:
            os.environ["ROTOR_T5_BUCKETS_REEXEC"] = "1"
            sys.stdout.flush()
            os.execv(py, [py] + sys.argv)
    major = os.environ.get("ROTOR_HF_MAJOR", "")
    print(f"SKIPPED: no python3 with torch and transformers{' ' + major + '.x' if major else ''} "
          f"({sys.executable}: {why}; bash scripts/deps.sh --with-python installs them)")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True, help="path of reference_t5_buckets")
    args = ap.parse_args()
    os.environ.update(TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    T5Attention = import_or_reexec()
    import torch
    import transformers

    if not os.path.isfile(args.tool):
        print(f"FAIL: {args.tool} not found")
        return 1
    cmd = [args.tool] + [f"{b}:{m}" for b, m in SETTINGS]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr}")
        return 1
    rotor = {}
    for line in proc.stdout.splitlines():
        v = [int(x) for x in line.split()]
        buckets, max_distance, bidirectional, n = v[:4]
        if len(v) != 4 + 2 * n + 1:
            print(f"FAIL: {buckets}:{max_distance}: {len(v) - 4} buckets printed, want {2 * n + 1}")
            return 1
        rotor[(buckets, max_distance, bool(bidirectional))] = (n, v[4:])
    wanted = {(b, m, bi) for b, m in SETTINGS for bi in (True, False)}
    if set(rotor) != wanted:
        print(f"FAIL: the tool printed settings {sorted(rotor)}, want {sorted(wanted)}")
        return 1

    diffs, torch_log, compared, f64_diffs = [], [], 0, 0
    for (buckets, max_distance, bidirectional), (n, got) in sorted(rotor.items()):
        rel = torch.arange(-n, n + 1, dtype=torch.long)
        want = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional,
                                                     num_buckets=buckets, max_distance=max_distance)
        want = want.tolist()
        compared += len(want)
        # torch's float32 log of each distance over its side's exact buckets,
        # taken on a tensor of the same shape as transformers' own.
        exact = buckets // 4 if bidirectional else buckets // 2
        dist = rel.abs() if bidirectional else torch.clamp(-rel, min=0)
        ratio = dist.float() / exact
        logs = torch.log(ratio).tolist()
        for i, (r, a, b) in enumerate(zip(rel.tolist(), got, want)):
            f64_diffs += bucket_f64(r, buckets, max_distance, bidirectional) != b
            if a == b:
                continue
            # The correctly rounded float32 log of the same ratio: where torch's
            # is not, transformers' bucket is torch's (and its build's), and
            # rotor's is the one the exact log gives.
            x = float(ratio[i])
            exact_log = float(torch.tensor(math.log(x), dtype=torch.float64).float())
            entry = (buckets, max_distance, bidirectional, r, a, b, x, logs[i], exact_log)
            (torch_log if logs[i] != exact_log else diffs).append(entry)
    version = f"transformers {transformers.__version__}, torch {torch.__version__}"
    if torch_log:
        print(f"NOTE: {len(torch_log)} buckets differ where {version}'s float32 log is not "
              "correctly rounded (rotor's match the correctly rounded log):")
        for b, m, bi, r, a, w, x, got_log, exact_log in torch_log[:SHOW]:
            print(f"  buckets {b} max_distance {m} bidirectional {bi}: r = {r}: rotor {a}, "
                  f"transformers {w}; torch.log({x!r}) = {got_log!r}, correctly rounded {exact_log!r}")
    if diffs:
        print(f"FAIL: {len(diffs)} of {compared} buckets differ from {version}:")
        for b, m, bi, r, a, w, *_ in diffs[:SHOW]:
            print(f"  buckets {b} max_distance {m} bidirectional {bi}: r = {r}: rotor {a}, "
                  f"transformers {w}")
        if len(diffs) > SHOW:
            print(f"  ... and {len(diffs) - SHOW} more")
        return 1
    if f64_diffs == 0:
        print(f"FAIL: float64 arithmetic gives {version}'s buckets everywhere: the settings no "
              "longer check rotor's float32 rounding")
        return 1
    rest = f", the other {len(torch_log)} differ only by torch's log" if torch_log else ""
    print(f"PASS: {compared - len(torch_log)} of {compared} buckets of {len(SETTINGS)} settings x 2 "
          f"directions equal {version}'s T5Attention._relative_position_bucket{rest} "
          f"({f64_diffs} would differ in float64 arithmetic)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
