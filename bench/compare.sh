#!/usr/bin/env bash
# tollgated against nginx limit_req (auth, gateway, Redis) and the Envoy RLS in one run; see
# bench/compare.py --help and docs/benchmarks.md ("The comparison command"). From the repo root:
#   bench/compare.sh                                   # build/server/tollgated, 3 rounds of 5 s
#   bench/compare.sh --tollgated base=../old/build/server/tollgated --tollgated main=build/server/tollgated
# Needs wrk, nginx (and redis-server for the Redis setup; build/bench/rls/rls_bench for the RLS).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/compare.py "$@"
