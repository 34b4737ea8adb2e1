#!/usr/bin/env python3
"""Checks that no file in src/ or kernels/ includes a module above its own.

The modules and what each may include (docs/design.md, "Layers"). A module
may always include itself. Exit status 1 lists every offending include.
"""
import pathlib
import re
import sys

ALLOWED = {
    "core": set(),
    "kernels": {"core"},
    "ops": {"core", "kernels"},
    "nn": {"core", "ops"},
    "optim": {"core", "ops", "nn"},
    "config": {"core", "ops", "nn", "optim"},
    "models": {"core", "ops", "nn", "config"},
    "data": {"core", "config"},
    "decode": {"core", "ops", "nn", "models"},
    "eval": {"core"},
    "checkpoint": {"core", "ops", "nn", "optim", "config", "models", "data"},
    "parallel": {"core", "ops", "nn", "optim"},
    "tasks": {"core", "ops", "nn", "optim", "config", "models", "data", "decode", "eval",
              "checkpoint", "parallel"},
    "train": {"core", "ops", "nn", "optim", "config", "models", "data", "decode", "eval",
              "checkpoint", "parallel", "tasks"},
    "cli": {"core", "ops", "nn", "optim", "config", "models", "data", "decode", "eval",
            "checkpoint", "parallel", "tasks", "train"},
}
# kernels/ may use these header-only helpers of core/ (host and device code).
KERNEL_CORE_HEADERS = {"core/alibi.h", "core/dtype.h", "core/philox.h", "core/rope.h",
                       "core/t5_bias.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(path: pathlib.Path, root: pathlib.Path) -> str:
    rel = path.relative_to(root).parts
    return rel[0] if rel[0] == "kernels" else rel[1]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    files = [p for d in ("src", "kernels") for p in (root / d).rglob("*")
             if p.suffix in {".h", ".cpp", ".cu", ".cuh", ".inc"}]
    problems = []
    for f in sorted(files):
        own = module_of(f, root)
        if own not in ALLOWED:
            problems.append(f"{f.relative_to(root)}: module {own} is not in the layer table")
            continue
        for inc in INCLUDE.findall(f.read_text(errors="replace")):
            target = inc.split("/")[0]
            if "/" not in inc or target not in ALLOWED:
                continue  # a header of the same folder, or a library's
            if target == own:
                continue
            if target not in ALLOWED[own]:
                problems.append(f"{f.relative_to(root)}: {own} includes {inc} ({target} is above it)")
            elif own == "kernels" and target == "core" and inc not in KERNEL_CORE_HEADERS:
                problems.append(f"{f.relative_to(root)}: kernels include {inc} "
                                f"(only {', '.join(sorted(KERNEL_CORE_HEADERS))})")
    for p in problems:
        print(p)
    print(f"checked {len(files)} files: {len(problems)} include(s) against the layers")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
