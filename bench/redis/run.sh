#!/usr/bin/env bash
# The seed Redis benchmark, reproduced: starts a throwaway redis-server
# (persistence off) on a free loopback port, runs `tollgate bench redis` and
# `tollgate bench overgrant`, keeps JSON lines and markdown tables in OUT.
# Usage: bench/redis/run.sh [BUILD_DIR] [OUT_DIR]   (SECONDS_PER_RUN=3 sets run length)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-out/bench}
secs=${SECONDS_PER_RUN:-3}
cli="$build/tools/tollgate"
[ -x "$cli" ] || { echo "bench/redis: $cli not built, skipping"; exit 0; }
command -v redis-server >/dev/null || { echo "bench/redis: redis-server not installed, skipping"; exit 0; }
mkdir -p "$out"
dir=$(mktemp -d /tmp/tollgate-bench-redis.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --dir "$dir" --logfile "$dir/redis.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
url="redis://127.0.0.1:$port"
echo "redis-server $(redis-server --version | awk '{print $3}') on $url, $(nproc) cores"
"$cli" bench redis --redis-url "$url" --strategy lua,lua-single,multicmd,watch \
  --scenario hot_key,per_user --concurrency 1,16,64,256 --seconds "$secs" --json \
  | tee "$out/redis.jsonl"
"$cli" bench overgrant --redis-url "$url" --strategy lua,multicmd,watch --json \
  | tee "$out/overgrant.jsonl"
"$cli" bench overgrant --redis-url "$url" --strategy lua,multicmd --processes 4 --json \
  | tee -a "$out/overgrant.jsonl"
