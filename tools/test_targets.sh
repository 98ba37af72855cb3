#!/usr/bin/env bash
# Prints the test targets with CTest label LABEL (default concurrency) in a
# configured build dir, to build just those (the TSan run builds the
# "concurrency" ones; `make test-stress` the "timing" ones). CTest knows the
# labels; tollgate_add_test names each test after its target.
set -euo pipefail
build=${1:-build-tsan}
label=${2:-concurrency}
ctest --test-dir "$build" -N -L "$label" | sed -nE 's/^ *Test +#[0-9]+: ([A-Za-z0-9_]+).*/\1/p' | tr '\n' ' '
