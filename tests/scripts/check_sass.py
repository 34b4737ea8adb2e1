#!/usr/bin/env python3
"""The SASS of rotor's bandwidth-bound kernels (docs/performance.md, "Bytes
and FLOPs"), checked without a GPU: every kernel of kernels/{elementwise,
dropout,layer_norm,heads,embedding,flash_attention_tc}.cu uses no local
memory, and the vector-path instantiations below load and store with 16-byte
instructions (LDG.E.128 / STG.E.128) and keep no stack frame, for every
architecture the build targets. The tensor-core attention kernels
(MMA_KERNELS) must issue HMMA and have no LDL/STL and no stack frame.

  python3 tests/scripts/check_sass.py --build BUILD [--cuobjdump PATH]

cuobjdump: --cuobjdump, $CUOBJDUMP, PATH, /usr/local/cuda/bin. Not every CUDA
install has it (the nvidia-cuda-cuobjdump wheel does); without it the check
exits 77 (skipped). Prints the table docs/performance.md quotes.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

# (object, demangled-name pattern of a vector-path kernel, needs LDG.E.128, needs STG.E.128)
VECTOR_KERNELS = [
    ("elementwise", r"map1_kernel<__nv_bfloat16, __nv_bfloat16, 8, .*ActOp>", True, True),
    ("elementwise", r"map1_kernel<float, __nv_bfloat16, 8, .*IdentityOp>", True, True),
    ("elementwise", r"map2_kernel<__nv_bfloat16, 8, .*AddOp>", True, True),
    ("elementwise", r"map2_kernel<__nv_bfloat16, 8, .*ActGradOp>", True, True),
    ("elementwise", r"add_bias_kernel<__nv_bfloat16, float, 8>", True, True),
    ("elementwise", r"fill_float_kernel<__nv_bfloat16, 8>", False, True),
    ("elementwise", r"glu_kernel<__nv_bfloat16, 8>", True, True),
    ("elementwise", r"glu_grad_kernel<__nv_bfloat16, 8>", True, True),
    ("dropout", r"dropout_kernel<__nv_bfloat16, 8, true, false>", True, True),
    ("dropout", r"dropout_kernel<__nv_bfloat16, 8, true, true>", True, True),
    ("dropout", r"dropout_kernel<float, 4, true, false>", True, True),
    ("layer_norm", r"ln_fwd_warp_kernel<__nv_bfloat16, float, 4>", True, True),
    ("layer_norm", r"ln_bwd_warp_kernel<__nv_bfloat16, float, 4>", True, True),
    ("heads", r"split_heads_vec_kernel<__nv_bfloat16, false>", True, True),
    ("heads", r"split_heads_vec_kernel<__nv_bfloat16, true>", True, True),
    ("heads", r"merge_vec_kernel<true>", True, True),
    ("heads", r"merge_vec_kernel<false>", True, True),
    ("embedding", r"embedding_fwd_kernel<__nv_bfloat16, 8>", True, True),
    ("embedding", r"segment_sum_kernel<__nv_bfloat16, float, 8>", True, True),
    ("embedding", r"small_vocab_partial_kernel<__nv_bfloat16, 8>", True, False),
]

# The tensor-core attention kernels (kernels/flash_attention_tc.cu): every
# (object, demangled-name pattern) must issue HMMA and touch no local memory
# (no LDL/STL in its SASS, no stack frame, LOCAL 0) on every architecture.
MMA_KERNELS = [
    ("flash_attention_tc", rf"flash_tc_{kind}_kernel<{t}, {d}>")
    for kind in ("fwd", "bwd") for t in ("__half", "__nv_bfloat16") for d in (32, 64, 128)
]


def find_cuobjdump(given):
    for c in [given, os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
              "/usr/local/cuda/bin/cuobjdump",
              os.path.join(os.path.dirname(__file__), "../../.deps/cuda-tools/bin/cuobjdump")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            # cuobjdump runs nvdisasm, found on PATH: the wheels' pair sits together.
            os.environ["PATH"] = os.path.dirname(os.path.abspath(c)) + os.pathsep + os.environ["PATH"]
            return c
    return None


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return dict(zip(names, out))


def short_name(demangled):
    """"map1_kernel<__nv_bfloat16, __nv_bfloat16, 8, ActOp>" from the full signature."""
    s = demangled.replace("(anonymous namespace)::", "").replace("rotor::kernels::", "")
    m = re.match(r"(?:void )?(.*?>)\(", s)
    return m.group(1) if m else s


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def sass_by_function(text):
    """{mangled name: SASS text} for one architecture's dump."""
    funcs, name, body = {}, None, []
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                funcs[name] = "\n".join(body)
            name, body = m.group(1), []
        elif name:
            body.append(line)
    if name:
        funcs[name] = "\n".join(body)
    return funcs


def usage_by_function(text):
    """{mangled name: (LOCAL bytes, STACK bytes)} from cuobjdump -res-usage."""
    usage, name = {}, None
    for line in text.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            name = m.group(1)
            continue
        m = re.search(r"STACK:(\d+).*LOCAL:(\d+)", line)
        if name and m:
            stack, local = int(m.group(1)), int(m.group(2))
            old = usage.get(name, (0, 0))
            usage[name] = (max(old[0], local), max(old[1], stack))  # the worst architecture
    return usage


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--cuobjdump")
    args = ap.parse_args()
    tool = find_cuobjdump(args.cuobjdump)
    if not tool:
        print("SKIPPED: no cuobjdump (set CUOBJDUMP; the nvidia-cuda-cuobjdump wheel has one)")
        return 77
    objects = {}
    for obj in sorted({k for k, *_ in VECTOR_KERNELS} | {k for k, _ in MMA_KERNELS}):
        hits = glob.glob(os.path.join(args.build, "CMakeFiles", "rotor_lib.dir", "kernels",
                                      f"{obj}.cu.o"))
        if not hits:
            print(f"check_sass: no {obj}.cu.o under {args.build} (a CUDA build?)")
            return 77
        objects[obj] = hits[0]
    failures = []
    rows = []
    mma_rows = []
    for obj, path in objects.items():
        archs = sorted(set(re.findall(r"arch = (sm_\d+)", run([tool, "-lelf", path]) +
                                      run([tool, "-sass", path]))))
        usage = usage_by_function(run([tool, "-res-usage", path]))
        names = demangle(list(usage))
        for mangled, (local, _stack) in usage.items():
            if local:
                failures.append(f"{obj}: {names[mangled]} uses {local} bytes of local memory")
        for arch in archs:
            sass = sass_by_function(run([tool, "-sass", "-arch", arch, path]))
            dem = demangle(list(sass))
            for o, pattern, need_ldg, need_stg in VECTOR_KERNELS:
                if o != obj:
                    continue
                found = [m for m in sass if re.search(pattern, dem[m])]
                if not found:
                    failures.append(f"{obj} {arch}: no kernel matches {pattern}")
                    continue
                for m in found:
                    ldg = len(re.findall(r"LDG\.E\.128", sass[m]))
                    stg = len(re.findall(r"STG\.E\.128", sass[m]))
                    local, stack = usage.get(m, (0, 0))
                    rows.append((arch, short_name(dem[m]), ldg, stg, stack, local))
                    if (need_ldg and ldg == 0) or (need_stg and stg == 0) or stack or local:
                        failures.append(f"{obj} {arch}: {dem[m]}: LDG.E.128 x{ldg}, "
                                        f"STG.E.128 x{stg}, stack {stack}, local {local}")
            for o, pattern in MMA_KERNELS:
                if o != obj:
                    continue
                found = [m for m in sass if re.search(pattern, dem[m])]
                if not found:
                    failures.append(f"{obj} {arch}: no kernel matches {pattern}")
                    continue
                for m in found:
                    hmma = len(re.findall(r"\bHMMA\.", sass[m]))
                    ldl_stl = len(re.findall(r"\b(?:LDL|STL)\b", sass[m]))
                    local, stack = usage.get(m, (0, 0))
                    mma_rows.append((arch, short_name(dem[m]), hmma, ldl_stl, stack, local))
                    if hmma == 0 or ldl_stl or stack or local:
                        failures.append(f"{obj} {arch}: {dem[m]}: HMMA x{hmma}, LDL/STL "
                                        f"x{ldl_stl}, stack {stack}, local {local}")
    print("| arch | kernel (vector path) | LDG.E.128 | STG.E.128 | stack bytes | local bytes |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print()
    print("| arch | kernel (tensor cores) | HMMA | LDL/STL | stack bytes | local bytes |")
    print("|---|---|---|---|---|---|")
    for r in mma_rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    for f in failures:
        print("check_sass: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
