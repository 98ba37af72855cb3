#!/usr/bin/env python3
"""HAProxy + tollgated's SPOE agent against HAProxy's own stick-table limiting, in one run
(issue 37; docs/benchmarks.md, "HAProxy: SPOE agent vs stick table").

  bench/haproxy_spoe.sh [--tollgated build/server/tollgated] [--rounds 3] [--seconds 5]
                        [--json out/bench/haproxy_spoe.json]

Three HAProxy 2.6 instances (one process each, HAProxy's default threads) in front of one upstream (a
one-worker nginx serving a small file), measured with `wrk -t1 -c64 --latency` in ROUNDS
alternating rounds (the order flips each round), on free loopback ports:
  plain   HAProxy proxying, no limiting (the floor: what the proxy itself costs)
  stick   HAProxy limiting per client address with a stick table:
          `track-sc0 src` + `sc_http_req_rate(0)` over 1 s, a limit wrk never reaches
  spoe    examples/haproxy/ as shipped (haproxy.cfg + spoe-tollgate.conf, addresses from the
          environment), each request decided by tollgated's SPOE agent on the local store with
          examples/nginx/bench/policy.json (per client address, a limit wrk never reaches)
For each: requests/s, p99, and CPU per request (utime+stime from /proc of HAProxy, plus
tollgated for spoe). The SPOE round trip's cost per request is spoe - plain (p50 and CPU).
Every run is allowed traffic: a limit that refused would measure 429s, not the limiter.
Everything it starts is stopped on exit.
"""
import argparse
import json
import os
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Runner, fmt, free_port, wait_port, wrk  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
EXAMPLE = os.path.join(ROOT, "examples", "haproxy")
POLICY = os.path.join(ROOT, "examples", "nginx", "bench", "policy.json")

STICK_CFG = """global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend www
    bind "${HAPROXY_BIND}"
    stick-table type ip size 100k expire 10s store http_req_rate(1s)
    http-request track-sc0 src
    http-request deny deny_status 429 if { sc_http_req_rate(0) gt 1000000 }
    default_backend app
backend app
    server app "${UPSTREAM}"
"""

PLAIN_CFG = """global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend www
    bind "${HAPROXY_BIND}"
    default_backend app
backend app
    server app "${UPSTREAM}"
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tollgated", default="build/server/tollgated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--json", default="out/bench/haproxy_spoe.json")
    a = p.parse_args()
    r = Runner(a)
    try:
        run(r, a)
    finally:
        r.stop_all()


def haproxy(r, cfg, cwd, env):
    # HAProxy's default threads (one per CPU) in all three, as the example leaves it.
    e = dict(os.environ, **env)
    return r.spawn(["haproxy", "-f", cfg, "-db"], cwd=cwd, env=e)


def run(r, a):
    port = {k: free_port() for k in ("app", "plain", "stick", "spoe", "agent")}
    app = r.nginx("app", 1, f"  server {{ listen 127.0.0.1:{port['app']}; "
                  f"location / {{ root {r.dir}/app/html; }} }}")
    wait_port(port["app"], app)

    cfg = os.path.join(r.dir, "tollgated.json")
    with open(cfg, "w") as f:
        json.dump({"policy": os.path.abspath(POLICY), "listen": f"127.0.0.1:{free_port()}",
                   "spoe": {"listen": f"127.0.0.1:{port['agent']}"}}, f)
    tollgated = r.spawn([a.tollgated, "--config", cfg, "--admin", "", "--log-level", "warn"])
    wait_port(port["agent"], tollgated)

    upstream = f"127.0.0.1:{port['app']}"
    procs = {}
    for name, text in (("plain", PLAIN_CFG), ("stick", STICK_CFG)):
        path = os.path.join(r.dir, f"{name}.cfg")
        with open(path, "w") as f:
            f.write(text)
        procs[name] = haproxy(r, path, r.dir, {"HAPROXY_BIND": f"127.0.0.1:{port[name]}",
                                               "UPSTREAM": upstream})
    procs["spoe"] = haproxy(r, "haproxy.cfg", EXAMPLE,
                            {"HAPROXY_BIND": f"127.0.0.1:{port['spoe']}", "UPSTREAM": upstream,
                             "TOLLGATE_SPOE": f"127.0.0.1:{port['agent']}"})
    for name, proc in procs.items():
        wait_port(port[name], proc)
    # The spoe setup measures decisions only once tollgated answers them (its fields are on
    # the answer): HAProxy's first requests may pass undecided (fail open) while its SPOE
    # connection and health check come up, slowly on a loaded machine.
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port['spoe']}/", timeout=10) as resp:
            if "RateLimit" in resp.headers:
                break
        if time.monotonic() > deadline:
            sys.exit("haproxy_spoe: HAProxy answers without tollgated's RateLimit field after "
                     "60 s: the SPOE agent does not decide")
        time.sleep(0.2)  # a start-up poll, not synchronisation of a measurement

    pids = {"plain": lambda: [procs["plain"].pid], "stick": lambda: [procs["stick"].pid],
            "spoe": lambda: [procs["spoe"].pid, tollgated.pid]}
    rows = []
    print(f"haproxy_spoe: {a.rounds} rounds of {a.seconds:g} s; load "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)
    for rnd in range(a.rounds):
        order = ["plain", "stick", "spoe"]
        if rnd % 2:
            order.reverse()
        for name in order:
            m = wrk(f"http://127.0.0.1:{port[name]}/", a.seconds, [], pids[name])
            m.update({"round": rnd, "setup": name})
            rows.append(m)
            print(f"  round {rnd} {name:6} {m['rps']:10.0f} req/s  p99 {fmt(m['p99_ms'])} ms  "
                  f"p50 {fmt(m['p50_ms'])} ms  cpu {fmt(m['cpu_us_per_req'])} us/req"
                  + (f"  non-2xx {m['non_2xx']}" if m["non_2xx"] else ""), flush=True)

    summary = {}
    for name in ("plain", "stick", "spoe"):
        mine = [x for x in rows if x["setup"] == name]
        summary[name] = {k: statistics.median(x[k] for x in mine if x[k] is not None)
                         for k in ("rps", "p99_ms", "p50_ms", "cpu_us_per_req")}
    ratio = summary["spoe"]["rps"] / summary["stick"]["rps"]
    print("\nmedians          req/s     p50 ms   p99 ms   cpu us/req")
    for name, s in summary.items():
        print(f"  {name:6} {s['rps']:12.0f} {fmt(s['p50_ms']):>9} {fmt(s['p99_ms']):>8} "
              f"{fmt(s['cpu_us_per_req']):>10}")
    print(f"  spoe / stick req/s: {ratio:.2f}; the SPOE round trip: "
          f"+{summary['spoe']['p50_ms'] - summary['plain']['p50_ms']:.3f} ms p50, "
          f"+{summary['spoe']['cpu_us_per_req'] - summary['plain']['cpu_us_per_req']:.1f} "
          f"us CPU per request over plain")
    os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
    with open(a.json, "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "load_at_start": os.getloadavg()[0], "rounds": rows, "summary": summary},
                  f, indent=1)


if __name__ == "__main__":
    main()
