#!/usr/bin/env bash
# HAProxy + tollgated's SPOE agent vs HAProxy's stick-table limiting in one run; see
# bench/haproxy_spoe.py --help and docs/benchmarks.md ("HAProxy: SPOE agent vs stick table").
# From the repo root:
#   bench/haproxy_spoe.sh                      # build/server/tollgated, 3 rounds of 5 s
# Needs wrk, haproxy and nginx (the upstream).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/haproxy_spoe.py "$@"
