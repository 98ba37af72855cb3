#!/usr/bin/env python3
"""CPU seconds of one translation unit's compile, as its build tree compiles it, with flags swapped.

  tools/tu_time.py BUILD_DIR FILE_SUFFIX [OLD=>NEW ...]

Finds the TU whose path ends with FILE_SUFFIX in BUILD_DIR/compile_commands.json, runs its
command without ccache (output to a temporary object), and prints the compiler's user+sys CPU
seconds: a figure a loaded machine changes far less than wall time. Each OLD=>NEW replaces every
argument equal to OLD (an empty NEW drops it), e.g. `-O2=>-O1` or `-D_FORTIFY_SOURCE=2=>`.
docs/testing.md ("CI time") has the figures it gave.
"""
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build, suffix = sys.argv[1], sys.argv[2]
    subs = [a.split("=>", 1) for a in sys.argv[3:]]
    if any(len(s) != 2 for s in subs):
        sys.exit("a substitution is OLD=>NEW")
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = [e for e in json.load(f) if e["file"].endswith(suffix)]
    if len(entries) != 1:
        sys.exit(f"{len(entries)} TUs end with {suffix}: name one")
    entry = entries[0]
    args = shlex.split(entry["command"])
    if os.path.basename(args[0]) == "ccache":
        args = args[1:]
    out = []
    for a in args:
        for old, new in subs:
            if a == old:
                a = new
        if a:
            out.append(a)
    with tempfile.TemporaryDirectory() as tmp:
        out[out.index("-o") + 1] = os.path.join(tmp, "tu.o")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(out, cwd=entry["directory"], capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    label = " ".join("=>".join(s) for s in subs) or "as built"
    print(f"{suffix} ({label}): {cpu:.1f} s CPU, exit {done.returncode}")
    if done.returncode:
        print(done.stderr[-4000:], file=sys.stderr)
        sys.exit(done.returncode)


if __name__ == "__main__":
    main()
