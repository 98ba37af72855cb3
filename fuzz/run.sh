#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for a bounded time, in parallel.
#   fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET PARALLEL [TARGET...]
# `make fuzz` and .ci/run call it after building BUILD_DIR with TOLLGATE_FUZZ=ON.
#
# Each target fuzzes a fresh copy of its committed seed corpus (fuzz/corpus/<name>/,
# never written to) in BUILD_DIR/fuzz-run/<name>/, with its dictionary, an input
# size bound, a per-input time limit (a slower input is reported as a hang) and a
# memory limit. Exit status 1 if any target found a crash, a hang, a leak or a
# property failure; the input is in BUILD_DIR/fuzz-run/<name>/ (crash-*, timeout-*,
# leak-*, oom-*) with the command that reproduces it. Per-target figures
# (execs, execs/s, cov, ft) are printed at the end and kept in summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
# Where the targets read the source tree's files (fuzz/fuzz_input.h, SourcePath).
export TOLLGATE_SOURCE_DIR="$PWD"
build=${1:?usage: fuzz/run.sh BUILD_DIR SECONDS PARALLEL [TARGET...]}
seconds=${2:?seconds per target}
parallel=${3:?parallel targets}
shift 3
build=$(cd "$build" && pwd)

# Input size bounds: what the real entry point accepts, or what a target needs.
max_len() {
  case "$1" in
    http_request | proxy_wire) echo 20000 ;;  # 16 KiB header limit and relay buffer
    decide_body | key_request | release_body | server_config | policy_json | resp_reader | local_state) echo 16384 ;;
    jwt) echo 10000 ;;  # tokens up to 8 KiB
    rls_yaml | time_zone) echo 8192 ;;  # zone files: Debian's largest is under 4 KiB
    rls_request | rls_wildcard | cluster_topology | client_headers) echo 4096 ;;
    tenant_table) echo 65536 ;;  # a few thousand rows: crosses the slot table growth
    admin_query) echo 16384 ;;  # a query fits the 16 KiB header limit
    admin_guard) echo 4096 ;;
    http_text) echo 4096 ;;  # the reference compares are quadratic in the two texts
    response_trailer | chunked_relay) echo 40000 ;;  # past the 16 KiB relay buffer and the trailer bounds
    cookie | json_body) echo 20000 ;;  # past the 16 KiB cookie scan bound; deep and escaped bodies
    *) echo 2048 ;;
  esac
}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  # Every target but those with an open finding (fuzz/quarantine): named, they still run.
  quarantine=" $(grep -v '^#' "$(dirname "$0")/quarantine" 2>/dev/null | tr '\n' ' ') "
  for exe in "$build"/fuzz/fuzz_*; do
    name=$(basename "$exe" | sed 's/^fuzz_//')
    [ -x "$exe" ] || continue
    if [[ "$quarantine" == *" $name "* ]]; then
      echo "fuzz: $name left out: an open finding (fuzz/quarantine, fuzz/findings/$name/)"
      continue
    fi
    targets+=("$name")
  done
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no targets in $build/fuzz (build with TOLLGATE_FUZZ=ON)"; exit 1; }

run_one() {
  local name=$1 work="$build/fuzz-run/$1"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp -r "fuzz/corpus/$name/." "$work/corpus/" 2>/dev/null || true
  local dict=()
  [ -f "fuzz/dict/$name.dict" ] && dict=(-dict="fuzz/dict/$name.dict")
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$build/fuzz/fuzz_$name" "$work/corpus" "${dict[@]}" -max_total_time="$seconds" \
    -max_len="$(max_len "$name")" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/" >"$work/log.txt" 2>&1
  echo $? >"$work/status"
}

echo "fuzz: ${#targets[@]} targets, ${seconds}s each, $parallel at a time"
start=$(date +%s)
running=0
for name in "${targets[@]}"; do
  if [ ! -x "$build/fuzz/fuzz_$name" ]; then
    echo "fuzz: no target $name" >&2
    exit 1
  fi
  run_one "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

failed=0
summary="$build/fuzz-run/summary.txt"
printf '%-18s %-7s %12s %9s %7s %7s %7s\n' target result execs execs/s cov ft corpus >"$summary"
for name in "${targets[@]}"; do
  work="$build/fuzz-run/$name"
  status=$(cat "$work/status" 2>/dev/null || echo 1)
  stat() { sed -n "s/^stat::$1: *//p" "$work/log.txt" | tail -1; }
  last=$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$work/log.txt" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  result=ok
  artifacts=$(ls "$work" | grep -E '^(crash|timeout|leak|oom|slow-unit)-' || true)
  if [ "$status" != 0 ] || [ -n "$artifacts" ]; then
    result=FOUND
    failed=1
  fi
  printf '%-18s %-7s %12s %9s %7s %7s %7s\n' "$name" "$result" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "${corp:-?}" >>"$summary"
  if [ "$result" = FOUND ]; then
    {
      echo "--- $name (exit $status): last lines of $work/log.txt"
      grep -v -E '^#[0-9]+[[:space:]]' "$work/log.txt" | tail -40
      for a in $artifacts; do
        echo "reproduce: $build/fuzz/fuzz_$name $work/$a"
      done
    } >&2
  fi
done
cat "$summary"
echo "fuzz: $(( $(date +%s) - start ))s wall"
[ "$failed" = 0 ] || echo "fuzz: FOUND problems (see above); add each input to fuzz/corpus/<target>/ with a unit test and a fix" >&2
exit "$failed"
