#!/usr/bin/python3
"""Writes tollgate.json, the Grafana dashboard for tollgated, from the panel list below.

The JSON is committed; edit this file and run it (`python3 deploy/grafana/make_dashboard.py`)
rather than editing the JSON by hand, so that every panel keeps the same selectors. Every
query uses only metrics tollgated exports (tests/deploy checks them against a live /metrics)
and needs no recording rule, so the dashboard works without deploy/prometheus loaded.
"""
import json
import os

SEL = 'job=~"$job", instance=~"$instance"'
RULE = SEL + ', rule=~"$rule"'
RATE = "[$__rate_interval]"


def ts(title, targets, unit="short", desc="", stack=False, max_=None):
    field = {"unit": unit, "custom": {"fillOpacity": 10 if not stack else 60,
                                      "stacking": {"mode": "normal" if stack else "none"}}}
    if max_ is not None:
        field["max"] = max_
    return {"type": "timeseries", "title": title, "description": desc,
            "fieldConfig": {"defaults": field, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"},
                        "tooltip": {"mode": "multi"}},
            "targets": [{"expr": e, "legendFormat": l} for e, l in targets]}


def stat(title, expr, legend, unit="short", desc="", mappings=None, thresholds=None):
    defaults = {"unit": unit, "mappings": mappings or []}
    if thresholds:
        defaults["thresholds"] = {"mode": "absolute", "steps": thresholds}
    return {"type": "stat", "title": title, "description": desc,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"},
            "targets": [{"expr": expr, "legendFormat": legend, "instant": False}]}


def row(title):
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


OK_BAD = [{"color": "red", "value": None}, {"color": "green", "value": 1}]
PANELS = [
    row("Decisions"),
    ts("Decisions by outcome", [
        (f'sum by (outcome) (rate(tollgate_decisions_total{{{RULE}}}{RATE}))', "{{outcome}}")],
       "reqps", "Per-rule decisions of the selected rules: allowed, rejected, shadow_rejected "
       "(shadow rules that would have rejected), unenforced (the failure mode let it pass), "
       "unavailable (fail-closed 503).", stack=True),
    ts("Rejections by rule", [
        (f'sum by (rule) (rate(tollgate_decisions_total{{{RULE}, outcome="rejected"}}{RATE}))',
         "{{rule}}")],
       "reqps", "The series TollgateRejectionSpike watches. Who: /v1/top?rule=NAME."),
    ts("Rejected share by rule", [
        (f'sum by (rule) (rate(tollgate_decisions_total{{{RULE}, outcome="rejected"}}{RATE}))'
         f' / sum by (rule) (rate(tollgate_decisions_total{{{RULE}}}{RATE}))', "{{rule}}")],
       "percentunit", max_=1),
    ts("Decision latency", [
        (f'histogram_quantile(0.99, sum by (frontend, le) '
         f'(rate(tollgate_decision_duration_seconds_bucket{{{SEL}}}{RATE})))', "p99 {{frontend}}"),
        (f'histogram_quantile(0.5, sum by (frontend, le) '
         f'(rate(tollgate_decision_duration_seconds_bucket{{{SEL}}}{RATE})))', "p50 {{frontend}}")],
       "s", "Policy match and store call (HTTP: no frontend label; Envoy RLS: grpc). "
       "TollgateDecisionLatencyHigh fires on p99 > 5 ms."),
    row("Store"),
    ts("Store calls and errors", [
        (f'sum(rate(tollgate_store_calls_total{{{SEL}}}{RATE}))', "calls"),
        (f'sum(rate(tollgate_store_errors_total{{{SEL}}}{RATE}))', "errors (failure mode answered)")],
       "reqps"),
    stat("Store healthy", f'min(tollgate_store_healthy{{{SEL}}})', "healthy",
         desc="0 when any selected instance's store cannot decide (its failure mode answers).",
         mappings=[{"type": "value", "options": {"0": {"text": "unhealthy"},
                                                 "1": {"text": "healthy"}}}],
         thresholds=OK_BAD),
    ts("Circuit breaker", [
        (f'sum by (state) (tollgate_breaker_state{{{SEL}}})', "{{state}}")],
       "short", "Instances in each breaker state (remote stores only).", stack=True),
    ts("Local store fill", [
        (f'tollgate_store_keys{{{SEL}}} / tollgate_store_max_keys{{{SEL}}}', "{{instance}}")],
       "percentunit", "Keys held per key of the cap (store.local_max_keys); 1 = new keys overflow.",
       max_=1),
    row("HTTP and gateway"),
    ts("Requests by endpoint and code", [
        (f'sum by (endpoint, code) (rate(tollgate_http_requests_total{{{SEL}}}{RATE}))',
         "{{endpoint}} {{code}}")],
       "reqps"),
    ts("Upstream errors (gateway)", [
        (f'sum by (kind) (rate(tollgate_upstream_errors_total{{{SEL}}}{RATE}))', "{{kind}}"),
        (f'sum(rate(tollgate_upstream_requests_total{{{SEL}}}{RATE}))', "sent upstream")],
       "reqps", "connect and broken are 502s, timeout 504s, answered by tollgated itself."),
    ts("Connections", [
        (f'sum(tollgate_connections_active{{{SEL}}})', "active"),
        (f'sum(rate(tollgate_connections_refused_total{{{SEL}}}{RATE}))', "refused/s"),
        (f'sum(rate(tollgate_connection_timeouts_total{{{SEL}}}{RATE}))', "timed out/s")]),
    row("Policy"),
    stat("Last reload", f'min(tollgate_policy_last_reload_success{{{SEL}}})', "last reload",
         desc="Whether every selected instance's last policy reload succeeded.",
         mappings=[{"type": "value", "options": {"0": {"text": "failed"}, "1": {"text": "ok"}}}],
         thresholds=OK_BAD),
    ts("Policy reloads", [
        (f'sum by (result) (increase(tollgate_policy_reloads_total{{{SEL}}}{RATE}))', "{{result}}"),
        (f'max(tollgate_policy_generation{{{SEL}}})', "generation")]),
]


def layout(panels):
    """Rows span the width; other panels fill rows two (timeseries) or four (stat) abreast."""
    x = y = 0
    height = 8
    for i, p in enumerate(panels, start=1):
        p["id"] = i
        if p["type"] == "row":
            if x:
                y += height
                x = 0
            p["gridPos"] = {"h": 1, "w": 24, "x": 0, "y": y}
            y += 1
            continue
        p["datasource"] = {"type": "prometheus", "uid": "${datasource}"}
        for t in p["targets"]:
            t["datasource"] = {"type": "prometheus", "uid": "${datasource}"}
        for j, t in enumerate(p["targets"]):
            t["refId"] = chr(ord("A") + j)
        w = 6 if p["type"] == "stat" else 12
        if x + w > 24:
            x = 0
            y += height
        p["gridPos"] = {"h": height, "w": w, "x": x, "y": y}
        x += w
    return panels


def variable(name, label, query, include_all=True):
    return {"name": name, "label": label, "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": query, "refId": name}, "definition": query,
            "refresh": 2, "includeAll": include_all, "multi": include_all,
            "allValue": ".*", "current": {}, "sort": 1}


DASHBOARD = {
    "uid": "tollgate",
    "title": "tollgate",
    "description": "tollgated: decisions, rejections, latency, store, gateway, reloads "
                   "(deploy/grafana/make_dashboard.py).",
    "tags": ["tollgate", "rate-limiting"],
    "timezone": "utc",
    "schemaVersion": 39,
    "version": 1,
    "editable": True,
    "refresh": "30s",
    "time": {"from": "now-1h", "to": "now"},
    "templating": {"list": [
        {"name": "datasource", "label": "Prometheus", "type": "datasource",
         "query": "prometheus", "current": {}},
        variable("job", "job", "label_values(tollgate_start_time_seconds, job)"),
        variable("instance", "instance",
                 'label_values(tollgate_start_time_seconds{job=~"$job"}, instance)'),
        variable("rule", "rule", 'label_values(tollgate_decisions_total{job=~"$job"}, rule)'),
    ]},
    "annotations": {"list": []},
    "panels": layout(PANELS),
}

if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tollgate.json")
    with open(out, "w") as f:
        json.dump(DASHBOARD, f, indent=2)
        f.write("\n")
    print(out)
