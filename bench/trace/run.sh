#!/usr/bin/env bash
# The cost of tracing per decision (docs/bench/trace.md). Usage: run.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1
out=$2
"$build/bench/trace/trace_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/trace.json" --benchmark_out_format=json | tee "$out/trace.txt"
