#!/usr/bin/env bash
# Runs every benchmark that was built and keeps the output in out/bench/.
# Usage: bench/run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=out/bench
mkdir -p "$out"
echo "== core (local decisions, memory per key)"
"$build/bench/core_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/core.json" --benchmark_out_format=json | tee "$out/core.txt"
# Other benchmark binaries and scripts register themselves as bench/*/run.sh.
for script in bench/*/run.sh; do
  [ -f "$script" ] || continue
  echo "== $(dirname "$script")"
  bash "$script" "$build" "$out" || echo "benchmark $script failed (exit $?)"
done
echo "results in $out/"
