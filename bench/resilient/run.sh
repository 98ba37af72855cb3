#!/usr/bin/env bash
# Redis outage benchmark: latency per failure mode during SIGKILL / SIGSTOP, recovery time.
# Usage: bench/resilient/run.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=${1:-build}
out=${2:-out/bench}
mkdir -p "$out"
if [ ! -x "$build/bench/resilient/outage_bench" ]; then
  echo "outage_bench not built (needs tollgate_redis and tests/testing)"; exit 0
fi
"$build/bench/resilient/outage_bench" --threads 4 --outage-ms 2000 --deadline-ms 100 \
  --open-ms 250 --reconnect-max-ms 200 | tee "$out/resilient.txt"
