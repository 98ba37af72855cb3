#!/usr/bin/env bash
# Makes docs/img/dashboard.svg: a live tollgated gateway (local store) in front of a small
# upstream, scraped every second by a real Prometheus (Debian's, with
# deploy/prometheus/tollgate.rules.yml loaded), driven for DURATION seconds by
# deploy/grafana/traffic.py (steady clients, one client flooding, upstream 502s, a broken
# policy and its fix), then every panel of deploy/grafana/tollgate.json rendered from that
# Prometheus by render_panels.py. Grafana itself is not in Debian: the SVG is drawn by the
# script, from the dashboard's own queries.
# usage: deploy/grafana/screenshot.sh [BUILD_DIR] [OUT.svg]    (DURATION=150 by default)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
out=${2:-$src/docs/img/dashboard.svg}
duration=${DURATION:-150}
py=/usr/bin/python3

work=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-screenshot.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() {  # wait_for DESCRIPTION COMMAND...: polls up to 30 s
  local what=$1; shift
  for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "screenshot: $what did not come up" >&2; return 1
}

cp "$here/demo-policy.json" "$work/policy.json"
upstream_port=$(free_port)
$py "$here/traffic.py" upstream "$upstream_port" &
pids+=($!)
wait_for "the upstream" curl -sf "http://127.0.0.1:$upstream_port/ok"

"$build/server/tollgated" --policy "$work/policy.json" --listen 127.0.0.1:0 --admin 127.0.0.1:0 \
  --upstream "http://127.0.0.1:$upstream_port" 2>"$work/tollgated.log" &
pids+=($!)
wait_for "tollgated" grep -q '"msg":"started"' "$work/tollgated.log"
started=$(grep '"msg":"started"' "$work/tollgated.log")
listen=$(sed -E 's/.*"listen":"([^"]+)".*/\1/' <<<"$started")
admin=$(sed -E 's/.*"admin":"([^"]+)".*/\1/' <<<"$started")

prom_port=$(free_port)
cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$src/deploy/prometheus/tollgate.rules.yml"]
scrape_configs:
  - job_name: tollgate
    static_configs: [{targets: ["$admin"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
pids+=($!)
wait_for "prometheus" curl -sf "http://127.0.0.1:$prom_port/-/ready"

start=$(date +%s)
$py "$here/traffic.py" drive "$listen" "$work/policy.json" "$here/demo-policy.json" "$duration"
end=$(date +%s)
# Until Prometheus holds a scrape taken after the traffic ended.
scraped_after_end() {
  curl -sf "http://127.0.0.1:$prom_port/api/v1/query?query=timestamp(tollgate_start_time_seconds)" |
    $py -c "import json,sys; r=json.load(sys.stdin)['data']['result']; sys.exit(0 if r and float(r[0]['value'][1]) >= $end else 1)"
}
wait_for "a scrape after the run" scraped_after_end
$py "$here/render_panels.py" "http://127.0.0.1:$prom_port" "$start" "$end" "$out"
# Prometheus keeps every alert's state as the series ALERTS: which fired during the run.
echo "alerts that fired during the run:"
curl -sG "http://127.0.0.1:$prom_port/api/v1/query" \
  --data-urlencode "query=max_over_time(ALERTS{alertstate=\"firing\"}[$((end - start + 5))s])" \
  --data-urlencode "time=$end" | $py -c \
  'import json,sys; [print("  ", a["metric"]["alertname"], a["metric"].get("rule", "")) for a in json.load(sys.stdin)["data"]["result"]]'
