#!/usr/bin/env bash
# Resilience benchmarks: the layer's own cost per decision (breaker_bench), and decision latency
# per failure mode during a real Redis outage plus recovery time (outage_bench).
# Usage: bench/resilient/run.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=${1:-build}
out=${2:-out/bench}
mkdir -p "$out"
if [ -x "$build/bench/resilient/breaker_bench" ]; then
  "$build/bench/resilient/breaker_bench" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
    --benchmark_out="$out/resilient_breaker.json" --benchmark_out_format=json |
    tee "$out/resilient_breaker.txt"
fi
if [ ! -x "$build/bench/resilient/outage_bench" ]; then
  echo "outage_bench not built (needs tollgate_redis and tests/testing)"; exit 0
fi
"$build/bench/resilient/outage_bench" --threads 4 --outage-ms 2000 --deadline-ms 100 \
  --open-ms 250 --reconnect-max-ms 200 | tee "$out/resilient_outage.txt"
