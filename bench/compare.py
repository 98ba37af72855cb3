#!/usr/bin/env python3
"""tollgated against nginx limit_req in one run: the comparison of issue 32.

  bench/compare.sh [--tollgated NAME=PATH]... [--rls-bench PATH] [--rounds 3] [--seconds 5]
                   [--nginx-auto] [--no-redis] [--no-rls] [--json out/bench/compare.json]

Every setup is measured with `wrk -t1 -c64 --latency` (the RLS with rls_bench in its own process)
in ROUNDS alternating rounds (the order of the servers flips each round), on free loopback ports:
  limit    nginx limit_req serving empty_gif (the reference of auth1, auth and redis)
  proxy    nginx limit_req + proxy_pass U (the reference of gateway)
  auth1    GET /v1/auth, local store, tollgated --threads 1    vs nginx limit_req (empty_gif)
  auth     GET /v1/auth, local store, default threads          vs the same nginx
  gateway  tollgated --upstream U                              vs nginx limit_req + proxy_pass U
  redis    GET /v1/auth on one local redis-server              vs nginx limit_req
  rls      tollgated --grpc (Envoy RLS, one descriptor, local store), rls_bench --target
nginx runs with ONE worker (its best configuration on 2 cores beside wrk); --nginx-auto adds
`worker_processes auto` as a second reference. The upstream U is its own one-worker nginx,
shared by both gateways. For each measurement: requests/s, p99, and the server's CPU per request
(utime+stime of the server process, or of nginx's workers, from /proc/<pid>/stat before and
after, divided by the requests served). Ratios are tollgated / nginx within the same round, so
both sides met the same machine load. Prints a table and writes JSON that bench/plot.py draws
(--from-compare). Everything it starts is stopped on exit.
"""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TICKS = os.sysconf("SC_CLK_TCK")
POLICY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "nginx",
                      "bench", "policy.json")
RLS_YAML = """domain: bench
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000000}
"""
# Targets of issue 32 (ratios to nginx one worker, in one run): drawn as ticks by plot.py.
TARGETS = {"auth1": 1.25, "auth": 1.0, "gateway": 1.0, "redis": 0.9}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"compare: {proc.args[0]} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)  # a start-up poll, not synchronisation of a measurement
    sys.exit(f"compare: nothing listens on {port} after {timeout} s")


def cpu_ticks(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def to_ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]


class Runner:
    def __init__(self, args):
        self.args = args
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="tollgate-compare-")

    def spawn(self, argv, **kw):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(
            os.path.join(self.dir, f"{len(self.procs)}.log"), "w"), **kw)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["rm", "-rf", self.dir])

    def nginx(self, name, workers, body):
        root = os.path.join(self.dir, name)
        for sub in ("logs", "tmp", "html"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
        with open(os.path.join(root, "html", "index.html"), "w") as f:
            f.write("ok\n")
        conf = f"""worker_processes {workers};
error_log {root}/logs/error.log;
pid {root}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {root}/tmp; proxy_temp_path {root}/tmp; fastcgi_temp_path {root}/tmp;
  uwsgi_temp_path {root}/tmp; scgi_temp_path {root}/tmp;
  limit_req_zone $binary_remote_addr zone=perip:10m rate=1000000r/s;
{body}
}}
"""
        path = os.path.join(root, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        subprocess.run(["chmod", "-R", "a+rX", self.dir])  # workers run unprivileged
        return self.spawn(["nginx", "-p", root, "-c", path, "-g", "daemon off;"])

    def tollgated(self, binary, port, *extra):
        p = self.spawn([binary, "--policy", POLICY, "--listen", f"127.0.0.1:{port}", "--admin", "",
                        "--log-level", "warn", *extra])
        wait_port(port, p)
        return p


def wrk(url, seconds, headers, cpu_pids):
    base = ["wrk", "-t1", "-c64"]
    hdr = [a for h in headers for a in ("-H", h)]
    subprocess.run(base + ["-d1s"] + hdr + [url], capture_output=True)  # warm-up
    pids = cpu_pids()
    before = cpu_ticks(pids)
    run = subprocess.run(base + [f"-d{seconds}s", "--latency"] + hdr + [url],
                         capture_output=True, text=True)
    out = run.stdout
    if not re.search(r"(\d+) requests in", out):
        sys.exit(f"compare: wrk {url} printed no result: {run.stdout} {run.stderr}")
    ticks = cpu_ticks(pids) - before
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = next((to_ms(l.split()[1]) for l in out.splitlines() if l.split()[:1] == ["99%"]), None)
    p50 = next((to_ms(l.split()[1]) for l in out.splitlines() if l.split()[:1] == ["50%"]), None)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = int(bad.group(1)) if bad else 0
    cpu_us = ticks / TICKS * 1e6 / reqs if reqs else None
    return {"rps": rps, "p99_ms": p99, "p50_ms": p50, "requests": reqs, "cpu_us_per_req": cpu_us,
            "non_2xx": errors}


def rls_run(rls_bench, port, seconds, cpu_pids):
    pids = cpu_pids()
    before = cpu_ticks(pids)
    out = subprocess.run([rls_bench, "--target", f"127.0.0.1:{port}", "--seconds", str(seconds),
                          "--threads", "1", "--inflight", "32", "--keys", "10000"],
                         capture_output=True, text=True).stdout
    ticks = cpu_ticks(pids) - before
    m = re.search(r"seconds=([\d.]+)\s+calls/s=([\d.]+).*errors=(\d+).*p99=([\d.]+)", out, re.S)
    if not m:
        return {"rps": 0.0, "p99_ms": None, "requests": 0, "cpu_us_per_req": None, "non_2xx": -1}
    calls = float(m.group(2)) * float(m.group(1))
    return {"rps": float(m.group(2)), "p99_ms": float(m.group(4)) / 1e3, "requests": int(calls),
            "cpu_us_per_req": ticks / TICKS * 1e6 / calls if calls else None,
            "non_2xx": int(m.group(3))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tollgated", action="append", default=[],
                    help="NAME=PATH of a tollgated binary (repeatable; default main=build/...)")
    ap.add_argument("--rls-bench", default="build/bench/rls/rls_bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--nginx-auto", action="store_true")
    ap.add_argument("--no-redis", action="store_true")
    ap.add_argument("--no-rls", action="store_true")
    ap.add_argument("--setups", default="auth1,auth,gateway,redis,rls")
    ap.add_argument("--json", default="out/bench/compare.json")
    a = ap.parse_args()
    builds = [t.split("=", 1) for t in a.tollgated] or [["main", "build/server/tollgated"]]
    setups = a.setups.split(",")
    if a.no_redis or not shutil_which("redis-server"):
        setups = [s for s in setups if s != "redis"]
    if a.no_rls or not os.access(a.rls_bench, os.X_OK):
        if "rls" in setups:
            print(f"compare: no RLS run ({a.rls_bench} not built or --no-rls)")
        setups = [s for s in setups if s != "rls"]

    r = Runner(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        return measure(r, a, builds, setups)
    finally:
        r.stop_all()


def shutil_which(name):
    import shutil
    return shutil.which(name)


def measure(r, a, builds, setups):
    port = {k: free_port() for k in ("app", "limit", "proxy", "limit_auto", "proxy_auto", "redis")}
    app = r.nginx("app", 1, f"  server {{ listen 127.0.0.1:{port['app']}; "
                  f"location / {{ root {r.dir}/app/html; }} }}")
    wait_port(port["app"], app)

    def reference(name, workers, limit_port, proxy_port):
        body = (f"  upstream app {{ server 127.0.0.1:{port['app']}; keepalive 64; }}\n"
                f"  server {{ listen 127.0.0.1:{limit_port}; location / {{ "
                f"limit_req zone=perip burst=1000000 nodelay; empty_gif; }} }}\n"
                f"  server {{ listen 127.0.0.1:{proxy_port}; location / {{ "
                f"limit_req zone=perip burst=1000000 nodelay; proxy_pass http://app; "
                f"proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }}")
        p = r.nginx(name, workers, body)
        wait_port(limit_port, p)
        return p

    ngx = {"nginx": reference("nginx1", 1, port["limit"], port["proxy"])}
    ngx_ports = {"nginx": (port["limit"], port["proxy"])}
    if a.nginx_auto:
        ngx["nginx_auto"] = reference("nginxauto", "auto", port["limit_auto"], port["proxy_auto"])
        ngx_ports["nginx_auto"] = (port["limit_auto"], port["proxy_auto"])
    if "redis" in setups:
        rd = r.spawn(["redis-server", "--port", str(port["redis"]), "--bind", "127.0.0.1",
                      "--save", "", "--appendonly", "no", "--dir", r.dir])
        wait_port(port["redis"], rd)
    yaml = os.path.join(r.dir, "rls.yaml")
    with open(yaml, "w") as f:
        f.write(RLS_YAML)

    servers = {}  # (build, setup) -> (proc, port)
    for name, binary in builds:
        for s in setups:
            p = free_port()
            extra = {"auth1": ["--threads", "1"], "auth": [],
                     "gateway": ["--upstream", f"http://127.0.0.1:{port['app']}"],
                     "redis": ["--store", f"redis://127.0.0.1:{port['redis']}"]}.get(s)
            if s == "rls":
                g = free_port()
                proc = r.tollgated(binary, p, "--grpc", f"127.0.0.1:{g}", "--rls-config", yaml)
                wait_port(g, proc)
                servers[(name, s)] = (proc, g)
            else:
                servers[(name, s)] = (r.tollgated(binary, p, *extra), p)

    auth_hdr = ["X-Original-URI: /api/items"]
    rows = []
    print(f"compare: {a.rounds} rounds of {a.seconds:g} s, builds "
          f"{', '.join(n for n, _ in builds)}; load {os.getloadavg()[0]:.1f} at start")
    for rnd in range(a.rounds):
        jobs = []
        for ref, (lp, pp) in ngx_ports.items():
            proc = ngx[ref]
            if {"auth1", "auth", "redis"} & set(setups):
                jobs.append(("limit", ref, f"http://127.0.0.1:{lp}/", [],
                             lambda p=proc: children(p.pid)))
            if "gateway" in setups:
                jobs.append(("proxy", ref, f"http://127.0.0.1:{pp}/", [],
                             lambda p=proc: children(p.pid)))
        for s in setups:
            for name, _ in builds:
                proc, p = servers[(name, s)]
                if s == "rls":
                    jobs.append((s, name, p, None, lambda pr=proc: [pr.pid]))
                elif s == "gateway":
                    jobs.append((s, name, f"http://127.0.0.1:{p}/", [], lambda pr=proc: [pr.pid]))
                else:
                    jobs.append((s, name, f"http://127.0.0.1:{p}/v1/auth", auth_hdr,
                                 lambda pr=proc: [pr.pid]))
        if rnd % 2:
            jobs.reverse()
        for s, who, url, hdr, pids in jobs:
            if s == "rls":
                m = rls_run(a.rls_bench, url, a.seconds, pids)
            else:
                m = wrk(url, a.seconds, hdr, pids)
            m.update({"round": rnd, "setup": s, "server": who})
            rows.append(m)
            print(f"  round {rnd} {s:8} {who:12} {m['rps']:10.0f} req/s  p99 "
                  f"{fmt(m['p99_ms'])} ms  cpu {fmt(m['cpu_us_per_req'])} us/req"
                  + (f"  non-2xx {m['non_2xx']}" if m["non_2xx"] else ""), flush=True)

    summary = summarise(rows, setups, builds, list(ngx_ports))
    print_summary(summary)
    os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
    with open(a.json, "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "load_at_end": os.getloadavg(), "cores": os.cpu_count(),
                   "rounds": a.rounds, "seconds": a.seconds, "builds": dict(builds),
                   "targets": TARGETS, "runs": rows, "summary": summary}, f, indent=1)
    print(f"compare: JSON in {a.json}")
    return 0


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def summarise(rows, setups, builds, refs):
    """Per (setup, build): medians over rounds, and the ratio to each nginx in the same round."""
    out = []
    nginx_kind = {"auth1": "limit", "auth": "limit", "redis": "limit", "gateway": "proxy"}
    kinds = [k for k in ("limit", "proxy") if any(x["setup"] == k for x in rows)]
    for s in kinds + setups:
        servers = refs if s in ("limit", "proxy") else [n for n, _ in builds]
        for who in servers:
            mine = [x for x in rows if x["setup"] == s and x["server"] == who]
            entry = {"setup": s, "server": who,
                     "rps": median([x["rps"] for x in mine]),
                     "p99_ms": median([x["p99_ms"] for x in mine]),
                     "cpu_us_per_req": median([x["cpu_us_per_req"] for x in mine])}
            if s != "rls" and who not in refs:
                for ref in refs:
                    ratios, cpu = [], []
                    for x in mine:
                        n = [y for y in rows if y["setup"] == nginx_kind[s] and y["server"] == ref
                             and y["round"] == x["round"]]
                        if n and n[0]["rps"]:
                            ratios.append(x["rps"] / n[0]["rps"])
                            if x["cpu_us_per_req"] and n[0]["cpu_us_per_req"]:
                                cpu.append(x["cpu_us_per_req"] / n[0]["cpu_us_per_req"])
                    entry[f"ratio_{ref}"] = median(ratios)
                    entry[f"ratios_{ref}"] = ratios
                    entry[f"cpu_ratio_{ref}"] = median(cpu)
            out.append(entry)
    return out


def print_summary(summary):
    print("\nmedians over rounds (ratio: tollgated / nginx in the same round; "
          "cpu: server CPU us per request)")
    for e in summary:
        ratio = "  ".join(f"{k[6:]} x{v:.2f} {fmt_list(e['ratios_' + k[6:]])}"
                          for k, v in e.items() if k.startswith("ratio_") and v is not None)
        cpu_ratio = "  ".join(f"cpu/{k[10:]} x{v:.2f}" for k, v in e.items()
                              if k.startswith("cpu_ratio_") and v is not None)
        print(f"  {e['setup']:8} {e['server']:12} {e['rps'] or 0:10.0f} req/s  p99 "
              f"{fmt(e['p99_ms'])} ms  cpu {fmt(e['cpu_us_per_req'])} us/req  {ratio}  {cpu_ratio}")


def fmt_list(vals):
    return "(" + ", ".join(f"{v:.2f}" for v in vals) + ")"


if __name__ == "__main__":
    sys.exit(main())
