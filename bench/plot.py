#!/usr/bin/env python3
"""Draws a horizontal bar chart as SVG, with no dependencies.

  bench/plot.py --title "Local decision" --unit ns --out docs/img/core.svg \
      "hot key=21" "1M uniform=250" ...
  bench/plot.py --from-gbench out/bench/core.json --metric real_time ...
  bench/plot.py --from-compare out/bench/compare.json --metric ratio_nginx ...

--from-compare reads bench/compare.sh's JSON: one bar per setup and build (medians over its
rounds); --metric is ratio_nginx (tollgated / nginx one worker, in the same round; the issue's
targets drawn as ticks), rps, p99_ms or cpu_us_per_req.

Bars may carry a target: "label=value@target" draws a tick at the target.
"""
import argparse
import html
import json
import sys


def parse_pairs(items):
    rows = []
    for item in items:
        label, _, rest = item.rpartition("=")
        value, _, target = rest.partition("@")
        rows.append((label, float(value), float(target) if target else None))
    return rows


def from_gbench(path, metric, name_filter):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        if name_filter and name_filter not in b["name"]:
            continue
        name = b.get("run_name", b["name"]).replace("BM_", "")
        rows.append((name, float(b[metric]), None))
    return rows


def from_compare(path, metric):
    with open(path) as f:
        data = json.load(f)
    targets = data.get("targets", {}) if metric.startswith("ratio_") else {}
    rows = []
    for e in data["summary"]:
        value = e.get(metric)
        if value is None:
            continue
        rows.append((f"{e['setup']} {e['server']}", round(float(value), 3),
                     targets.get(e["setup"])))
    return rows


def svg(rows, title, unit):
    width, bar_h, gap, left, right = 760, 22, 8, 300, 90
    top = 40
    height = top + len(rows) * (bar_h + gap) + 20
    vmax = max([v for _, v, _ in rows] + [t for _, _, t in rows if t] + [1e-9])
    scale = (width - left - right) / vmax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="13">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="22" font-size="16" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, value, target) in enumerate(rows):
        y = top + i * (bar_h + gap)
        w = max(1.0, value * scale)
        out.append(f'<text x="{left - 8}" y="{y + bar_h * 0.7}" text-anchor="end">'
                   f'{html.escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="#3b7dd8"/>')
        out.append(f'<text x="{left + w + 6:.1f}" y="{y + bar_h * 0.7}">{value:g} {html.escape(unit)}</text>')
        if target:
            tx = left + target * scale
            out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{y - 3}" y2="{y + bar_h + 3}" '
                       f'stroke="#d83b3b" stroke-width="2"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--title", required=True)
    ap.add_argument("--unit", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--from-gbench")
    ap.add_argument("--from-compare")
    ap.add_argument("--metric", default="real_time")
    ap.add_argument("--filter", default="")
    ap.add_argument("pairs", nargs="*")
    a = ap.parse_args()
    if a.from_compare:
        rows = from_compare(a.from_compare, a.metric)
    elif a.from_gbench:
        rows = from_gbench(a.from_gbench, a.metric, a.filter)
    else:
        rows = parse_pairs(a.pairs)
    if not rows:
        sys.exit("plot.py: nothing to plot")
    with open(a.out, "w") as f:
        f.write(svg(rows, a.title, a.unit))


if __name__ == "__main__":
    main()
