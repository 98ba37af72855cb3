#!/usr/bin/env python3
"""Sends a fixed number of GET /v1/auth requests on one keep-alive connection (bench/callgrind.sh):
a count, not a duration, so instruction totals compare across builds."""
import argparse
import socket
import time

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--requests", type=int, default=20000)
ap.add_argument("--wait", type=float, default=0, help="seconds to wait for the server to listen")
a = ap.parse_args()
deadline = time.monotonic() + a.wait
while True:
    try:
        s = socket.create_connection(("127.0.0.1", a.port))
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)  # start-up poll under valgrind
req = b"GET /v1/auth HTTP/1.1\r\nHost: bench\r\nX-Original-URI: /api/items\r\n\r\n"
buf = b""
for _ in range(a.requests):
    s.sendall(req)
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].lower()
            i = head.find(b"content-length:")
            n = int(head[i + 15:head.find(b"\r\n", i) if head.find(b"\r\n", i) > 0 else None]) if i >= 0 else 0
            if len(buf) >= end + 4 + n:
                if not buf.startswith(b"HTTP/1.1 2"):
                    raise SystemExit("unexpected answer: " + buf[:80].decode(errors="replace"))
                buf = buf[end + 4 + n:]
                break
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("connection closed")
        buf += chunk
