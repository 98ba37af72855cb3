#!/usr/bin/env python3
"""Inclusive instructions per request of two callgrind dumps (bench/callgrind.sh), function by
function, the largest differences first:

  bench/callgrind_diff.py BASE_DUMP BASE_REQUESTS NEW_DUMP NEW_REQUESTS [--top 30]

Names are shortened (template arguments and parameter lists dropped); where several functions
shorten to one name, the largest inclusive count stands for it."""
import argparse
import re
import subprocess


def strip_nested(text, open_c, close_c):
    out, depth = [], 0
    for ch in text:
        if ch == open_c:
            depth += 1
        elif ch == close_c and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def inclusive(dump):
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                          capture_output=True, text=True).stdout
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if not m or "PROGRAM TOTALS" in line or "events annotated" in line:
            continue
        fn = m.group(2)
        fn = re.sub(r" \[[^\]]*\]$", "", fn)      # the object file
        fn = fn.split(":", 1)[1] if ":" in fn.split("(")[0] else fn  # the source file
        fn = strip_nested(strip_nested(fn, "<", ">"), "(", ")")
        fn = re.sub(r"\s+\[clone[^\]]*\]", "", fn).strip()
        ir = int(m.group(1).replace(",", ""))
        rows[fn] = max(rows.get(fn, 0), ir)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("base_requests", type=int)
    ap.add_argument("new")
    ap.add_argument("new_requests", type=int)
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    b, n = inclusive(a.base), inclusive(a.new)
    per = {k: (b.get(k, 0) / a.base_requests, n.get(k, 0) / a.new_requests) for k in set(b) | set(n)}
    print(f"{'base':>9} {'new':>9} {'diff':>9}  inclusive instructions per request")
    for k, (x, y) in sorted(per.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))[:a.top]:
        print(f"{x:9.0f} {y:9.0f} {y - x:+9.0f}  {k[:150]}")


if __name__ == "__main__":
    main()
