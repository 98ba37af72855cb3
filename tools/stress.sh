#!/usr/bin/env bash
# Runs the timing-sensitive tests (CTest label "timing") repeatedly beside busy
# CPU hogs, and prints how often each passed and failed. The tests must hold on
# a slow, loaded machine; this is how to check that they do.
#
#   tools/stress.sh [--build DIR] [--rounds N] [--hogs N] [--label L] [--regex R] [--jobs N]
#
#   --build   a configured and built build dir (build, build-asan, build-tsan); default build
#   --rounds  how many times to run the tests (default 5)
#   --hogs    busy-looping processes beside them (default 2; 0 for none)
#   --label   CTest label to run (default timing)
#   --regex   only the tests whose names match (ctest -R)
#   --jobs    tests run in parallel (ctest -j; default 2)
#
# Sanitizer options default to the ones `make sanitize` uses (plus, under TSan,
# tools/tsan.supp for the uninstrumented gRPC libraries). The log of each
# round that failed is kept in DIR/stress/round-N.log. Exit status: 0 when
# every run of every test passed, 1 otherwise, 2 on bad usage.
set -euo pipefail

build=build rounds=5 hogs=2 label=timing regex="" jobs=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --label) label=$2; shift 2 ;;
    --regex) regex=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "stress.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for n in "$rounds" "$hogs" "$jobs"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "stress.sh: '$n' is not a number" >&2; exit 2; }
done
if [[ ! -f "$build/CTestTestfile.cmake" ]]; then
  echo "stress.sh: $build is not a configured build dir (make build, make asan or make tsan)" >&2
  exit 2
fi
build=$(cd "$build" && pwd)

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
tsan_supp="$(cd "$(dirname "$0")" && pwd)/tsan.supp"  # races inside Debian's gRPC / Abseil
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$tsan_supp}

# The hogs: plain busy loops, stopped (by their pids) however this script ends.
hog_pids=()
stop_hogs() {
  for pid in "${hog_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hog_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < hogs; i++)); do
  bash -c 'while :; do :; done' &
  hog_pids+=($!)
done

ctest_args=(--test-dir "$build" -L "$label" -LE no_asan -j "$jobs" --output-on-failure)
[[ -n "$regex" ]] && ctest_args+=(-R "$regex")
mkdir -p "$build/stress"
declare -A passed failed
start=$(date +%s)
echo "stress: $build, label $label${regex:+, regex $regex}, $rounds rounds, $hogs hogs, -j$jobs"
for ((round = 1; round <= rounds; round++)); do
  log="$build/stress/round-$round.log"
  ctest "${ctest_args[@]}" >"$log" 2>&1 || true
  # "  3/12 Test  #7: name .......   Passed    1.23 sec" (or ***Failed, ***Timeout, ...)
  while read -r name outcome; do
    if [[ "$outcome" == Passed ]]; then
      passed[$name]=$((${passed[$name]:-0} + 1))
    else
      failed[$name]=$((${failed[$name]:-0} + 1))
    fi
  done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: +([A-Za-z0-9_.-]+) +\.*\** *([A-Za-z]+).*/\1 \2/p' "$log")
  round_failed=$(grep -cE '^ *[0-9]+/[0-9]+ +Test +#[0-9]+: .*(\*\*\*|Not Run|Exception)' "$log" || true)
  echo "round $round: $(grep -E 'tests passed' "$log" || echo 'no summary (see log)')"
  [[ "$round_failed" == 0 ]] && rm -f "$log"
done

total_fail=0
printf '\n%-40s %6s %6s\n' test passed failed
for name in $(printf '%s\n' "${!passed[@]}" "${!failed[@]}" | sort -u); do
  printf '%-40s %6d %6d\n' "$name" "${passed[$name]:-0}" "${failed[$name]:-0}"
  total_fail=$((total_fail + ${failed[$name]:-0}))
done
echo "stress: $rounds rounds in $(($(date +%s) - start)) s, $total_fail failed runs" \
  "(logs of failed rounds in $build/stress/)"
[[ $total_fail -eq 0 ]]
