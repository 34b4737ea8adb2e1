#!/usr/bin/env python3
"""Checks that every tensor declaration in src/nn, src/models and src/decode
carries a shape comment (docs/design.md, "Tensors").

A tensor declaration declares a variable or a member of type Tensor: a value
(`Tensor x = ...;`, `Tensor a, b;`, a struct member, a range-for variable), a
`const Tensor`, or a reference bound to one (`const Tensor& t = ...;`), with or
without a namespace (`ops::Tensor`, `rotor::Tensor`); and `auto x = ...` whose
initializer ends in a call of a function that src/ declares as returning a
Tensor, and nothing else (`view`, `forward`, `ctx.empty`, ...). Function
parameters, return types, pointers, containers (`std::vector<Tensor>`) and
temporaries (`Tensor()`, `Tensor::empty(...)`) are not declarations of a
tensor.

A shape comment is a `//` comment holding a bracketed shape (`// [B, T, d]`,
`// i32 [B]`, `// [shape of x]`), at the end of one of the declaration's
lines or alone on the line directly above it.

Usage: check_shape_comments.py [ROOT]. Runs a self-test of the parser first;
exit status 1 lists file:line of every declaration without one.
"""
import pathlib
import re
import sys

FOLDERS = ("src/nn", "src/models", "src/decode")
SUFFIXES = {".h", ".cpp"}
SHAPE = re.compile(r"\[[^\[\]]+\]")
SPECIFIERS = {"const", "static", "mutable", "inline", "constexpr", "thread_local"}
TYPE_KEYWORDS = {"namespace", "class", "struct", "union", "enum"}
TOKEN = re.compile(r"\s*(::|->|&&|[A-Za-z_]\w*|\d[\w.']*|\S)")


def split_source(text):
    """Returns (code, comments): the text with comments and string/char
    literals blanked (newlines kept), and for each line (0-based) the text
    of its // comments and whether it holds code."""
    code = []
    comments = {}
    i, n, line = 0, len(text), 0
    while i < n:
        c = text[i]
        if c == "\n":
            code.append(c)
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            comments.setdefault(line, []).append(text[i + 2:j])
            code.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            chunk = text[i:j]
            code.append("".join(ch if ch == "\n" else " " for ch in chunk))
            line += chunk.count("\n")
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i + 2)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            chunk = text[i:j]
            code.append('""' + "".join("\n" if ch == "\n" else " " for ch in chunk[2:]))
            line += chunk.count("\n")
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isdigit() and i + 1 < n and text[i + 1].isalnum():
                code.append(" ")  # a digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            code.append(c + " " * (j - i - 2) + c)
            i = j
        else:
            code.append(c)
            i += 1
    code = "".join(code)
    has_code = [bool(l.strip()) for l in code.split("\n")]
    return code, comments, has_code


def tokenize(code):
    """[(token, line)] of code without comments, preprocessor lines left out."""
    tokens = []
    directive = False
    for line_no, line in enumerate(code.split("\n")):
        if directive or line.lstrip().startswith("#"):
            directive = line.rstrip().endswith("\\")
            continue
        for m in TOKEN.finditer(line):
            tokens.append((m.group(1), line_no))
    return tokens


def is_ident(tok):
    return re.fullmatch(r"[A-Za-z_]\w*", tok) is not None


def type_start(tokens, k):
    """Given tokens[k] == 'Tensor' (or 'auto'), the index of the first token
    of its type (namespace qualifiers and specifiers before it)."""
    j = k
    while j >= 2 and tokens[j - 1][0] == "::" and is_ident(tokens[j - 2][0]):
        j -= 2
    if j >= 1 and tokens[j - 1][0] == "::":
        j -= 1
    while j >= 1 and tokens[j - 1][0] in SPECIFIERS:
        j -= 1
    return j


def statement_start(tokens, j):
    """Whether tokens[j] opens a declaration: it follows ; { } or a label's
    colon, or it is the first thing in the parentheses of a for."""
    if j == 0:
        return True
    prev = tokens[j - 1][0]
    if prev in {";", "{", "}"}:
        return True
    if prev == ":" and j >= 2 and tokens[j - 2][0] != "?":
        return True  # public: / private: / case X: / default:
    if prev == "(" and j >= 2 and tokens[j - 2][0] == "for":
        return True
    return False


def scope_kinds(tokens):
    """For each token, whether it sits directly in code (a function body or
    block) rather than a namespace or class."""
    in_code = []
    stack = []
    last_boundary = -1
    for k, (tok, _) in enumerate(tokens):
        in_code.append(bool(stack) and stack[-1])
        if tok == "{":
            header = {t for t, _ in tokens[last_boundary + 1:k]}
            is_type = bool(header & TYPE_KEYWORDS) and not (stack and stack[-1] and "(" in header)
            stack.append(not is_type)
            last_boundary = k
        elif tok == "}":
            if stack:
                stack.pop()
            last_boundary = k
        elif tok == ";":
            last_boundary = k
    return in_code


def matching(tokens, k):
    """Index of the bracket closing tokens[k] (one of ( [ { <)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth = 0
    for j in range(k, len(tokens)):
        t = tokens[j][0]
        if t in pairs:
            depth += 1
        elif t in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    return len(tokens) - 1


def statement_end(tokens, k, range_for):
    """Index of the ; ending the statement from tokens[k] (the ) of a
    range-for)."""
    depth = 0
    for j in range(k, len(tokens)):
        t = tokens[j][0]
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
            if depth < 0:
                return j
        elif t == ";" and depth == 0:
            return j
        elif t == ":" and depth == 0 and range_for:
            return j
    return len(tokens) - 1


def function_returns(headers):
    """{function name: set of return types} of the functions the headers'
    texts declare or define."""
    stops = {";", "{", "}", ":", "(", ",", ")", "=", "return", "!", "?", ".", "->"}
    returns = {}
    for text in headers:
        tokens = tokenize(split_source(text)[0])
        for k in range(1, len(tokens)):
            if tokens[k][0] != "(" or not is_ident(tokens[k - 1][0]):
                continue
            name = tokens[k - 1][0]
            q = k - 1  # the start of the qualified name: A::B::name
            while q >= 2 and tokens[q - 1][0] == "::" and is_ident(tokens[q - 2][0]):
                q -= 2
            j = q
            while j >= 1 and tokens[j - 1][0] not in stops:
                j -= 1
            if j >= 1 and tokens[j - 1][0] not in {";", "{", "}", ":"}:
                continue  # a call inside an expression or a parameter list
            words = [t for t, _ in tokens[j:q]
                     if t not in SPECIFIERS | {"virtual", "explicit", "&", "&&", "*", "::"}]
            if not words or words[-1] in {"new", "delete", "operator", "~"}:
                continue  # a call statement, a constructor, a destructor
            returns.setdefault(name, set()).add(words[-1] if is_ident(words[-1]) else "?")
    return returns


def tensor_function_names(returns):
    return {name for name, types in returns.items() if types == {"Tensor"}}


def auto_is_tensor(tokens, eq, end, tensor_functions):
    """Whether the initializer tokens[eq+1:end] ends in a call of a function
    returning a Tensor (or is a Tensor temporary)."""
    init = [t for t, _ in tokens[eq + 1:end]]
    if not init:
        return False
    if init[0] == "Tensor" or init[:2] in (["ops", "::"], ["rotor", "::"]) and "Tensor" in init[:4]:
        return True
    if init[0] == "[":
        return False  # a lambda
    # The last call at the top level of the expression: NAME ( ... ) at its end.
    if init[-1] != ")":
        return False
    depth = 0
    for j in range(len(init) - 1, -1, -1):
        if init[j] == ")":
            depth += 1
        elif init[j] == "(":
            depth -= 1
            if depth == 0:
                return j >= 1 and init[j - 1] in tensor_functions
    return False


def declarations(text, tensor_functions):
    """[(first line, last line, is_range_for)] (0-based) of the tensor
    declarations in a source text."""
    code, _, _ = split_source(text)
    tokens = tokenize(code)
    in_code = scope_kinds(tokens)
    found = []
    for k, (tok, line) in enumerate(tokens):
        if tok not in {"Tensor", "auto"}:
            continue
        if k + 1 < len(tokens) and tokens[k + 1][0] == "::":
            continue  # Tensor::empty(...)
        j = type_start(tokens, k) if tok == "Tensor" else k
        while tok == "auto" and j >= 1 and tokens[j - 1][0] in SPECIFIERS:
            j -= 1
        if not statement_start(tokens, j):
            continue  # a parameter, template argument, cast, or return value
        m = k + 1
        while m < len(tokens) and tokens[m][0] == "const":
            m += 1
        if m < len(tokens) and tokens[m][0] in {"&", "&&"}:
            m += 1
        if m >= len(tokens) or not is_ident(tokens[m][0]) or m + 1 >= len(tokens):
            continue  # Tensor(), Tensor*, auto [a, b]
        after = tokens[m + 1][0]
        range_for = j >= 2 and tokens[j - 1][0] == "(" and tokens[j - 2][0] == "for"
        if after == "(" and not in_code[k]:
            continue  # a function returning a tensor
        if after not in {"=", ";", ",", "{", "[", "(", ":"}:
            continue  # Tensor Class::method(...)
        if after == ":" and not range_for:
            continue
        end = statement_end(tokens, k, range_for)
        if tok == "auto":
            if after != "=" or not auto_is_tensor(tokens, m + 1, end, tensor_functions):
                continue
        found.append((tokens[j][1], tokens[end][1] if end < len(tokens) else tokens[-1][1],
                      range_for))
    return found


def has_shape_comment(first, last, comments, has_code):
    for line in range(first, last + 1):
        if any(SHAPE.search(c) for c in comments.get(line, [])):
            return True
    above = first - 1
    return (above >= 0 and not has_code[above] and
            any(SHAPE.search(c) for c in comments.get(above, [])))


def check_text(text, tensor_functions):
    """(declarations, [0-based lines of those without a shape comment])."""
    _, comments, has_code = split_source(text)
    decls = declarations(text, tensor_functions)
    missing = [first for first, last, _ in decls
               if not has_shape_comment(first, last, comments, has_code)]
    return len(decls), missing


SELF_TEST = [
    # (source, declarations, lines (1-based) reported without a shape comment)
    ("Tensor x = ctx.empty({B, T});  // [B, T]\n", 1, []),
    ("Tensor x = ctx.empty({B, T});  // the input\n", 1, [1]),
    ("// [B, T]\nTensor x = ctx.empty({B, T});\n", 1, []),
    ("Tensor a;  // [B]\nTensor b;\n", 2, [2]),
    ("Tensor f(const Tensor& x, Tensor* y, const Tensor& z = Tensor());\n", 0, []),
    ("const Tensor& value_in(DType d) const;\nTensor& values() { return v_; }\n", 0, []),
    ("Tensor A::f(const Tensor& x) const {\n  return Tensor::empty({1}, d, c);\n}\n", 0, []),
    ("void f() {\n  const Tensor& flat = g ? a : b;\n  ops::Tensor y;\n}\n", 2, [2, 3]),
    ("struct S {\n  Tensor k, v;  // [B, H, T, D]\n  rotor::Tensor w;\n};\n", 2, [3]),
    ("void f() {\n  std::vector<Tensor> parts{a, b};\n  for (Tensor* t : {&a}) g(t);\n}\n",
     0, []),
    ("void f() {\n  for (const Tensor& t : list) g(t);\n}\n", 1, [2]),
    ("void f() {\n  Tensor y(x);\n  auto l = [&](Tensor& t) { t = Tensor(); };\n}\n", 1, [2]),
    ("void f() {\n  Tensor c =\n      g(a, b).view({B, d});  // [B, d]\n}\n", 1, []),
    ("void f() {\n  // [B]\n  int n = 0;\n  Tensor y;\n}\n", 1, [4]),
    ("void f() {\n  x = 1;  // [B]\n  Tensor y;\n}\n", 1, [3]),
    ("void f() {\n  auto a = m.forward(x, ctx).view({B, d});\n  auto b = m.start(x);\n"
     "  auto c = Tensor::zeros({B});  // [B]\n  auto l = [&] { return m.forward(x); };\n}\n",
     2, [2]),
    ("void f() {\n  s = \"Tensor x;\";  /* Tensor y; */\n  // Tensor z;\n}\n", 0, []),
    ("class C {\n public:\n  Tensor w_;\n private:\n  Tensor v_;  // [d]\n};\n", 2, [3]),
    ("void f() {\n  return c ? Tensor() : x;\n  g(Tensor{});\n}\n", 0, []),
]


def self_test():
    functions = {"forward", "view"}
    failures = []
    for source, count, lines in SELF_TEST:
        got_count, missing = check_text(source, functions)
        got_lines = [line + 1 for line in missing]
        if (got_count, got_lines) != (count, lines):
            failures.append(f"self-test: {source!r}: {got_count} declarations, missing {got_lines};"
                            f" expected {count}, {lines}")
    returns = function_returns([
        "struct A {\n  Tensor forward(const Tensor& x);\n  const Tensor& value_in(DType d) const;\n"
        "  Batch to(Device d) const;\n  Tensor view(const Shape& s) const;\n};\n"
        "struct B {\n  Tensor to(Device d) const;\n  Parameter* find(const std::string& n);\n};\n"])
    names = tensor_function_names(returns)
    if names != {"forward", "value_in", "view"}:
        failures.append(f"self-test: tensor-returning functions {sorted(names)}")
    return failures


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    failures = self_test()
    for f in failures:
        print(f)
    if failures:
        return 1
    print(f"self-test: {len(SELF_TEST) + 1} cases pass")
    headers = [p.read_text(errors="replace") for p in sorted((root / "src").rglob("*.h"))]
    tensor_functions = tensor_function_names(function_returns(headers))
    files = sorted(p for folder in FOLDERS for p in (root / folder).rglob("*")
                   if p.suffix in SUFFIXES)
    if not files:
        print(f"no sources under {', '.join(FOLDERS)} of {root}")
        return 1
    total = 0
    problems = []
    for f in files:
        count, missing = check_text(f.read_text(errors="replace"), tensor_functions)
        total += count
        problems += [f"{f.relative_to(root)}:{line + 1}: tensor declaration without a shape comment"
                     for line in missing]
    for p in problems:
        print(p)
    print(f"checked {total} tensor declarations in {len(files)} files: "
          f"{total - len(problems)} with a shape comment, {len(problems)} without")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
