#!/usr/bin/env python3
"""Writes the synthetic seed files of fuzz/corpus/ (docs/fuzzing.md, "Seeds").

Run by hand when a target's input format changes; `make fuzz` never writes to
fuzz/corpus/ (it fuzzes a copy). Seeds that are files of their own (examples/
configs, replies captured from Redis 7.0 in corpus/resp_reader/redis7-*) are
copied or kept, not generated. Needs protoc for the Envoy request seeds.
"""
import base64
import hashlib
import hmac
import json
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def copy(target, src, name):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(os.path.join(ROOT, src), os.path.join(d, "seed-" + name))


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(header, payload, key=b"fuzz-secret"):
    signing = b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())
    mac = hmac.new(key, signing.encode(), hashlib.sha256).digest()
    return signing + "." + b64(mac)


TOKEN = hs256({"alg": "HS256", "typ": "JWT"},
              {"sub": "u1", "plan": "enterprise", "org": {"id": "o1"}, "tenant": "t1",
               "exp": 1900000000, "iss": "https://issuer.example", "aud": "tollgate"})

# --- HTTP requests (http_request) ------------------------------------------------
REQUESTS = {
    "get-api-key": "GET /api/v1/items?tenant=t1 HTTP/1.1\r\nHost: api.example\r\n"
                   "X-Api-Key: k1\r\nX-Request-Weight: 3\r\n\r\n",
    "auth-original-uri": "GET /v1/auth HTTP/1.1\r\nHost: tollgate\r\nX-Original-Method: POST\r\n"
                         "X-Original-URI: /api/login?debug=1\r\nX-Forwarded-For: 198.51.100.7, 10.0.0.2\r\n\r\n",
    "jwt-bearer": "GET /api/v2/orders HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + TOKEN +
                  "\r\nX-Api-Key: ent\r\n\r\n",
    "explain": "GET /v1/explain?method=GET&path=/api/v1/x&header=x-api-key:k1&ip=2001:db8::1 HTTP/1.1\r\n"
               "Host: admin\r\nAuthorization: Bearer token\r\n\r\n",
    "decide-post": "POST /v1/decide HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                   "Content-Length: 58\r\n\r\n{\"request\":{\"method\":\"GET\",\"path\":\"/api/items\"}}      ",
    "chunked": "POST /api/v1/upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
               "5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n",
    "traceparent": "GET /healthz HTTP/1.1\r\nHost: a\r\n"
                   "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n",
    "http10-head": "HEAD /api/../admin/%2e%2e/x//y HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "absolute-form": "GET http://x/api/login HTTP/1.1\r\nHost: x\r\nForwarded: for=192.0.2.60;proto=http\r\n\r\n",
    "dup-headers": "GET /api/v1/a HTTP/1.1\r\nHost: a\r\nX-Api-Key: k1\r\nX-Api-Key: k2\r\n"
                   "Connection: X-Api-Key, keep-alive\r\nContent-Length: 0\r\n\r\n",
    "expect-continue": "POST /v1/decide HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
    "metrics": "GET /metrics HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\r\n\r\n",
    "admin-reload": "POST /v1/reload HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
    "auth-head": "HEAD /v1/auth HTTP/1.1\r\nHost: a\r\nX-Original-URI: /api/login\r\n\r\n",
}
for name, req in REQUESTS.items():
    write("http_request", name, req)

# --- gateway rewrite (proxy_wire): mode byte, request, NUL, upstream response -------
RESPONSES = {
    "ok": "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
    "no-content": "HTTP/1.1 204 No Content\r\nRateLimit: \"up\";r=1\r\n\r\n",
    "conn-named": "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Secret\r\nX-Secret: s\r\n"
                  "Content-Length: 2\r\n\r\nok",
    "ratelimit-upstream": "HTTP/1.1 429 Too Many Requests\r\nratelimit-policy: \"u\";q=1\r\n"
                          "Retry-After: 3\r\nContent-Length: 0\r\n\r\n",
    "empty-reason": "HTTP/1.1 404 \r\nContent-Length: 3\r\n\r\nnot",
    "http10": "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
}
pairs = [("get-api-key", "ok", 0), ("auth-original-uri", "no-content", 1), ("dup-headers", "conn-named", 2),
         ("http10-head", "http10", 5), ("absolute-form", "ratelimit-upstream", 3),
         ("traceparent", "empty-reason", 6)]
for req, resp, mode in pairs:
    write("proxy_wire", req + "--" + resp, bytes([mode]) + REQUESTS[req].encode() + b"\0" + RESPONSES[resp].encode())

# --- /v1/decide bodies (decide_body) ----------------------------------------------
BODIES = {
    "request": {"request": {"method": "POST", "path": "/api/v1/items?tenant=t1", "client_ip": "2001:db8::9",
                            "headers": {"x-api-key": "k1", "x-request-weight": "2.5",
                                        "authorization": "Bearer " + TOKEN}}},
    "request-header-pairs": {"request": {"path": "/login", "ip": "10.1.2.3",
                                         "headers": [["X-Forwarded-For", "203.0.113.1"], ["x-api-key", "a"]]}},
    "items": {"items": [{"rule": "free", "key": "k1", "cost": 3}, {"rule": "per-ip", "key": "198.51.100.1"}]},
    "items-peek": {"items": [{"rule": "tenant-log", "values": ["t", None], "cost": 0}]},
    "items-values": {"items": [{"rule": "tenant-log", "values": ["t|1", "all"], "cost": 2},
                               {"rule": "free", "values": ["k1"]}]},
    "items-values-bad": {"items": [{"rule": "tenant-log", "key": "t"},
                                   {"rule": "tenant-log", "values": ["t", "none"]}]},
    "bad": {"request": {"path": "nope"}, "items": []},
}
for name, body in BODIES.items():
    write("decide_body", name, json.dumps(body))

# --- /v1/keys/* bodies (key_request): the action byte (0 get, 1 reset, 2 set), then the body
KEY_BODIES = {
    "get": (0, {"rule": "free", "values": ["k1"]}),
    "reset-by-source": (1, {"rule": "per-ip", "keys": {"ip:address": "198.51.100.1"}, "raw": True}),
    "set": (2, {"rule": "free", "values": ["k1"], "remaining": 0}),
    "set-over": (2, {"rule": "free", "values": ["k1"], "remaining": 1000000}),
    "set-log-absent": (2, {"rule": "tenant-log", "values": [None, None], "remaining": 1}),
    "bad": (2, {"rule": 7, "values": "k", "remaining": "two"}),
}
for name, (action, body) in KEY_BODIES.items():
    write("key_request", name, bytes([action]) + json.dumps(body).encode())

# --- POST /v1/release bodies (release_body): lease tokens "<id>.<store key in hex>" -------
def lease_token(lease_id, key):
    return lease_id + "." + key.encode().hex()
LIVE_KEY = "inflight\x1fconcurrency\x1fk"
RELEASE_BODIES = {
    "one": {"leases": [lease_token("0123456789abcdef", LIVE_KEY)]},
    "two-keys": {"leases": [lease_token("00000000000000ff", LIVE_KEY),
                            lease_token("ffffffffffffffffffffffffffffffff", "inflight\x1fconcurrency\x1fother")]},
    "not-concurrency": {"leases": [lease_token("0a", "free\x1fsliding_window\x1fk1")]},
    # a lease-set key of a rule that is not a concurrency rule, and of an unknown rule (issue 29)
    "other-rule": {"leases": [lease_token("0123456789abcdef0123456789abcdef", "free\x1fconcurrency\x1fk1"),
                              lease_token("0123456789abcdef0123456789abcdef", "ghost\x1fconcurrency\x1fk")]},
    "upper-hex": {"leases": ["0A." + LIVE_KEY.encode().hex()]},
    "odd-hex": {"leases": ["0a." + LIVE_KEY.encode().hex()[:-1]]},
    "wrong-types": {"leases": [7, None, {"id": "0a"}], "extra": True},
    "empty": {"leases": []},
}
for name, body in RELEASE_BODIES.items():
    write("release_body", name, json.dumps(body))

# --- paths (path) -------------------------------------------------------------------
for i, p in enumerate(["/api/v1/items", "//api/./v1/../v1/items/", "/%61pi/%2e%2e/admin", "/a%2fb%3F?x=1&y=%41+b",
                       "/x/%%32e%%32e/admin", "*", "/a%zz/%6", "/api/login#frag", "/../..", "/A/B;c=d\\e"]):
    write("path", "%02d" % i, p)

# --- shared HTTP text (http_text): a target, then NUL and a header value or needle ----------
HTTP_TEXT = {
    "plain": b"/api/v1/items",
    "query": b"/v1/rollback/trip?rule=per-key&reason=deploy%2042+canary",
    "query-empty-parts": b"/x?&a=1&&b&c=x=y&=v&",
    "query-escapes": b"/x?r%75le=%41%zz&%=%%&plus=a+b",
    "query-repeated": b"/x?tenant=t1&tenant=t2&TENANT=t3",
    "question-marks": b"/a?b?c=d??",
    "only-query": b"?",
    "ows": b" \t Bearer abc \t\x00\tapplication/JSON; charset=utf-8 ",
    "case": b"/API/V1\x00/api/v1",
    "needle": b"/a%2Fb%5c\x00%2f",
    "latin1": b"\xc4\xe4@`[{\x00\xe4\xc4`@{[",
}
for name, data in HTTP_TEXT.items():
    write("http_text", name, data)
# --- client address (client_ip) -------------------------------------------------------
CLIENT_IP = {
    "xff": "10.0.0.7\n10.0.0.0/8 ::1\nx\n203.0.113.9, 10.0.0.3\n10.0.0.5",
    "forwarded": "::1\n::1/128 10.0.0.0/8\nf\nfor=192.0.2.60;proto=http, for=\"[2001:db8::1]:4711\"",
    "mapped": "::ffff:10.1.2.3\n::ffff:10.0.0.0/104\nx\n198.51.100.1:443",
    "untrusted": "203.0.113.5\n10.0.0.0/8\nx\n1.2.3.4",
}
for name, text in CLIENT_IP.items():
    write("client_ip", name, text)

# --- JWT (jwt): mode byte, claim path, then a token or header\npayload ----------------
write("jwt", "bearer-hs256", bytes([0x02]) + b"org.id\nBearer " + TOKEN.encode())
write("jwt", "bearer-upstream", bytes([0x00]) + b"plan\nbearer  " + TOKEN.encode() + b"  ")
write("jwt", "sign-hs256", bytes([0x03]) + b"tenant\n" + json.dumps({"alg": "HS256"}).encode() + b"\n" +
      json.dumps({"tenant": "t", "exp": 1600000000, "nbf": 1, "aud": ["x", "tollgate"]}).encode())
write("jwt", "sign-iss", bytes([0x0b]) + b"a.b\n" + json.dumps({"alg": "HS256", "typ": "JWT"}).encode() + b"\n" +
      json.dumps({"iss": "https://issuer.example", "aud": "tollgate", "a": {"b": 7}}).encode())
write("jwt", "alg-none", bytes([0x02]) + b"sub\nBearer " +
      (b64(b'{"alg":"none"}') + "." + b64(b'{"sub":"x"}') + ".").encode())
write("jwt", "rs256", bytes([0x04]) + b"sub\nBearer " +
      (b64(b'{"alg":"RS256"}') + "." + b64(b'{"sub":"x"}') + "." + b64(b"\0" * 256)).encode())

# --- policies (policy_json) -------------------------------------------------------------
copy("policy_json", "examples/policy.json", "examples-policy.json")
for f in sorted(x for x in os.listdir(os.path.join(ROOT, "examples", "policies")) if x.endswith(".json")):
    copy("policy_json", os.path.join("examples", "policies", f), "examples-" + f)
copy("policy_json", "fuzz/policies/request.json", "fuzz-request.json")

# --- server config (server_config) ------------------------------------------------------
copy("server_config", "examples/tollgated.json", "examples-tollgated.json")
write("server_config", "small", json.dumps({
    "policy": "p.json", "listen": "[::1]:0", "admin": "127.0.0.1:9090", "store": {"url": "redis://r:6379"},
    "gateway": {"upstream": "http://backend:8080/base/"}, "trusted_proxies": ["10.0.0.0/8"],
    "jwt": {"hs256_secret": "s", "leeway_s": 5}, "log": {"level": "warn"}}))
write("server_config", "upstream-line", "http://[::1]:8081/app\n{}")

# --- Envoy (rls_yaml, rls_request) --------------------------------------------------------
for f in sorted(os.listdir(os.path.join(ROOT, "examples", "envoy", "ratelimit"))):
    copy("rls_yaml", os.path.join("examples", "envoy", "ratelimit", f), "examples-" + f)
# A small alias bomb: 5 levels of 4 references (a 2 KB one has 10 levels of 10).
bomb = ["domain: bomb", "descriptors:", "  - &d0 {key: a, value: b, rate_limit: {unit: second, requests_per_unit: 1}}"]
for i in range(1, 5):
    bomb.append("  - &d%d {key: k%d, descriptors: [%s]}" % (i, i, ", ".join(["*d%d" % (i - 1)] * 4)))
write("rls_yaml", "alias-bomb-small.yaml", "\n".join(bomb) + "\n")

REQUESTS_TEXT = {
    "api": 'domain: "api" descriptors { entries { key: "plan" value: "enterprise" } entries { key: "api_key" value: "k1" } } '
           'descriptors { entries { key: "api_key" value: "k1" } hits_addend { value: 2 } } hits_addend: 1',
    "override": 'domain: "edge_proxy" descriptors { entries { key: "remote_address" value: "10.0.0.1" } '
                'limit { requests_per_unit: 3 unit: SECOND } }',
    "unknown-domain": 'domain: "nope" descriptors { entries { key: "a" value: "b" } }',
    "prefix": 'domain: "api" descriptors { entries { key: "client" value: "batch-7" } }',
}
proto = os.path.join(ROOT, "proto")
for name, text in REQUESTS_TEXT.items():
    try:
        out = subprocess.run(["protoc", "--encode=envoy.service.ratelimit.v3.RateLimitRequest", "-I", proto,
                              os.path.join(proto, "envoy/service/ratelimit/v3/rls.proto")],
                             input=text.encode(), capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("protoc: %s" % getattr(e, "stderr", e))
    write("rls_request", name, out)


# --- Envoy RLQS usage reports (rlqs_reports) ----------------------------------------------
def usage(i, bucket, allowed, denied, secs, nanos=0):
    entries = " ".join('bucket { key: "%s" value: "%s" }' % kv for kv in bucket)
    return ('bucket_quota_usages { key: %d value { bucket_id { %s } time_elapsed { seconds: %d nanos: %d } '
            'num_requests_allowed: %d num_requests_denied: %d } }' % (i, entries, secs, nanos, allowed, denied))

REPORTS_TEXT = {
    "first": 'domain: "edge" ' + usage(1, [("name", "api"), ("user", "alice")], 1, 0, 1),
    "several": 'domain: "edge" ' + " ".join([usage(1, [("name", "api"), ("user", "a")], 30, 5, 1),
                                             usage(2, [("name", "closed")], 1, 0, 1),
                                             usage(3, [("name", "open")], 9, 0, 5),
                                             usage(4, [("name", "nothing")], 1, 1, 1)]),
    "absurd": 'domain: "edge" ' + usage(9, [("user", "x"), ("name", "api")], 2**64 - 1, 2**64 - 1, 0, 1),
    "negative": 'domain: "edge" ' + usage(5, [("name", "api"), ("user", "b")], 10, 0, -3, -5),
    "no-domain": usage(1, [("name", "api"), ("user", "alice")], 1, 0, 1),
}
for name, text in REPORTS_TEXT.items():
    try:
        out = subprocess.run(["protoc", "--encode=envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports",
                              "-I", proto, os.path.join(proto, "envoy/service/rate_limit_quota/v3/rlqs.proto")],
                             input=text.encode(), capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("protoc: %s" % getattr(e, "stderr", e))
    write("rlqs_reports", name, out)

# --- Sentinel replies (sentinel_reply): what a sentinel, or the server it names, sends ---------
def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)

write("sentinel_reply", "master-addr", b"*2\r\n" + bulk(b"127.0.0.1") + bulk(b"6379"))
write("sentinel_reply", "master-addr-v6", b"*2\r\n" + bulk(b"::1") + bulk(b"6380"))
write("sentinel_reply", "unknown-master", b"*-1\r\n")
write("sentinel_reply", "absurd-port", b"*2\r\n" + bulk(b"10.0.0.1") + bulk(b"99999999999"))
write("sentinel_reply", "absurd-host", b"*2\r\n" + bulk(b"evil\r\nhost" + b"x" * 300) + bulk(b"1"))
write("sentinel_reply", "role-master", b"*3\r\n" + bulk(b"master") + b":42\r\n*0\r\n")
write("sentinel_reply", "role-replica", b"*5\r\n" + bulk(b"slave") + bulk(b"10.0.0.1") +
      b":6379\r\n" + bulk(b"connected") + b":42\r\n")
write("sentinel_reply", "subscribe-then-switch",
      b"*3\r\n" + bulk(b"subscribe") + bulk(b"+switch-master") + b":1\r\n" +
      b"*3\r\n" + bulk(b"message") + bulk(b"+switch-master") +
      bulk(b"m 127.0.0.1 6379 127.0.0.1 6380"))
write("sentinel_reply", "noauth", b"-NOAUTH Authentication required.\r\n")


# --- Redis (resp_reader, cluster_topology, script_reply) ----------------------------------
def mp_array(values):
    out = b"\xdd" + struct.pack(">I", len(values))
    for v in values:
        if 0 <= v < 128:
            out += bytes([v])
        elif 0 <= v <= 0xffffffff:
            out += b"\xce" + struct.pack(">I", v)
        else:
            out += (b"\xd3" if v < 0 else b"\xcf") + struct.pack(">q" if v < 0 else ">Q", v)
    return out


script = mp_array([1, 0, 200000000, 0 + 8 * 3, 59, 999999999])
write("resp_reader", "script-reply", b"$%d\r\n" % len(script) + script + b"\r\n")
write("resp_reader", "asking-then-script", b"+OK\r\n$%d\r\n" % len(script) + script + b"\r\n")
write("resp_reader", "ask-tryagain", b"-ASK 3999 10.0.0.2:7001\r\n-TRYAGAIN Multiple keys request during rehashing\r\n"
                                     b"-CLUSTERDOWN The cluster is down\r\n-LOADING Redis is loading\r\n")
write("resp_reader", "slots-hostile-range", b"*1\r\n*3\r\n:0\r\n:9223372036854775807\r\n*2\r\n$1\r\nh\r\n:1\r\n")
write("resp_reader", "nested", b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n")
write("resp_reader", "nil-and-ints", b"$-1\r\n*-1\r\n:-9223372036854775808\r\n*2\r\n$0\r\n\r\n:0\r\n")
write("resp_reader", "huge-array-header", b"*1048577\r\n")
write("resp_reader", "partial-bulk", b"$1000\r\nabc")
for mode in range(3):
    for i in range(3):
        write("cluster_topology", "mode%d-%d" % (mode, i), bytes([mode]) + hashlib.sha256(b"%d%d" % (mode, i)).digest() * 4)
write("script_reply", "reply", b"\0" + script)
write("script_reply", "fixarray", b"\0" + bytes([0x93, 0x01, 0xcc, 0xff, 0xd0, 0x80]))
for i in range(4):
    write("script_reply", "items-%d" % i, bytes([1 + i]) + hashlib.sha256(b"s%d" % i).digest() * 3)

# --- lease, settlement and key-admin replies (fuzz_reply.h) -----------------------------------
# Byte streams the targets carve into a limit and replies; a few steered by hand:
# lease_reply "allowed": max_in_flight 2, lease 1 ms, reply {1, 1, 0}, then a release of the
# drawn id answered 1; "denied": {0, 2, 5000}; "error": an error reply.
write("lease_reply", "allowed", bytes([1, 1]) + bytes(7) + bytes([0, 1, 2, 1, 2, 1, 1, 0, 0, 0, 0, 0, 1, 1])
      + bytes([0, 1, 0, 1, 3, 1]))
write("lease_reply", "denied", bytes([1, 1]) + bytes(7) + bytes([0, 1, 1, 1, 3, 1, 0x89, 0x13, 0, 0, 0, 0, 1, 1]))
write("lease_reply", "error", bytes([1, 1]) + bytes(7) + bytes([1, 2, 20]) + b"ERR duplicate lease id" + bytes([1]))
for target in ("lease_reply", "settle_reply", "key_admin_reply"):
    for i in range(4):
        write(target, "bytes-%d" % i, hashlib.sha256(b"%s%d" % (target.encode(), i)).digest() * (1 + i))

# --- client side (client_headers) -----------------------------------------------------------
CLIENT = {
    "draft11": 'RateLimit-Policy: "default";q=100;w=60, "burst";q=10;w=1;pk=:cHJvamVjdA==:\n'
               'RateLimit: "default";r=50;t=30, "burst";r=0;t=1\nRetry-After: 1',
    "draft07": "RateLimit: limit=100, remaining=0, reset=5\nRetry-After: Sun, 06 Nov 1994 08:49:37 GMT",
    "draft03": "RateLimit-Limit: 10\nRateLimit-Remaining: 0\nRateLimit-Reset: 7\nRetry-After: Sunday, 06-Nov-94 08:49:37 GMT",
    "github": "X-RateLimit-Limit: 5000\nX-RateLimit-Remaining: 4999\nX-RateLimit-Reset: 1700000060\n"
              "Retry-After: Sun Nov  6 08:49:37 1994",
    "ms": "x-ratelimit-limit: 60\nx-ratelimit-remaining: 0\nx-ratelimit-reset: 1700000000500",
}
for name, text in CLIENT.items():
    write("client_headers", name, text)

# --- period strings (period): the text of a limit's period --------------------------------
for i, p in enumerate(["1h", "30d", "1w", "13s", "1h30m", "1500ms", "7us", "366d", "1month",
                       "1.5s", "999999999999999999w", "1d1d1d"]):
    write("period", "%02d" % i, p)
# --- tenant tables (tenant_table): first byte = algorithm (index mod 5), then the CSV -----------
TENANTS = {
    "example": b"\x00" + open(os.path.join(ROOT, "examples", "policies", "tenants.csv"), "rb").read(),
    "count-period": b"\x00identity,count,period\nacme,1000,1h\nglobex,5,1m\n",
    "rps-burst": b"\x01identity,rps,burst\na,0.5,1\nb,1000,2000\n",
    "window": b"\x02identity,period,count\n# comment\n\nt1,30d,1000000\n",
    "window-rps": b"\x03identity,rps,burst\nx,1,1\n",
    "duplicate": b"\x00identity,count,period\na,1,1s\na,2,1s\n",
    "crlf": b"\x04identity,count,period\r\nk 1 ,  7 , 1h30m \r\n",
    "cidrs": b"\x00# value file lines double as CIDRs\n10.0.0.0/8\n2001:db8::/32\n::ffff:1.2.3.4/120\n0.0.0.0/0\n",
    "bad": b"\x00identity,count\n,,,\nz,-1,\n",
}
for name, data in TENANTS.items():
    write("tenant_table", name, data)
# --- the fleet's rollback guards (rollback_fleet): mode 0 = field NUL record; else a scripted Redis
ROLLBACK = {
    "tripped": b"\x00api\x007 1764372140123 tripped 0123456789abcdef reject_ratio host-a:12:0a0b0c0d\n"
               b"rejected 30 of 100 decisions in the window (max ratio 0.150000)",
    "cleared": b"\x00login\x008 1764372140999 cleared 00000000000000ff admin host-b:7:ffffffff\n",
    "operator": b"\x00api.v2:x\x009007199254740992 0 tripped fedcba9876543210 admin o\n"
                b"tripped by an operator: INC-123",
    "no-reason-line": b"\x00api\x001 2 tripped 0123456789abcdef admin o",
    "epoch-zero": b"\x00api\x000 2 tripped 0123456789abcdef admin o\n",
    "upper-hex": b"\x00api\x001 2 tripped 0123456789ABCDEF admin o\n",
    "control-in-reason": b"\x00api\x001 2 tripped 0123456789abcdef admin o\n\x1b[31mred",
}
for name, data in ROLLBACK.items():
    write("rollback_fleet", name, data)
for i in range(6):
    write("rollback_fleet", "redis-%d" % i, bytes([1 + i]) + hashlib.sha256(b"rollback%d" % i).digest() * 6)
# --- the peers' URLs (store_url): parser byte (0 redis, 1 rediss, 2 redis-cluster, 3 etcd,
# 4 collector, 5 store spec), placement byte (0 password, 1 token= in the query, 2 none),
# 6 secret bytes, user info, NUL, the rest of the URL
STORE_URL = {
    "redis-password": b"\x00\x00abcdef" + b"bob\x0010.0.0.5:6380/3?prefix=rl:&timeout_ms=50",
    "redis-bad-port": b"\x00\x00abcdef" + b"\x00h:99999",
    "redis-slash-in-password": b"\x00\x00abcdef" + b"u\x00/x@h:1",
    "rediss-options": b"\x01\x00abcdef" + b"\x00h:6380?tls_ca_file=/ca.pem&tls_server_name=r",
    "redis-token-option": b"\x00\x01abcdef" + b"\x00h:1/0",
    "cluster-seeds": b"\x02\x00abcdef" + b"\x00a:7000,b:7001,[::1]:7002",
    "cluster-bad-seed": b"\x02\x00abcdef" + b"\x00a:7000,b:x",
    "etcd-userinfo": b"\x03\x00abcdef" + b"root\x00127.0.0.1:2379/tollgate/policy",
    "etcd-ok": b"\x03\x02abcdef" + b"\x00127.0.0.1:2379,localhost:22379/tollgate/policy",
    "collector-ok": b"\x04\x02abcdef" + b"\x00[::1]:4318/v1/traces",
    "collector-userinfo": b"\x04\x00abcdef" + b"u\x00collector:4318",
    "spec-unknown-scheme": b"\x05\x00abcdef" + b"reddis://u\x00h:6379",
    "spec-local": b"\x05\x02abcdef" + b"\x00local://?max_keys=1024&token=x",
    "spec-sentinel": b"\x05\x00abcdef" + b"redis-sentinel://u\x00h:26379,[::1]:26380/m?master_password=p&db=2",
    "spec-sentinel-tls": b"\x05\x00abcdef"
                         + b"rediss-sentinel://u\x00h:26379/m?tls_ca_file=/ca.pem&tls_server_name=r",
}
for name, data in STORE_URL.items():
    write("store_url", name, data)
# --- an OTLP collector's replies (otlp_reply): limits (3 bytes), read size, close, the reply
OTLP_LIMITS = b"\xff\x30\xff\x03\x01"
OTLP_REPLY = {
    "ok-length": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    "ok-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=1\r\n{}\r\n0\r\nX-T: 1\r\n\r\n",
    "partial-success": b"HTTP/1.1 200 OK\r\nContent-Length: 44\r\n\r\n"
                      b'{"partialSuccess":{"rejectedSpans":"1"}}    ',
    "to-close": b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\n\r\nbusy",
    "no-content": b"HTTP/1.1 204 No Content\r\n\r\n",
    "endless-extension": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=" + b"a" * 200,
    "endless-header": b"HTTP/1.1 200 OK\r\nX-Endless: " + b"a" * 1200,
    "huge-length": b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\naaaa",
    "both-framings": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
}
for name, data in OTLP_REPLY.items():
    write("otlp_reply", name, OTLP_LIMITS + data)
# --- etcd's HTTP framing (etcd_framing): mode (0 head, 1 chunked body, 2 chunked watch, 3 watch), read size
WATCH_CREATED = b'{"result":{"header":{"revision":"5"},"created":true}}\n'
WATCH_PUT = (b'{"result":{"header":{"revision":"6"},"events":[{"kv":{"key":"a2V5","value":"e30=",'
             b'"mod_revision":"6"}}]}}\n')
def chunk(data, ext=b""):
    return b"%x" % len(data) + ext + b"\r\n" + data + b"\r\n"
ETCD_FRAMING = {
    "head-chunked": b"\x00\x01HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked",
    "head-refused": b"\x00\x01HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0",
    "body": b"\x01\x03" + chunk(b'{"header":{"revision":"1"}}') + b"0\r\n\r\n",
    "body-extension": b"\x01\x05" + chunk(b"{}", b";a=b") + b"0\r\n\r\n",
    "body-long-size-line": b"\x01\x00" + b"2;" + b"x" * 40 + b"\r\n{}\r\n0\r\n\r\n",
    "watch-chunked": b"\x02\x07" + chunk(WATCH_CREATED) + chunk(WATCH_PUT[:30]) + chunk(WATCH_PUT[30:]),
    "watch-plain": b"\x03\x0b" + WATCH_CREATED + WATCH_PUT,
    "watch-canceled": b"\x03\x01" + b'{"result":{"canceled":true,"compact_revision":"3"}}\n',
}
for name, data in ETCD_FRAMING.items():
    write("etcd_framing", name, data)
# --- the local store's state file (local_state): a mode byte (1: the target fixes the
# body length and CRC32C after mutation), then a file as LocalStore::Save writes it
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF
def state_file(records, saved=1_796_212_800 * 10**9, version=1):
    meta = struct.pack("<q4Q", saved, 1, 2, 3, 4)
    recs = [(1, meta)] + records
    body = b"".join(struct.pack("<BI", t, len(p)) + p for t, p in recs)
    head = b"TGLSTATE" + struct.pack("<IIQ", version, len(recs), len(body))
    return head + body + struct.pack("<I", crc32c(head + body))
S = 1_796_212_800 * 10**9
H = 10**9
LOCAL_STATE = {
    "empty": state_file([]),
    "bucket": state_file([(2, struct.pack("<H", 0) + b"api"),
                          (3, struct.pack("<QQHq", 0x1234, 0x5678, 0, S + 30 * H))]),
    "window-and-log": state_file([
        (2, struct.pack("<H", 0) + b"daily"), (2, struct.pack("<H", 1) + b"log"),
        (4, struct.pack("<QQHQq", 0xabc, 0xdef, 0, (20424 << 24) | 900, S + 12 * 3600 * H)),
        (5, struct.pack("<QQHI", 0x99, 0x77, 1, 3) +
            struct.pack("<qqqqqq", S - 5 * H, 1, S - 4 * H, 2, S - H, 3))]),
    "shared-group": state_file([(3, struct.pack("<QQHq", 7, 8, 1023, S + 600 * H))]),
    "future-version": state_file([], version=2),
}
for name, data in LOCAL_STATE.items():
    write("local_state", name, b"\x00" + data)
write("local_state", "patched-bucket", b"\x01" + LOCAL_STATE["bucket"])
# --- systemd socket activation (systemd_listen): flags, LISTEN_PID NUL LISTEN_FDS NUL names ---
SYSTEMD_LISTEN = {
    "two-named": b"\x07" + b"4242\x00" + b"2\x00" + b"listen:admin",
    "two-by-order": b"\x03" + b"4242\x00" + b"2\x00",
    "admin-only": b"\x07" + b"4242\x00" + b"1\x00" + b"admin",
    "zero": b"\x03" + b"4242\x00" + b"0\x00",
    "other-process": b"\x03" + b"1\x00" + b"1\x00",
    "no-pid": b"\x02" + b"\x00" + b"1\x00",
    "unset": b"\x05" + b"4242\x00" + b"\x00" + b"listen",
    "bad-pid": b"\x03" + b"x1\x00" + b"1\x00",
    "too-many": b"\x03" + b"4242\x00" + b"17\x00",
    "three-unnamed": b"\x03" + b"4242\x00" + b"3\x00",
    "name-count": b"\x07" + b"4242\x00" + b"1\x00" + b"listen:admin",
    "unknown-name": b"\x07" + b"4242\x00" + b"1\x00" + b"tollgated.socket",
    "twice": b"\x07" + b"4242\x00" + b"2\x00" + b"listen:listen",
    "control-bytes": b"\x07" + b"4242\x00" + b"1\x00" + b"li\nst\x1ben",
}
for name, data in SYSTEMD_LISTEN.items():
    write("systemd_listen", name, data)
print("seeds written under", CORPUS)
