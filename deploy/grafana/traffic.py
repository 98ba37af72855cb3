#!/usr/bin/python3
"""The dashboard demo's two halves (deploy/grafana/screenshot.sh). Standard library only.

traffic.py upstream PORT
    an upstream on 127.0.0.1:PORT: 502 for /fail, 200 for anything else.
traffic.py drive HOST:PORT POLICY GOOD_POLICY SECONDS
    drives tollgated for SECONDS: four clients within their limit on rule "free" (5/s each),
    a partner at 20/s; from 20% to 45% of the run one client floods "free" (60/s, most
    rejected); from 50% to 65% one request in ten goes to /fail; at 60% POLICY is overwritten
    with an invalid policy (tollgated's file watch refuses it), at 75% restored from
    GOOD_POLICY.
"""
import http.client
import http.server
import shutil
import sys
import threading
import time


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        status = 502 if self.path.startswith("/fail") else 200
        body = b"upstream\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def client(address, headers, rate, until, phase, counts):
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    n = 0
    next_at = time.monotonic()
    while time.monotonic() < until:
        if phase():
            path = "/fail" if phase() == "fail" and n % 10 == 0 else "/api/items"
            try:
                conn.request("GET", path, headers=headers)
                r = conn.getresponse()
                r.read()
                counts[r.status] = counts.get(r.status, 0) + 1
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=10)
            n += 1
        next_at += 1.0 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))


def drive(address, policy, good_policy, seconds):
    start = time.monotonic()
    until = start + seconds
    frac = lambda: (time.monotonic() - start) / seconds
    always = lambda: "fail" if 0.5 <= frac() < 0.65 else "ok"
    flood = lambda: "ok" if 0.2 <= frac() < 0.45 else None
    counts = {}
    threads = [threading.Thread(target=client, args=(address, {"X-Api-Key": f"k{i}"}, 5, until,
                                                      always, counts)) for i in range(4)]
    threads.append(threading.Thread(target=client, args=(address, {"X-Partner-Key": "p1"}, 20,
                                                         until, always, counts)))
    threads.append(threading.Thread(target=client, args=(address, {"X-Api-Key": "flood"}, 60,
                                                         until, flood, counts)))
    for t in threads:
        t.start()
    broke = restored = False
    while time.monotonic() < until:
        if not broke and frac() >= 0.6:
            with open(policy, "w") as f:
                f.write('{"rules": [{"name": "free", "algorithm": "token_bucket"}]}\n')
            broke = True
        if not restored and frac() >= 0.75:
            shutil.copyfile(good_policy, policy + ".new")
            shutil.move(policy + ".new", policy)
            restored = True
        time.sleep(0.2)
    for t in threads:
        t.join()
    print("responses by status:", dict(sorted(counts.items())))


if __name__ == "__main__":
    if sys.argv[1] == "upstream":
        server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Upstream)
        server.serve_forever()
    else:
        drive(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
