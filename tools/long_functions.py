#!/usr/bin/env python3
"""Lists C++ function definitions longer than a bound (issue 31: no function in
server/ or src/policy/enforcer*.cc over 80 lines).

  python3 tools/long_functions.py [--max N] [--top K] FILE...

A function's length is its lines from the line of its name to its closing
brace, both included (lambdas and local classes count toward the function that
holds them). A scanner, not a parser: it skips comments, string and character
literals (raw strings too) and preprocessor lines, and takes a `{` outside any
function as a function body when the text before it ends in `)` plus
qualifiers (const, noexcept, override, a trailing return type, a constructor's
initializer list) and does not start with a control keyword. Prints
"LINES FILE:LINE NAME", longest first; exits 1 when one is over --max.
"""
import argparse
import re
import sys

CONTROL = {"if", "for", "while", "switch", "catch", "do", "else", "try", "return"}


def strip(text):
    """The text with comments, literals and preprocessor lines blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    out.append("\n")
                    j += 2
                    continue
                j += 1
            i = j
            continue
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'(?:u8|u|U|L)?R"([^(\s]*)\(', text[i:i + 40])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    text = strip(open(path, encoding="utf-8", errors="replace").read())
    found = []
    stack = []  # "fn" or "scope" per open brace
    head_start = 0  # index after the last ; { or } outside functions
    line = 1
    line_at = [0] * (len(text) + 1)
    for i, c in enumerate(text):
        line_at[i] = line
        if c == "\n":
            line += 1
    for i, c in enumerate(text):
        in_fn = "fn" in stack
        if c == "{":
            if in_fn:
                stack.append("inner")
                continue
            head = text[head_start:i]
            words = re.findall(r"[A-Za-z_]\w*", head)
            is_fn = False
            if words and words[0] not in CONTROL and words[0] not in (
                    "namespace", "class", "struct", "union", "enum", "extern"):
                # ") const noexcept override -> T" or a constructor's ") : a_(x), b_{y}"
                sig = re.sub(r"\s+", " ", head).strip()
                if re.search(r"\)\s*(const|noexcept|override|final|mutable|volatile|&|&&|\s)*"
                             r"(->\s*[\w:<>,\s*&]+)?$", sig) or re.search(r"\)\s*:\s*\w", sig):
                    before_args = re.sub(r"operator\s*(\(\)|[^\s(]+)", "operator", sig).split("(")[0]
                    is_fn = "(" in sig and "=" not in before_args
            if is_fn:
                name = re.search(r"([~\w:<>]+)\s*\(", head)
                start = i - len(head) + len(head) - len(head.lstrip())
                found.append([line_at[start], name.group(1) if name else "?", i])
                stack.append("fn")
            else:
                stack.append("scope")
            head_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "scope"
            if kind == "fn":
                f = next(f for f in reversed(found) if len(f) == 3)
                f[2] = line_at[i] - f[0] + 1
                f.append(True)
            if not in_fn or kind == "fn":
                head_start = i + 1
        elif c == ";" and not in_fn:
            head_start = i + 1
    return [(f[2], path, f[0], f[1]) for f in found if len(f) == 4]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    every = sorted((f for p in args.files for f in functions(p)), key=lambda f: -f[0])
    for lines, path, line, name in every[:args.top]:
        print(f"{lines:5d} {path}:{line} {name}")
    over = [f for f in every if f[0] > args.max]
    print(f"{len(every)} functions, {len(over)} over {args.max} lines", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
