#!/usr/bin/env bash
# Prints the test targets labelled "concurrency" (built for the TSan run).
cd "$(dirname "$0")/.."
grep -rhoE 'tollgate_add_test\([a-z_0-9]+[^)]*LABELS[^)]*concurrency' tests --include=CMakeLists.txt \
  | sed -E 's/tollgate_add_test\(([a-z_0-9]+).*/\1/' | sort -u | tr '\n' ' '
