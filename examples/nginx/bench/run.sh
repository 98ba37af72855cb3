#!/usr/bin/env bash
# HTTP benchmark: tollgated (/v1/auth and gateway mode, local store) against
# nginx limit_req, same wrk settings, same run. Usage (from the repo root):
#   bash examples/nginx/bench/run.sh [BUILD_DIR] [DURATION]
# Prints one line per setup: name, requests/s, p99. See docs/bench/http.md.
set -euo pipefail
BUILD=${1:-build}
DURATION=${2:-10s}
TG=$BUILD/server/tollgated
DIR=$(mktemp -d /tmp/tollgate-httpbench-XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT

NGINX_LIMIT=18101 NGINX_PROXY=18102 NGINX_APP=18103 TG_AUTH=18104 TG_GW=18105
mkdir -p "$DIR/html" "$DIR/logs" "$DIR/tmp"
echo ok > "$DIR/html/index.html"
chmod -R a+rX "$DIR"  # nginx workers run as an unprivileged user
cat > "$DIR/nginx.conf" <<CONF
worker_processes auto;
error_log $DIR/logs/error.log;
pid $DIR/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $DIR/tmp; proxy_temp_path $DIR/tmp; fastcgi_temp_path $DIR/tmp;
  uwsgi_temp_path $DIR/tmp; scgi_temp_path $DIR/tmp;
  # One bucket per client address, large enough that wrk is never limited:
  # the cost of the check is measured, not rejections.
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1000000r/s;
  upstream app { server 127.0.0.1:$NGINX_APP; keepalive 64; }
  server { listen 127.0.0.1:$NGINX_APP; location / { root $DIR/html; } }
  server { listen 127.0.0.1:$NGINX_LIMIT;
           location / { limit_req zone=perip burst=1000000 nodelay; root $DIR/html; } }
  server { listen 127.0.0.1:$NGINX_PROXY;
           location / { limit_req zone=perip burst=1000000 nodelay; proxy_pass http://app;
                        proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
CONF
nginx -p "$DIR" -c "$DIR/nginx.conf" -g 'daemon off;' & PIDS+=($!)
POLICY=examples/nginx/bench/policy.json
$TG --policy $POLICY --listen 127.0.0.1:$TG_AUTH --admin '' --log-level warn ${AUTH_THREADS:+--threads $AUTH_THREADS} & PIDS+=($!)
$TG --policy $POLICY --listen 127.0.0.1:$TG_GW --admin '' --log-level warn \
    --upstream http://127.0.0.1:$NGINX_APP ${GW_THREADS:+--threads $GW_THREADS} & PIDS+=($!)
TG_REDIS=18106 REDIS_PORT=18107
if command -v redis-server >/dev/null; then
  redis-server --port $REDIS_PORT --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$DIR" >/dev/null & PIDS+=($!)
  sleep 0.3
  $TG --policy $POLICY --listen 127.0.0.1:$TG_REDIS --admin '' --log-level warn \
      --store redis://127.0.0.1:$REDIS_PORT & PIDS+=($!)
fi
sleep 1

run() {  # name url [header]
  local name=$1 url=$2; shift 2
  wrk -t1 -c64 -d2s "$@" "$url" >/dev/null  # warm-up
  local out; out=$(wrk -t1 -c64 -d"$DURATION" --latency "$@" "$url")
  local rps p99
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  local errors; errors=$(echo "$out" | grep -E "Non-2xx|Socket errors" | tr '\n' ' ' || true)
  printf '%-34s %12s req/s   p99 %8s   %s\n' "$name" "$rps" "$p99" "$errors"
}
run "nginx limit_req (static file)" "http://127.0.0.1:$NGINX_LIMIT/"
run "tollgated GET /v1/auth" "http://127.0.0.1:$TG_AUTH/v1/auth" -H 'X-Original-URI: /api/items'
run "nginx limit_req + proxy_pass" "http://127.0.0.1:$NGINX_PROXY/"
run "tollgated gateway -> nginx" "http://127.0.0.1:$TG_GW/"
if command -v redis-server >/dev/null; then
  run "tollgated GET /v1/auth (Redis)" "http://127.0.0.1:$TG_REDIS/v1/auth" -H 'X-Original-URI: /api/items'
fi
