#!/usr/bin/python3
"""Renders the Grafana dashboard's panels to one SVG, from a live Prometheus.

Grafana is not packaged in Debian, so docs/img/dashboard.svg is not a Grafana screenshot:
this script runs each panel's queries of deploy/grafana/tollgate.json unchanged (variables
set to match everything, $__rate_interval to RATE_INTERVAL) against Prometheus'
query_range API and draws them in the dashboard's grid, as line charts (stat panels as
their last value). Standard library only.

usage: render_panels.py PROMETHEUS_URL START END OUT.svg [--step S] [--rate-interval D]
"""
import argparse
import html
import json
import math
import os
import urllib.parse
import urllib.request

COLORS = ["#7eb26d", "#e24d42", "#1f78c1", "#eab839", "#6ed0e0", "#ba43a9", "#ef843c",
          "#705da0", "#508642", "#cca300"]
CELL_W, CELL_H = 40, 28  # pixels per grid unit (24 wide) and per grid row


def query_range(url, expr, start, end, step):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{q}", timeout=30) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]


def legend(fmt, metric):
    out = fmt
    for k, v in metric.items():
        out = out.replace("{{" + k + "}}", v)
    while "{{" in out:  # a label the series does not have
        a = out.index("{{")
        out = out[:a] + out[out.index("}}", a) + 2:]
    return out.strip() or "value"


def fmt_value(v, unit):
    if v is None or math.isnan(v):
        return "-"
    if unit == "percentunit":
        return f"{v * 100:.0f}%"
    if unit == "s":
        return f"{v * 1e3:.2g} ms" if v < 1 else f"{v:.2g} s"
    if abs(v) >= 1000:
        return f"{v / 1000:.1f}k"
    return f"{v:.3g}"


def text(x, y, s, size=11, anchor="start", color="#d8d9da", weight="normal"):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{color}" font-weight="{weight}">{html.escape(s)}</text>')


def render_timeseries(panel, series, x0, y0, w, h, start, end):
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    out = []
    px, py, pw, ph = x0 + 48, y0 + 28, w - 60, h - 70
    values = [v for _, pts in series for _, v in pts if not math.isnan(v)]
    ymax = max(values) if values else 1.0
    ymax = panel.get("fieldConfig", {}).get("defaults", {}).get("max", ymax * 1.1 or 1.0)
    ymax = ymax or 1.0
    for i in range(5):
        yy = py + ph - ph * i / 4
        out.append(f'<line x1="{px}" y1="{yy:.1f}" x2="{px + pw}" y2="{yy:.1f}" stroke="#2c3235"/>')
        out.append(text(px - 4, yy + 4, fmt_value(ymax * i / 4, unit), 9, "end", "#8e8e8e"))
    for i, (name, pts) in enumerate(series):
        color = COLORS[i % len(COLORS)]
        path = []
        for t, v in pts:
            if math.isnan(v):
                continue
            xx = px + pw * (t - start) / (end - start)
            yy = py + ph - ph * min(v, ymax) / ymax
            path.append(f"{'M' if not path else 'L'}{xx:.1f},{yy:.1f}")
        if path:
            out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        lx = x0 + 10 + (i % 3) * (w - 20) / 3
        ly = y0 + h - 24 + (i // 3) * 12
        if i < 6:
            out.append(f'<rect x="{lx:.1f}" y="{ly - 7:.1f}" width="10" height="3" fill="{color}"/>')
            out.append(text(lx + 14, ly, name[:38], 9))
    minutes = (end - start) / 60
    out.append(text(px, py + ph + 12, "-%.0f min" % minutes, 9, "start", "#8e8e8e"))
    out.append(text(px + pw, py + ph + 12, "end of run", 9, "end", "#8e8e8e"))
    return out


def render_stat(panel, series, x0, y0, w, h):
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    last = None
    for _, pts in series:
        for _, v in pts:
            last = v
    shown = fmt_value(last, defaults.get("unit", "short"))
    for m in defaults.get("mappings", []):
        if last is not None and str(int(last)) in m.get("options", {}):
            shown = m["options"][str(int(last))]["text"]
    color = "#37872d" if last == 1 else "#c4162a"
    return [f'<rect x="{x0 + 8}" y="{y0 + 28}" width="{w - 16}" height="{h - 36}" fill="{color}" rx="3"/>',
            text(x0 + w / 2, y0 + h / 2 + 18, shown, 28, "middle", "#ffffff", "bold")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prometheus")
    ap.add_argument("start", type=float)
    ap.add_argument("end", type=float)
    ap.add_argument("out")
    ap.add_argument("--step", type=float, default=2)
    ap.add_argument("--rate-interval", default="10s")
    ap.add_argument("--dashboard", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "tollgate.json"))
    a = ap.parse_args()
    dashboard = json.load(open(a.dashboard))
    panels = dashboard["panels"]
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    width, height = 24 * CELL_W, bottom * CELL_H + 40
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif"><rect width="100%" height="100%" fill="#111217"/>',
           text(10, 24, "tollgate dashboard (deploy/grafana/tollgate.json), rendered by "
                "deploy/grafana/render_panels.py from a live run, not by Grafana", 13)]
    for p in panels:
        g = p["gridPos"]
        x0, y0, w, h = g["x"] * CELL_W, g["y"] * CELL_H + 36, g["w"] * CELL_W, g["h"] * CELL_H
        if p["type"] == "row":
            svg.append(text(x0 + 8, y0 + 20, p["title"], 14, weight="bold"))
            continue
        svg.append(f'<rect x="{x0 + 3}" y="{y0 + 3}" width="{w - 6}" height="{h - 6}" '
                   f'fill="#181b1f" stroke="#2c3235"/>')
        svg.append(text(x0 + 12, y0 + 20, p["title"], 12, weight="bold"))
        series = []
        for t in p["targets"]:
            expr = (t["expr"].replace("$__rate_interval", a.rate_interval)
                    .replace('"$job"', '".*"').replace('"$instance"', '".*"')
                    .replace('"$rule"', '".*"'))
            for r in query_range(a.prometheus, expr, a.start, a.end, a.step):
                pts = [(float(ts), float(v)) for ts, v in r["values"]]
                series.append((legend(t.get("legendFormat", ""), r["metric"]), pts))
        values = [v for _, pts in series for _, v in pts if not math.isnan(v)]
        print(f'{p["title"]}: {len(series)} series, max {max(values) if values else "-"}, '
              f'last {", ".join(f"{n}={pts[-1][1]:.4g}" for n, pts in series[:6] if pts)}')
        if p["type"] == "stat":
            svg += render_stat(p, series, x0, y0, w, h)
        else:
            svg += render_timeseries(p, series, x0, y0, w, h, a.start, a.end)
    svg.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(a.out)


if __name__ == "__main__":
    main()
