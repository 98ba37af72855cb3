#!/usr/bin/env bash
# Prints the test targets labelled "concurrency" in a configured build dir (built for the
# TSan run). CTest knows the labels; tollgate_add_test names each test after its target.
set -euo pipefail
build=${1:-build-tsan}
ctest --test-dir "$build" -N -L concurrency | sed -nE 's/^ *Test +#[0-9]+: ([A-Za-z0-9_]+).*/\1/p' | tr '\n' ' '
