#!/usr/bin/env python3
"""rotor's DeBERTa relative table rows (core/deberta_bias.h) against transformers'
own, row by row: DeBERTa-v2's make_log_bucket_position and the clamped shift
into the relative table that its DisentangledSelfAttention applies.

reference_deberta_buckets (tests/reference/deberta_buckets.cpp) prints rotor's
row deberta::relative_row of every relative position r = query - key in
-N .. N (N = 3 max(max_relative_positions, span)) for each (position_buckets,
max_relative_positions) below. transformers' content-to-position index of
query i and key j is clamp(bucket(i - j) + span, 0, 2 span - 1), span the
attention's pos_ebd_size (position_buckets, or max_relative_positions without
buckets), bucket make_log_bucket_position (none with 0 buckets, as
build_relative_position skips it); its position-to-content index, read for
key j and query i and transposed, is clamp(-bucket(j - i) + span, 0,
2 span - 1). rotor reads one row for both terms: each must equal rotor's row
of r = i - j. Both are checked per r and then over the whole [T, T] matrix
of build_relative_position (T = N + 1, every r of the range) as the attention
builds and indexes it.

The log-spaced buckets are computed in float32 and rounded up, so a distance
whose log quotient falls on a whole number checks that rotor rounds as
transformers does; some settings are chosen for such distances, and float64
arithmetic must give another row somewhere (or the settings check nothing of
the rounding).

The one exception: where torch's own float32 log of a distance ratio (or of
the reach (max_relative_positions - 1) / (buckets / 2)) is not the correctly
rounded one, transformers' bucket depends on the torch build, and a row that
differs there is listed as a note, not a failure.

The python3 that runs it needs torch and transformers; without them it
re-runs itself under the first that has them, in the order
tests/scripts/test_hf_transformers.sh tries (ROTOR_HF_PYTHON, the checkout's
.venv, python3, /usr/bin/python3; with ROTOR_HF_MAJOR=5 only ROTOR_HF_PYTHON
and .venv-hf5, whose transformers must be 5.x), and exits 77 (skip) when
none has.

Usage: deberta_buckets_check.py --tool reference_deberta_buckets
Exits 0 when every row agrees (but for those notes), 1 otherwise (naming the
settings, r and both rows of each difference), 77 when skipped.
"""
import argparse
import inspect
import math
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (position_buckets, max_relative_positions): model.deberta's defaults
# (DeBERTa-v3's), a narrower table, a reach that is no power of two, no
# buckets, a small table, a wide reach, the reference row's (4, 6:
# transformer_reference.py --position deberta), a reach below the table's
# span (also one where float32 and float64 arithmetic give different rows:
# r = +-80 and +-100), and two more such (128:513 at r = +-128 and +-256,
# 32:129 at r = +-32 and +-64): the log quotient times mid - 1 is a whole
# number in exact arithmetic, float64 lands just above it (rounded up to the
# next bucket) and float32 on it (128:513, 32:129) or just below (128:126).
SETTINGS = [(256, 512), (128, 512), (32, 100), (0, 64), (8, 20), (64, 1024), (4, 6), (128, 126),
            (128, 513), (32, 129)]
# Differences listed in full before the rest are only counted.
SHOW = 40
MODULES = "import torch; from transformers.models.deberta_v2 import modeling_deberta_v2"


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


def span_of(buckets, max_relative):
    """The relative table's span: its rows are 0 .. 2 span - 1."""
    return buckets if buckets > 0 else max_relative


def row_f64(r, buckets, max_relative):
    """The row of r = query - key with the log-spaced part in float64: to show
    that SETTINGS reach cases where the arithmetic decides."""
    span = span_of(buckets, max_relative)
    bucket = r
    mid = buckets // 2
    if buckets > 0 and abs(r) > mid:
        steps = math.log(abs(r) / mid) / math.log((max_relative - 1) / mid) * (mid - 1)
        bucket = int(math.copysign(mid + math.ceil(steps), r))
    return min(max(bucket + span, 0), 2 * span - 1)


def import_or_reexec():
    """transformers' DeBERTa-v2 module from this interpreter, or never
    returns: re-runs the script under another python3 that has it, or exits
    77."""
    try:
        import torch  # noqa: F401
        from transformers.models.deberta_v2 import modeling_deberta_v2
        if wanted_major_ok():
            return modeling_deberta_v2
        why = f"transformers is not {os.environ['ROTOR_HF_MAJOR']}.x"
    except ImportError as e:
        why = str(e)
    if not os.environ.get("ROTOR_DEBERTA_BUCKETS_REEXEC"):
        py = other_python()
        if py:
            os.environ["ROTOR_DEBERTA_BUCKETS_REEXEC"] = "1"
            sys.stdout.flush()
            os.execv(py, [py] + sys.argv)
    major = os.environ.get("ROTOR_HF_MAJOR", "")
    print(f"SKIPPED: no python3 with torch and transformers{' ' + major + '.x' if major else ''} "
          f"({sys.executable}: {why}; bash scripts/deps.sh --with-python installs them)")
    sys.exit(77)


def relative_matrix(hf, T, buckets, max_relative):
    """transformers' build_relative_position of T queries and T keys, [T, T]
    (query i, key j): 4.x takes the sizes, 5.x the query and key tensors."""
    import torch
    build = hf.build_relative_position
    first = next(iter(inspect.signature(build).parameters))
    if first == "query_size":
        rel = build(T, T, bucket_size=buckets, max_position=max_relative)
    else:
        x = torch.empty(1, T, 1)
        rel = build(x, x, bucket_size=buckets, max_position=max_relative)
    return rel.reshape(T, T).long()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True, help="path of reference_deberta_buckets")
    args = ap.parse_args()
    os.environ.update(TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    hf = import_or_reexec()
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
        buckets, max_relative, n = v[:3]
        if len(v) != 3 + 2 * n + 1:
            print(f"FAIL: {buckets}:{max_relative}: {len(v) - 3} rows printed, want {2 * n + 1}")
            return 1
        rotor[(buckets, max_relative)] = (n, v[3:])
    if set(rotor) != set(SETTINGS):
        print(f"FAIL: the tool printed settings {sorted(rotor)}, want {sorted(SETTINGS)}")
        return 1

    version = f"transformers {transformers.__version__}, torch {torch.__version__}"
    diffs, torch_log, compared, f64_diffs, p2c_diffs, matrix_diffs, matrix_compared = \
        [], [], 0, 0, [], [], 0
    for (buckets, max_relative), (n, got) in sorted(rotor.items()):
        span = span_of(buckets, max_relative)
        rel = torch.arange(-n, n + 1, dtype=torch.long)  # r = query - key

        def bucket(r):
            if buckets > 0 and max_relative > 0:  # as build_relative_position decides
                return hf.make_log_bucket_position(r, buckets, max_relative).long()
            return r

        # Content-to-position: query i's row for key j; position-to-content:
        # key j's row for query i (its relative position j - i = -r, negated).
        c2p = torch.clamp(bucket(rel) + span, 0, 2 * span - 1).tolist()
        p2c = torch.clamp(-bucket(-rel) + span, 0, 2 * span - 1).tolist()
        compared += len(c2p)
        # torch's float32 logs, on tensors of transformers' shape here: the
        # distances' ratios over mid and the reach.
        mid = max(buckets // 2, 1)
        ratio = rel.abs().clamp(min=mid) / mid
        logs = torch.log(ratio).tolist()
        reach32 = float(torch.tensor((max_relative - 1) / mid))
        reach_log = float(torch.log(torch.tensor(reach32)))
        reach_exact = float(torch.tensor(math.log(reach32), dtype=torch.float64).float())
        for i, (r, a, w, p) in enumerate(zip(rel.tolist(), got, c2p, p2c)):
            f64_diffs += row_f64(r, buckets, max_relative) != w
            if p != w:
                p2c_diffs.append((buckets, max_relative, r, w, p))
            if a == w and a == p:
                continue
            x = float(ratio[i])
            exact_log = float(torch.tensor(math.log(x), dtype=torch.float64).float())
            entry = (buckets, max_relative, r, a, w, p, x, logs[i], exact_log, reach_log, reach_exact)
            by_torch = buckets > 0 and abs(r) > mid and (logs[i] != exact_log or reach_log != reach_exact)
            (torch_log if by_torch else diffs).append(entry)
        # The whole [T, T] matrix as the attention builds and indexes it:
        # query i, key j; the position-to-content index is gathered for key j
        # and query i ([j, i]) and transposed.
        T = n + 1
        R = relative_matrix(hf, T, buckets, max_relative)
        c2p_m = torch.clamp(R + span, 0, 2 * span - 1)
        p2c_m = torch.clamp(-R + span, 0, 2 * span - 1).t()
        pos = torch.arange(T)
        want_m = torch.tensor(got, dtype=torch.long)[pos[:, None] - pos[None, :] + n]
        matrix_compared += 2 * T * T
        # (Where a row differs only by torch's log, noted above, so may these.)
        noted = torch.zeros(2 * n + 1, dtype=torch.bool)
        for e in torch_log:
            if e[:2] == (buckets, max_relative):
                noted[e[2] + n] = True
        excused = noted[pos[:, None] - pos[None, :] + n]
        for name, m in (("content-to-position", c2p_m), ("position-to-content", p2c_m)):
            bad = ((m != want_m) & ~excused).nonzero()
            if len(bad):  # the count, and the first (query, key) of each distinct r
                first = {}
                for i, j in bad.tolist():
                    first.setdefault(i - j, (i, j))
                shown = [(i, j, int(want_m[i, j]), int(m[i, j])) for i, j in list(first.values())[:5]]
                matrix_diffs.append((buckets, max_relative, name, len(bad), len(first), shown))

    failed = False
    if torch_log:
        print(f"NOTE: {len(torch_log)} rows differ where {version}'s float32 log is not "
              "correctly rounded (rotor's match the correctly rounded log):")
        for b, m, r, a, w, p, x, got_log, exact_log, rl, re in torch_log[:SHOW]:
            print(f"  buckets {b} max_relative {m}: r = {r}: rotor {a}, transformers c2p {w} p2c {p}; "
                  f"torch.log({x!r}) = {got_log!r}, correctly rounded {exact_log!r}; "
                  f"reach log {rl!r}, correctly rounded {re!r}")
    if diffs:
        failed = True
        print(f"FAIL: {len(diffs)} of {compared} rows differ from {version}:")
        for b, m, r, a, w, p, *_ in diffs[:SHOW]:
            print(f"  buckets {b} max_relative {m}: r = {r}: rotor {a}, transformers c2p {w} p2c {p}")
        if len(diffs) > SHOW:
            print(f"  ... and {len(diffs) - SHOW} more")
    if p2c_diffs:
        failed = True
        print(f"FAIL: {len(p2c_diffs)} relative positions where {version}'s position-to-content "
              "row differs from its content-to-position row (rotor reads one row for both):")
        for b, m, r, w, p in p2c_diffs[:SHOW]:
            print(f"  buckets {b} max_relative {m}: r = {r}: c2p {w}, p2c {p}")
    if matrix_diffs:
        failed = True
        print(f"FAIL: {version}'s build_relative_position matrices differ from rotor's rows:")
        for b, m, name, count, distinct, shown in matrix_diffs:
            print(f"  buckets {b} max_relative {m} {name}: {count} indices of {distinct} relative "
                  f"positions, e.g. " + "; ".join(f"query {i}, key {j} (r = {i - j}): rotor {a}, "
                                                  f"transformers {w}" for i, j, a, w in shown))
    if failed:
        return 1
    if f64_diffs == 0:
        print(f"FAIL: float64 arithmetic gives {version}'s rows everywhere: the settings no "
              "longer check rotor's float32 rounding")
        return 1
    rest = f", the other {len(torch_log)} differ only by torch's log" if torch_log else ""
    print(f"PASS: {compared - len(torch_log)} of {compared} rows of {len(SETTINGS)} settings equal "
          f"{version}'s make_log_bucket_position + clamp, content-to-position and "
          f"position-to-content alike{rest} ({f64_diffs} would differ in float64 arithmetic); "
          f"{matrix_compared} indices of build_relative_position's matrices agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
