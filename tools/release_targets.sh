#!/usr/bin/env bash
# Prints what CI's release tree builds (docs/testing.md, "CI time"): every library, program,
# benchmark and example outside tests/, and the tests labelled no_asan (the ones the sanitizer
# tree cannot run: the Debian package, find_package from an install, the perf guards). Every
# other test runs once in CI, in the sanitizer tree, so the release tree does not compile it a
# second time. Needs a Ninja tree; for another generator it prints "all".
#   tools/release_targets.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tools/release_targets.sh BUILD_DIR}
if [ ! -f "$build/build.ninja" ]; then
  echo all
  exit 0
fi
# Outputs of the link steps (executables and static libraries) outside tests/.
ninja -C "$build" -t targets all |
  sed -nE 's/^([^:]+): (CXX_EXECUTABLE_LINKER|CXX_STATIC_LIBRARY_LINKER)__.*/\1/p' |
  grep -v '^tests/' | tr '\n' ' '
# Test binaries for the no_asan label (a test that is a script, not a target, needs none).
for t in $(bash "$(dirname "$0")/test_targets.sh" "$build" no_asan); do
  ninja -C "$build" -t query "$t" >/dev/null 2>&1 && printf '%s ' "$t"
done
echo
