#!/usr/bin/env python3
"""How long a rollback trip or clear on one tollgated takes to reach another.

Starts a redis-server and two tollgated processes sharing it (store.share_rollback),
then alternately trips and clears a rule through instance A's admin API and polls
instance B's GET /v1/rollback every 2 ms until B shows the new state. Prints the
minimum, median and maximum propagation time. With store.rollback_sync_ms = S the
bound is S plus a round trip: B adopts at its next read of the fleet's hash.

  python3 bench/server/rollback_fleet.py --tollgated build/server/tollgated [--rounds 10]
      [--sync-ms 1000]
"""
import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

TOKEN = "bench-token-0123456789abcdef"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, deadline=10.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("nothing listens on port %d" % port)


def admin(port, method, path):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 headers={"Authorization": "Bearer " + TOKEN})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def tripped(port):
    return any(r["rule"] == "api" and r["tripped"] for r in admin(port, "GET", "/v1/rollback")["rules"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tollgated", default="build/server/tollgated")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--sync-ms", type=int, default=1000)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tollgate-fleet-")
    redis_port = free_port()
    procs = [subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL)]
    try:
        wait_port(redis_port)
        policy = {"rules": [{"name": "api", "limit_keys": ["header:x-api-key"],
                             "algorithm_config": {"rps": 1, "burst": 5},
                             "rollback": {"max_reject_ratio": 0.5, "min_requests": 4}}]}
        with open(os.path.join(work, "policy.json"), "w") as f:
            json.dump(policy, f)
        with open(os.path.join(work, "token"), "w") as f:
            f.write(TOKEN + "\n")
        ports = []
        for name in ("a", "b"):
            main_port, admin_port = free_port(), free_port()
            config = {"policy": os.path.join(work, "policy.json"),
                      "listen": "127.0.0.1:%d" % main_port, "threads": 1,
                      "admin": {"listen": "127.0.0.1:%d" % admin_port,
                                "token_file": os.path.join(work, "token")},
                      "store": {"url": "redis://127.0.0.1:%d" % redis_port,
                                "rollback_sync_ms": args.sync_ms}}
            path = os.path.join(work, name + ".json")
            with open(path, "w") as f:
                json.dump(config, f)
            procs.append(subprocess.Popen([args.tollgated, "--config", path],
                                          stderr=open(os.path.join(work, name + ".log"), "w"),
                                          stdout=subprocess.DEVNULL))
            wait_port(admin_port)
            ports.append(admin_port)
        a, b = ports
        times = []
        for _ in range(args.rounds):
            for action, want in (("trip?rule=api&reason=bench", True), ("clear?rule=api", False)):
                # A random phase against B's read interval (B's reads follow each other
                # every sync_ms, so acting right after B adopted would always wait a whole one).
                time.sleep(random.uniform(0, args.sync_ms / 1000))
                start = time.monotonic()
                admin(a, "POST", "/v1/rollback/" + action)
                while tripped(b) != want:
                    time.sleep(0.002)
                times.append((time.monotonic() - start) * 1000)
        print("transitions %d, rollback_sync_ms %d: propagation min %.0f ms, median %.0f ms, "
              "max %.0f ms" % (len(times), args.sync_ms, min(times), statistics.median(times),
                               max(times)))
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()


if __name__ == "__main__":
    main()
