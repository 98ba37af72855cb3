#!/usr/bin/python3
"""A strict HTTP/1.1 upstream for tollgated's gateway tests: Python's h11
(Debian python3-h11), an HTTP/1.1 parser written independently of Beast.

Usage: h11_upstream.py LOG_FILE
Listens on 127.0.0.1 (a free port), prints the port on stdout, then serves
until killed, one thread per connection. Every event is one JSON line appended
to LOG_FILE (flushed at once), so a test can read what arrived:
  {"event": "open", "conn": N}                      (logged before it is served)
  {"event": "message", "conn": N, "method": M, "target": T,
   "headers": [[name, value], ...], "body": B}      (one complete request)
  {"event": "error", "conn": N, "detail": D}        (h11 refused the bytes)
  {"event": "close", "conn": N}                     (after the socket closed)
Bytes are latin-1 strings. Each request gets "200 OK" with the body "ok",
except targets ending in /resp/NAME, which get RAW_RESPONSES[NAME] (possibly
malformed, sent as is), and then the connection is closed.
"""
import json
import socket
import sys
import threading

import h11

RAW_RESPONSES = {
    "te-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"0\r\n\r\n",
    "cl-list": b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
    "cl-twice": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
    "obs-fold": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: a\r\n b\r\n\r\nok",
    "te-gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "conn-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: content-length\r\n\r\nok"
               b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled!",
    "conn-te": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: transfer-encoding\r\n\r\n2\r\nok\r\n0\r\n\r\n",
}

log_lock = threading.Lock()
log_file = None


def log(record):
    with log_lock:
        log_file.write(json.dumps(record) + "\n")
        log_file.flush()


def text(b):
    return b.decode("latin-1")


# Responses that never end: the head, then ENDLESS_BYTES of one chunk-extension
# line or of one trailer section, in 64 KiB writes. Logged as
#   {"event": "endless", "conn": N, "target": NAME, "detail": "cut" | "all", "sent": BYTES}
# "cut" when the gateway closed the connection before all was sent.
ENDLESS_HEADS = {
    "endless-ext": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=",
    "endless-trailer": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"
                       b"0\r\nX-Trailer: ",
}
ENDLESS_BYTES = 256 << 20


def send_endless(sock, conn_id, name):
    sent = 0
    cut = False
    try:
        sock.sendall(ENDLESS_HEADS[name])
        piece = b"a" * 65536
        while sent < ENDLESS_BYTES:
            sock.sendall(piece)
            sent += len(piece)
    except OSError:
        cut = True
    log({"event": "endless", "conn": conn_id, "target": name, "detail": "cut" if cut else "all",
         "sent": sent})


def respond(sock, c, target, conn_id=0):
    """Answers one request; returns False when the connection must end."""
    name = target.rsplit("/", 1)[-1]
    if "/resp/" in target and name in ENDLESS_HEADS:
        send_endless(sock, conn_id, name)
        return False
    if "/resp/" in target:
        raw = RAW_RESPONSES.get(target.rsplit("/", 1)[-1])
        if raw is not None:
            sock.sendall(raw)
            return False
    sock.sendall(c.send(h11.Response(status_code=200, headers=[("Content-Length", "2")])))
    sock.sendall(c.send(h11.Data(data=b"ok")))
    sock.sendall(c.send(h11.EndOfMessage()))
    if c.our_state is h11.MUST_CLOSE or c.their_state is h11.MUST_CLOSE:
        return False
    c.start_next_cycle()
    return True


def serve(sock, conn_id):
    c = h11.Connection(h11.SERVER)
    request = None
    body = b""
    try:
        while True:
            try:
                event = c.next_event()
            except h11.RemoteProtocolError as e:
                log({"event": "error", "conn": conn_id, "detail": str(e)})
                return
            if event is h11.NEED_DATA:
                c.receive_data(sock.recv(65536))  # b"" is the end of the stream
            elif isinstance(event, h11.Request):
                request = event
                body = b""
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                target = text(request.target)
                log({"event": "message", "conn": conn_id, "method": text(request.method),
                     "target": target,
                     "headers": [[text(n), text(v)] for n, v in request.headers],
                     "body": text(body)})
                if not respond(sock, c, target, conn_id):
                    return
            elif isinstance(event, h11.ConnectionClosed):
                return
    except (OSError, h11.LocalProtocolError) as e:
        log({"event": "error", "conn": conn_id, "detail": "socket: " + str(e)})
    finally:
        try:
            sock.close()
        finally:
            log({"event": "close", "conn": conn_id})


def main():
    global log_file
    log_file = open(sys.argv[1], "a", encoding="utf-8")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)
    conn_id = 0
    while True:
        sock, _ = listener.accept()
        conn_id += 1
        log({"event": "open", "conn": conn_id})  # before serving: opens >= closes always
        threading.Thread(target=serve, args=(sock, conn_id), daemon=True).start()


if __name__ == "__main__":
    main()
