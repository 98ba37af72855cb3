#!/usr/bin/env bash
# Where a build dir's time went: the slowest compiles and links (from Ninja's .ninja_log) and the
# slowest tests of its last ctest run (Testing/Temporary/LastTest.log, else CTestCostData.txt).
#
#   tools/slowest.sh BUILD_DIR [N]     # N rows of each (default 10)
#
# .ninja_log keeps the last run of every output; a ccache hit shows as a short step, so figures
# of a cold build come from a build with an empty (or disabled: CCACHE_DISABLE=1) cache.
# Also prints the sums: all compile steps (CPU seconds, what PCH and shared objects cut), links.
set -euo pipefail
build=${1:?usage: tools/slowest.sh BUILD_DIR [N]}
n=${2:-10}

if [ -f "$build/.ninja_log" ]; then
  # Format v5: start_ms end_ms mtime output hash; a later line for the same output wins.
  steps=$(awk -F'\t' '!/^#/ { t[$4] = $2 - $1 } END { for (o in t) printf "%d\t%s\n", t[o], o }' \
    "$build/.ninja_log")
  objects=$(grep -E '\.(o|gch)$' <<<"$steps" || true)
  links=$(grep -vE '\.(o|gch)$' <<<"$steps" | grep -vE '\.(a|ninja|cmake|txt|h|cc|stamp)$|/gen/' || true)
  echo "== $build: the $n slowest compiles (s)"
  sort -rn <<<"$objects" | head -n "$n" | awk -F'\t' '{ printf "%8.1f  %s\n", $1 / 1000, $2 }'
  echo "== $build: the $n slowest links (s)"
  sort -rn <<<"$links" | head -n "$n" | awk -F'\t' '{ printf "%8.1f  %s\n", $1 / 1000, $2 }'
  echo "== $build: sums (s)"
  awk -F'\t' '{ s += $1; c++ } END { printf "%8.1f  %d compile steps\n", s / 1000, c }' <<<"$objects"
  awk -F'\t' '{ s += $1; c++ } END { printf "%8.1f  %d link steps\n", s / 1000, c }' <<<"$links"
  # Wall time of the last ninja run: steps are logged as they end, so end times only grow within
  # one run; a smaller one starts the next run.
  awk -F'\t' '!/^#/ { if ($2 < last) { lo = ""; hi = 0 } last = $2
      if (lo == "" || $1 < lo) lo = $1; if ($2 > hi) hi = $2 }
    END { printf "%8.1f  wall of the last ninja run\n", (hi - lo) / 1000 }' "$build/.ninja_log"
else
  echo "== $build: no .ninja_log (not a Ninja build)"
fi

log=$build/Testing/Temporary/LastTest.log
cost=$build/Testing/Temporary/CTestCostData.txt
if [ -f "$log" ]; then
  echo "== $build: the $n slowest tests of the last ctest run (s)"
  # Each test's block: "N/M Test: name" ... "Test time =   1.23 sec".
  times=$(awk '/^[0-9]+\/[0-9]+ Test: / { name = $3 }
       /^Test time = / && name != "" { printf "%.2f\t%s\n", $4, name; name = "" }' "$log")
  sort -rn <<<"$times" | head -n "$n" | awk -F'\t' '{ printf "%10.2f  %s\n", $1, $2 }'
  awk -F'\t' '{ s += $1; c++ } END { printf "%10.2f  sum of %d tests\n", s, c }' <<<"$times"
elif [ -f "$cost" ]; then
  echo "== $build: the $n slowest tests (CTestCostData: average of its runs, s)"
  awk '/^---/ { exit } NF == 3 { printf "%10.2f  %s\n", $3, $1 }' "$cost" | sort -rn | head -n "$n"
else
  echo "== $build: no ctest log yet"
fi
