#!/usr/bin/env bash
# Formats (or with --check, verifies) every C++ file tracked or added in the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' '*.cpp' '*.hpp' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
[ ${#files[@]} -gt 0 ] || exit 0
if [ "${1:-}" = "--check" ]; then
  if ! report=$(clang-format --dry-run --Werror "${files[@]}" 2>&1); then
    grep -E '^[^ ].*: (error|warning)' <<<"$report" | cut -d: -f1 | sort -u | sed 's/^/needs clang-format: /'
    echo "format check failed: run 'make format'"
    exit 1
  fi
  echo "format check: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi
