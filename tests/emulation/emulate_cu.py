#!/usr/bin/env python3
"""Turns a kernels/*.cu file into host C++ for tests/emulation/kernel_emulation.h.

    python3 tests/emulation/emulate_cu.py [--keep-names] [--emulate-ptx HEADER]
        [--cuda-arch N] kernels/xl_shift.cu OUT.inc

The output is the file's own text with five changes, so that the emulated
code is the kernel's code (--keep-names skips the first and the last: the
emulated device of tests/emulation/device links the output in place of
the CUDA build's kernels, under their own names):
  - `namespace rotor::kernels {` becomes `namespace rotor::kernels::emulated {`
    (apart from the real kernels a CUDA build of rotor_lib holds; unqualified
    names still find rotor::kernels' helpers);
  - every launch `NAME<<<CFG>>>(ARGS)` becomes
    `::emu::launch([&] { NAME(ARGS); }, CFG)`;
  - `extern __shared__ T name[];` becomes a pointer to the emulated block's
    dynamic shared memory;
  - `#include <cub/...>` lines are dropped (kernel_emulation.h has the part
    of cub the launchers use);
  - the launchers that the file's header (kernels/NAME.cuh) declares, and
    the functions of other kernels/ headers it includes that it defines, are
    renamed NAME_emulated and declared at the top of the emulated namespace,
    so that every call in the file binds to the emulated one.
--emulate-ptx HEADER puts `#include "HEADER"` in place of the file's
`// ---- PTX wrappers` section (up to the next `// ---- ` line): the
tensor-core file's inline PTX, which HEADER emulates (tc_ptx_emulation.h).
--cuda-arch N answers the file's own `#if`/`#elif` lines on __CUDA_ARCH__
as a device of that architecture would (700: the Volta file's device code,
which is empty for any other), where host code has no __CUDA_ARCH__ at all;
the headers it includes still see none.
A `#line` directive keeps compiler messages pointing at the .cu file's lines.
"""
import argparse
import re


def match_back(s, i, open_c, close_c):
    """s[i] == close_c: the index of its matching open_c, scanning back."""
    depth = 0
    while i >= 0:
        if s[i] == close_c:
            depth += 1
        elif s[i] == open_c:
            depth -= 1
            if depth == 0:
                return i
        i -= 1
    raise SystemExit("emulate_cu: unbalanced %s%s" % (open_c, close_c))


def match_fwd(s, i, open_c, close_c):
    """s[i] == open_c: the index just past its matching close_c."""
    depth = 0
    while i < len(s):
        if s[i] == open_c:
            depth += 1
        elif s[i] == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise SystemExit("emulate_cu: unbalanced %s%s" % (open_c, close_c))


def rewrite_launches(src):
    out = []
    pos = 0
    count = 0
    while True:
        a = src.find("<<<", pos)
        if a < 0:
            break
        b = src.find(">>>", a)
        cfg = src[a + 3:b]
        # The kernel's name: back over whitespace, a template argument list
        # and a (qualified) identifier.
        i = a - 1
        while src[i].isspace():
            i -= 1
        if src[i] == ">":
            i = match_back(src, i, "<", ">") - 1
        while i >= 0 and (src[i].isalnum() or src[i] in "_:"):
            i -= 1
        start = i + 1
        name = re.sub(r"\s+", " ", src[start:a].strip())
        if not name:
            raise SystemExit("emulate_cu: a launch without a kernel name at offset %d" % a)
        j = b + 3
        while src[j].isspace():
            j += 1
        if src[j] != "(":
            raise SystemExit("emulate_cu: a launch of %s without arguments" % name)
        end = match_fwd(src, j, "(", ")")
        args = src[j:end]
        out.append(src[pos:start])
        # Newlines kept, so the lines after stay where #line says.
        dropped = src[start:end].count("\n") - args.count("\n")
        out.append("::emu::launch([&] { %s%s; }, %s)%s" % (name, args, cfg, "\n" * dropped))
        pos = end
        count += 1
    out.append(src[pos:])
    return "".join(out), count


def header_declarations(header):
    """The function declarations at the top level of the header's
    `namespace rotor::kernels { ... }`: statements ending in `);` (or with
    `= {});`), without a body."""
    try:
        text = open(header).read()
    except OSError:
        return []
    text = re.sub(r"//[^\n]*", "", text)
    begin = text.find("namespace rotor::kernels {")
    if begin < 0:
        return []
    i = text.index("{", begin) + 1
    depth = 0
    stmt = []
    decls = []
    opened_after = ""
    while i < len(text):
        c = text[i]
        if c == "}" and depth == 0:
            break
        stmt.append(c)
        if c == "{":
            if depth == 0:
                opened_after = "".join(stmt[:-1]).rstrip()
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            st = " ".join("".join(stmt).split())
            stmt = []
            if re.match(r"^(inline\s+)?[\w:<>,\s\*&]+?\b\w+\s*\(", st) and st.endswith(");") \
                    and "{" not in st.replace("{}", "") and not st.startswith(("using", "struct", "enum", "template")):
                decls.append(st)
        i += 1
        if c == "}" and depth == 0 and re.search(r"(\)|\bconst|\bnoexcept)$", opened_after):
            stmt = []  # the end of an inline function's body (no `;` follows)
    return decls


def defines(src, decl):
    """Whether src defines (at the start of a line, as a definition is
    written) the function that decl declares."""
    name = re.search(r"\b(\w+)\s*\($", decl[: decl.index("(") + 1]).group(1)
    return re.search(r"^[A-Za-z_][^\n;]*\b%s\s*\(" % name, src, re.M) is not None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep-names", action="store_true")
    parser.add_argument("--emulate-ptx", metavar="HEADER")
    parser.add_argument("--cuda-arch", type=int, metavar="N")
    parser.add_argument("source")
    parser.add_argument("dest")
    args = parser.parse_args()
    keep_names, ptx_header, source, dest = args.keep_names, args.emulate_ptx, args.source, args.dest
    src = open(source).read()
    if ptx_header:
        m = re.search(r"^// ---- PTX wrappers.*?(?=^// ---- )", src, re.M | re.S)
        if not m:
            raise SystemExit("emulate_cu: %s has no `// ---- PTX wrappers` section" % source)
        # The same number of lines, so that #line stays true after it.
        src = (src[:m.start()] + '#include "%s"' % ptx_header + "\n" * m.group(0).count("\n") +
               src[m.end():])
    if args.cuda_arch is not None:
        def arch(m):
            line = re.sub(r"defined\s*\(\s*__CUDA_ARCH__\s*\)|defined\s+__CUDA_ARCH__", "1", m.group(0))
            return re.sub(r"\b__CUDA_ARCH__\b", str(args.cuda_arch), line)
        src, n = re.subn(r"^[ \t]*#[ \t]*(?:el)?if\b.*__CUDA_ARCH__.*$", arch, src, flags=re.M)
        if n == 0:
            raise SystemExit("emulate_cu: --cuda-arch, but %s never tests __CUDA_ARCH__" % source)
    if "namespace rotor::kernels {" not in src and not keep_names:
        raise SystemExit("emulate_cu: %s has no `namespace rotor::kernels {`" % source)
    # The file's own header, and the other kernels/ headers it includes
    # for the launchers it defines (flash_common.cuh's shared steps).
    header = re.sub(r"\.cu$", ".cuh", source)
    decls = [] if keep_names else header_declarations(header)
    for inc in re.findall(r'^#include "(kernels/\w+\.cuh)"', src, re.M):
        if inc != header and not keep_names:
            decls += [d for d in header_declarations(inc) if defines(src, d)]
    # The launchers become NAME_emulated: under their own names, a call with
    # an argument of a rotor::kernels type (HeadsShape, AttentionMask, ...)
    # would find the real launcher too (argument-dependent lookup).
    names = sorted({re.search(r"\b(\w+)\s*\($", d[: d.index("(") + 1]).group(1) for d in decls})
    for n in names:
        pattern = re.compile(r"\b%s\b(?=\s*\()" % n)
        src = pattern.sub(n + "_emulated", src)
        decls = [pattern.sub(n + "_emulated", d) for d in decls]
    # On the namespace's line, so that the lines after keep their numbers.
    if not keep_names:
        src = src.replace("namespace rotor::kernels {",
                          "namespace rotor::kernels::emulated { " + " ".join(decls), 1)
    src = re.sub(r"^#include <cub/.*$", "// (cub: kernel_emulation.h)", src, flags=re.M)
    src = re.sub(
        r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*?)\s+(\w+)"
        r"\s*\[\s*\]\s*;",
        r"\1* \2 = reinterpret_cast<\1*>(::emu::shared_memory());",
        src,
    )
    src, count = rewrite_launches(src)
    if count == 0:
        raise SystemExit("emulate_cu: no launch in %s" % source)
    with open(dest, "w") as f:
        f.write('#line 1 "%s"\n' % source)
        f.write(src)


if __name__ == "__main__":
    main()
