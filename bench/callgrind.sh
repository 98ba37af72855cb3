#!/usr/bin/env bash
# Instructions per GET /v1/auth (local store, --threads 1) under callgrind: counts do not depend
# on the machine's load, so two builds compare on a busy machine. Usage (from the repo root):
#   bench/callgrind.sh TOLLGATED [REQUESTS] [OUT_DIR]
# Starts TOLLGATED under valgrind on a free loopback port, sends 500 warm-up requests on one
# keep-alive connection (bench/http_client.py), zeroes the counters, sends REQUESTS (20000), dumps,
# and prints instructions per request and the top functions (inclusive) in OUT_DIR/callgrind.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
TG=$1
N=${2:-20000}
OUT=${3:-out/bench/callgrind}
mkdir -p "$OUT"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rm -f "$OUT"/callgrind.out.*
valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p" \
  "$TG" --policy examples/nginx/bench/policy.json --listen 127.0.0.1:$PORT --admin '' \
  --log-level warn --threads 1 2>"$OUT/valgrind.log" &
VG=$!
trap 'kill $VG 2>/dev/null || true; wait $VG 2>/dev/null || true' EXIT
python3 bench/http_client.py --port "$PORT" --requests 500 --wait 120
callgrind_control -z $VG >/dev/null
python3 bench/http_client.py --port "$PORT" --requests "$N"
callgrind_control -d $VG >/dev/null
kill $VG; wait $VG 2>/dev/null || true
trap - EXIT
DUMP=$(ls -t "$OUT"/callgrind.out.*.[0-9]* 2>/dev/null | head -1)
[ -n "$DUMP" ] || DUMP=$(ls -t "$OUT"/callgrind.out.* | head -1)
TOTAL=$(awk '/^(summary|totals):/ {print $2; exit}' "$DUMP")
echo "instructions: $TOTAL over $N requests = $((TOTAL / N)) per request ($DUMP)"
callgrind_annotate --inclusive=yes "$DUMP" 2>/dev/null | head -60 > "$OUT/callgrind.txt"
