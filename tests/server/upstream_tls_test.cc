// The gateway speaking TLS to an https:// upstream (issue 35): the real
// tollgated in front of a python3 `ssl` + http.server upstream, certificates
// made by `openssl` at the start of the suite (testing/test_pki.h). Right CA,
// wrong CA, expired, another name, verification off, a plaintext upstream, a
// silent one, mTLS to the upstream, keep-alive and session resumption, and the
// start errors of bad files.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/child_process.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_pki.h"
#include "testing/timing.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// The upstream. Modes: "tls" (http.server behind ssl, HTTP/1.1 keep-alive;
// client certificates required when a client CA is given), "plain400" (answers
// any bytes with a plaintext 400 and closes, as nginx or Go do to a TLS
// ClientHello), "silent" (reads and never answers). It keeps its counts in
// <dir>/stats.json: TCP connections accepted, TLS handshakes done, sessions
// resumed, requests, the last SNI name. GET answers JSON: the connection's
// number, the path, the Host field, the client certificate's CN; /big 100000
// bytes; POST echoes the body's length.
constexpr const char* kUpstream = R"PY(
import json, os, socket, ssl, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
mode, cert, key, client_ca, out = sys.argv[1:6]
lock = threading.Lock()
stats = {"connections": 0, "handshakes": 0, "resumed": 0, "requests": 0, "sni": None}
def publish():
    with open(out + "/stats.tmp", "w") as f:
        json.dump(stats, f)
    os.replace(out + "/stats.tmp", out + "/stats.json")
def count(name):
    with lock:
        stats[name] += 1
        publish()
        return stats[name]
def ready(port):
    with lock:
        publish()
    with open(out + "/port.tmp", "w") as f:
        f.write(str(port))
    os.replace(out + "/port.tmp", out + "/port")
if mode != "tls":
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    ready(listener.getsockname()[1])
    def serve(c):
        try:
            c.settimeout(60)
            if c.recv(4096) and mode == "plain400":
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            elif mode == "silent":
                while c.recv(4096):
                    pass
        except OSError:
            pass
        c.close()
    while True:
        c, _ = listener.accept()
        count("connections")
        threading.Thread(target=serve, args=(c,), daemon=True).start()
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
if client_ca != "-":
    ctx.load_verify_locations(client_ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
def sni(sock, name, context):
    with lock:
        stats["sni"] = name
ctx.sni_callback = sni
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def setup(self):
        self.request.settimeout(60)
        self.request = ctx.wrap_socket(self.request, server_side=True)
        self.conn = count("handshakes")
        if self.request.session_reused:
            count("resumed")
        super().setup()
    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        count("requests")
        if self.path.startswith("/big"):
            return self.answer(b"x" * 100000)
        peer = self.request.getpeercert()
        cn = dict(x[0] for x in peer["subject"]).get("commonName") if peer else None
        self.answer(json.dumps({"connection": self.conn, "path": self.path,
                                "host": self.headers.get("Host"), "client": cn}).encode())
    def do_POST(self):
        count("requests")
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer(json.dumps({"received": len(data)}).encode())
    def log_message(self, *args):
        pass
class Server(ThreadingHTTPServer):
    daemon_threads = True
    def get_request(self):
        s = super().get_request()
        count("connections")
        return s
    def handle_error(self, request, client_address):
        pass
server = Server(("127.0.0.1", 0), Handler)
ready(server.server_address[1])
server.serve_forever()
)PY";

// A tight rule for the key "limited" (3, refilled once in 100 s: never during
// a test), every other key generous.
constexpr const char* kPolicy = R"({"rules": [
  {"name": "limited", "match": {"header:x-api-key": "limited"},
   "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
   "algorithm_config": {"rps": 0.01, "burst": 3}},
  {"name": "generous", "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
   "algorithm_config": {"rps": 1000000, "burst": 1000000}}
]})";

class UpstreamTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new ScopedTempDir("UpstreamTlsTest");
    const TestPki pki(certs_->path());
    const std::string san = "IP:127.0.0.1,DNS:localhost";
    for (const std::string& failed : {
             pki.MakeCa("ca", "tollgate-test-ca"),
             pki.MakeCa("other-ca", "other-test-ca"),
             pki.Issue("upstream", "upstream", san, "ca", 2),
             pki.Issue("stranger", "upstream", san, "other-ca", 2),
             pki.Issue("expired", "upstream-old", san, "ca", -1),
             pki.Issue("elsewhere", "elsewhere", "DNS:elsewhere.test", "ca", 2),
             pki.Issue("gateway", "gateway-client", "DNS:gateway.test", "ca", 2),
         }) {
      ASSERT_EQ(failed, "");
    }
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    if (Shell("python3 -c 'import ssl, http.server'").exit_code != 0) GTEST_SKIP() << "no python3";
    WriteText(dir_ + "/policy.json", kPolicy);
    WriteText(dir_ + "/upstream.py", kUpstream);
  }
  void TearDown() override {
    if (upstream_pid_ > 0) StopChild(upstream_pid_, SIGKILL);
  }

  static std::string Cert(const std::string& name) { return TestPki(certs_->path()).Cert(name); }
  static std::string Key(const std::string& name) { return TestPki(certs_->path()).Key(name); }
  static void WriteText(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }

  // Starts the upstream in `mode` with the certificate `cert` (and, for mTLS,
  // the CA its clients' certificates must chain to); its port, 0 on failure.
  int StartUpstream(const std::string& mode, const std::string& cert = "upstream",
                    const std::string& client_ca = "-") {
    const std::string out = dir_ + "/up";
    Shell("rm -rf " + out + " && mkdir -p " + out);
    upstream_pid_ = SpawnChild({{"/usr/bin/python3", dir_ + "/upstream.py", mode, Cert(cert),
                                 Key(cert), client_ca == "-" ? "-" : Cert(client_ca), out},
                                {},
                                "",
                                out + ".log"});
    if (!WaitFor([&] { return !ReadAll(out + "/port").empty(); }, 10s)) return 0;
    return std::atoi(ReadAll(out + "/port").c_str());
  }
  json UpstreamStats() {
    json j = json::parse(ReadAll(dir_ + "/up/stats.json"), nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }

  // A tollgated config with gateway `gateway` (JSON object members).
  std::string Config(const std::string& gateway, const std::string& extra = "") {
    const std::string path = dir_ + "/tollgated.json";
    WriteText(path, R"({"policy": ")" + dir_ + R"(/policy.json", "listen": "127.0.0.1:0",
        "admin": "127.0.0.1:0", "threads": 1, "gateway": {)" +
                        gateway + "}" + extra + "}");
    return path;
  }
  // A fresh directory for each tollgated: its log is where WaitStarted reads
  // the ports, and an earlier instance's log must not answer for it.
  std::string RunDir() {
    const std::string d = dir_ + "/run-" + std::to_string(++runs_);
    std::filesystem::create_directory(d);
    return d;
  }
  static std::string Upstream(int port) { return "https://127.0.0.1:" + std::to_string(port); }
  // gateway members: the upstream on `port` and its upstream_tls members.
  static std::string Gateway(int port, const std::string& tls) {
    return R"("upstream": ")" + Upstream(port) + R"(", "upstream_tls": {)" + tls + "}";
  }
  static std::string CaFile(const std::string& ca) { return R"("ca_file": ")" + Cert(ca) + "\""; }

  static HttpResponse Get(int port, const std::string& key = "k",
                          const std::string& path = "/hello") {
    return Fetch(port, "GET", path, {{"X-Api-Key", key}});
  }
  // A sample of /metrics (the admin listener); -1 when absent.
  static int64_t Metric(int admin_port, const std::string& sample) {
    HttpResponse m = Fetch(admin_port, "GET", "/metrics");
    size_t at = m.body.find("\n" + sample + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(m.body.substr(at + sample.size() + 2));
  }
  static int64_t Handshakes(int admin_port, const std::string& result) {
    return Metric(admin_port, "tollgate_upstream_tls_handshakes_total{result=\"" + result + "\"}");
  }

  static ScopedTempDir* certs_;
  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  pid_t upstream_pid_ = -1;
  int runs_ = 0;
};

ScopedTempDir* UpstreamTlsTest::certs_ = nullptr;

// (1) The right CA (given by the flags): 200 through TLS on both the one-write
// path and the streamed ones (a request body, a response larger than the
// relay buffer), the Host field as the URL names it, and the rate limit still
// applies.
TEST_F(UpstreamTlsTest, TheRightCaForwardsOverTlsAndTheLimitStillApplies) {
  const int up = StartUpstream("tls");
  ASSERT_GT(up, 0) << ReadAll(dir_ + "/up.log");
  Tollgated t({"--config", Config(R"("connect_timeout_ms": 10000)"), "--upstream", Upstream(up),
               "--upstream-ca-file", Cert("ca")},
              RunDir());
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  HttpResponse r = Get(t.port());
  ASSERT_EQ(r.status, 200) << r.body << t.Log();
  json seen = json::parse(r.body, nullptr, false);
  EXPECT_EQ(seen.value("path", ""), "/hello") << r.body;
  EXPECT_EQ(seen.value("host", ""), "127.0.0.1:" + std::to_string(up)) << r.body;
  HttpResponse post =
      Fetch(t.port(), "POST", "/upload", {{"X-Api-Key", "k"}}, std::string(50000, 'b'));
  ASSERT_EQ(post.status, 200) << post.body;
  EXPECT_EQ(json::parse(post.body, nullptr, false).value("received", 0), 50000) << post.body;
  HttpResponse big = Get(t.port(), "k", "/big");
  ASSERT_EQ(big.status, 200) << big.error;
  EXPECT_EQ(big.body.size(), 100000u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Get(t.port(), "limited").status, 200) << i;
  EXPECT_EQ(Get(t.port(), "limited").status, 429);
  EXPECT_EQ(UpstreamStats().value("requests", 0), 6);
  EXPECT_GE(Handshakes(t.admin_port(), "ok"), 1);
}

// (2) A certificate from another CA, or an expired one: 502 with a problem
// body, the reason logged, the handshake counted by why it failed. The
// upstream sees no request.
TEST_F(UpstreamTlsTest, AnUntrustedOrExpiredCertificateIsA502) {
  struct Case {
    std::string cert, result, reason;
  } cases[] = {
      {"stranger", "untrusted", "certificate verify failed: unable to get local issuer"},
      {"expired", "expired", "certificate verify failed: certificate has expired"},
  };
  for (const Case& c : cases) {
    const int up = StartUpstream("tls", c.cert);
    ASSERT_GT(up, 0);
    Tollgated t({"--config", Config(Gateway(up, CaFile("ca")))}, RunDir());
    ASSERT_TRUE(t.WaitStarted()) << t.Log();
    HttpResponse r = Get(t.port());
    EXPECT_EQ(r.status, 502) << c.cert << ": " << r.body;
    EXPECT_EQ(r.Header("content-type"), "application/problem+json") << c.cert;
    EXPECT_NE(r.body.find("upstream TLS handshake failed"), std::string::npos) << r.body;
    EXPECT_TRUE(WaitFor([&] { return t.Log().find(c.reason) != std::string::npos; }))
        << c.cert << ": " << t.Log();
    EXPECT_EQ(Handshakes(t.admin_port(), c.result), 1) << c.cert;
    EXPECT_EQ(Handshakes(t.admin_port(), "ok"), 0) << c.cert;
    EXPECT_EQ(Metric(t.admin_port(), "tollgate_upstream_errors_total{kind=\"connect\"}"), 1);
    EXPECT_EQ(UpstreamStats().value("requests", -1), 0) << c.cert;
    StopChild(upstream_pid_, SIGKILL);
    upstream_pid_ = -1;
  }
}

// (3) A certificate for another name: 502 (name_mismatch); with server_name
// set to the name it carries, 200, and that name was sent as SNI.
TEST_F(UpstreamTlsTest, ACertificateForAnotherNameIsA502UnlessServerNameSaysIt) {
  const int up = StartUpstream("tls", "elsewhere");
  ASSERT_GT(up, 0);
  {
    Tollgated t({"--config", Config(Gateway(up, CaFile("ca")))}, RunDir());
    ASSERT_TRUE(t.WaitStarted()) << t.Log();
    EXPECT_EQ(Get(t.port()).status, 502);
    EXPECT_EQ(Handshakes(t.admin_port(), "name_mismatch"), 1) << t.Log();
    EXPECT_NE(t.Log().find("verified name 127.0.0.1"), std::string::npos) << t.Log();
  }
  Tollgated t(
      {"--config", Config(Gateway(up, CaFile("ca") + R"(, "server_name": "elsewhere.test")"))},
      RunDir());
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  EXPECT_EQ(Get(t.port()).status, 200) << t.Log();
  EXPECT_EQ(UpstreamStats().value("sni", ""), "elsewhere.test");
}

// (4) verify false: the wrong CA's certificate is accepted, and the start
// warns (--check too).
TEST_F(UpstreamTlsTest, VerifyFalseAcceptsAnyCertificateWithAWarning) {
  const int up = StartUpstream("tls", "stranger");
  ASSERT_GT(up, 0);
  const std::string config = Config(Gateway(up, CaFile("ca") + R"(, "verify": false)"));
  CommandResult check = Shell(Binary() + " --check --config " + config);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("warning: gateway.upstream_tls.verify: false"), std::string::npos)
      << check.output;
  Tollgated t({"--config", config}, RunDir());
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  EXPECT_EQ(Get(t.port()).status, 200) << t.Log();
  EXPECT_NE(t.Log().find("the upstream's certificate is not verified"), std::string::npos)
      << t.Log();
}

// (5) A plaintext upstream behind an https:// URL: 502 at once (it answers
// the ClientHello with a plaintext 400); one that says nothing: 504 at the
// connect timeout. Neither hangs the worker: the next request is answered.
TEST_F(UpstreamTlsTest, APlaintextOrSilentUpstreamFailsWithoutHanging) {
  {
    const int up = StartUpstream("plain400");
    ASSERT_GT(up, 0);
    Tollgated t({"--config", Config(Gateway(up, CaFile("ca")))}, RunDir());
    ASSERT_TRUE(t.WaitStarted()) << t.Log();
    HttpResponse r = Get(t.port());
    EXPECT_EQ(r.status, 502) << r.error;
    EXPECT_EQ(Handshakes(t.admin_port(), "protocol"), 1) << t.Log();
    EXPECT_NE(t.Log().find("does it speak TLS on this port?"), std::string::npos) << t.Log();
    EXPECT_EQ(Get(t.port()).status, 502);
    StopChild(upstream_pid_, SIGKILL);
    upstream_pid_ = -1;
  }
  const int up = StartUpstream("silent");
  ASSERT_GT(up, 0);
  Tollgated t({"--config", Config(Gateway(up, CaFile("ca")) + R"(, "connect_timeout_ms": 300)")},
              RunDir());
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  HttpConnection client(t.port(), 60s);
  EXPECT_EQ(client.Request("GET", "/a", {{"X-Api-Key", "k"}}).status, 504);
  EXPECT_EQ(Get(t.port()).status, 504);
  EXPECT_EQ(Handshakes(t.admin_port(), "timeout"), 2) << t.Log();
}

// (6) An upstream that requires a client certificate: without one, 502; with
// cert_file and key_file, 200 and the upstream saw the gateway's certificate.
TEST_F(UpstreamTlsTest, MutualTlsToTheUpstream) {
  const int up = StartUpstream("tls", "upstream", "ca");
  ASSERT_GT(up, 0);
  {
    Tollgated t({"--config", Config(Gateway(up, CaFile("ca")))}, RunDir());
    ASSERT_TRUE(t.WaitStarted()) << t.Log();
    HttpResponse r = Get(t.port());
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_EQ(UpstreamStats().value("requests", -1), 0);
  }
  Tollgated t(
      {"--config", Config(Gateway(up, CaFile("ca") + R"(, "cert_file": ")" + Cert("gateway") +
                                          R"(", "key_file": ")" + Key("gateway") + "\""))},
      RunDir());
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  HttpResponse r = Get(t.port());
  ASSERT_EQ(r.status, 200) << r.body << t.Log();
  EXPECT_EQ(json::parse(r.body, nullptr, false).value("client", ""), "gateway-client") << r.body;
}

// (7) Keep-alive: many requests (each on its own client connection) reuse one
// upstream TLS connection; with pooling off (max_idle_connections 0) each
// request makes a new connection, and the worker resumes its last session.
TEST_F(UpstreamTlsTest, UpstreamTlsConnectionsArePooledAndSessionsResumed) {
  const int up = StartUpstream("tls");
  ASSERT_GT(up, 0);
  constexpr int kRequests = 20;
  {
    Tollgated t({"--config", Config(Gateway(up, CaFile("ca")))}, RunDir());
    ASSERT_TRUE(t.WaitStarted()) << t.Log();
    for (int i = 0; i < kRequests; ++i) ASSERT_EQ(Get(t.port()).status, 200) << i << t.Log();
    json stats = UpstreamStats();
    EXPECT_EQ(stats.value("requests", 0), kRequests);
    EXPECT_EQ(stats.value("connections", 0), 1) << stats.dump();
    EXPECT_EQ(Handshakes(t.admin_port(), "ok"), 1);
  }
  StopChild(upstream_pid_, SIGKILL);
  const int again = StartUpstream("tls");
  ASSERT_GT(again, 0);
  Tollgated t({"--config", Config(Gateway(again, CaFile("ca")) + R"(, "max_idle_connections": 0)")},
              RunDir());
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Get(t.port()).status, 200) << i << t.Log();
  json stats = UpstreamStats();
  EXPECT_EQ(stats.value("connections", 0), 5) << stats.dump();
  EXPECT_GE(stats.value("resumed", 0), 1) << stats.dump();
  EXPECT_EQ(Metric(t.admin_port(), "tollgate_upstream_tls_resumed_total"),
            stats.value("resumed", 0));
}

// Bad files and misplaced settings: exit 2 with the config path, and --check
// says the same.
TEST_F(UpstreamTlsTest, BadFilesExitTwoWithTheConfigPathAndCheckSaysTheSame) {
  const std::string missing = dir_ + "/missing.pem";
  struct Case {
    std::string gateway, message;
  } cases[] = {
      {Gateway(443, R"("ca_file": ")" + missing + "\""),
       "gateway.upstream_tls.ca_file: " + missing + ": cannot read: No such file or directory"},
      {Gateway(443, R"("ca_file": ")" + dir_ + "/policy.json\""),
       "gateway.upstream_tls.ca_file: " + dir_ + "/policy.json: "},
      {Gateway(443, R"("cert_file": ")" + Cert("gateway") + "\""),
       "gateway.upstream_tls.key_file: cert_file and key_file go together"},
      {Gateway(443, R"("cert_file": ")" + Cert("gateway") + R"(", "key_file": ")" +
                        Key("upstream") + "\""),
       "gateway.upstream_tls.key_file: " + Key("upstream") + ": does not match the certificate"},
      {R"("upstream": "http://127.0.0.1:1", "upstream_tls": {"verify": false})",
       "gateway.upstream_tls: is set, but gateway.upstream is http://"},
  };
  for (const Case& c : cases) {
    const std::string config = Config(c.gateway);
    CommandResult check = Shell(Binary() + " --check --config " + config);
    EXPECT_EQ(check.exit_code, 2) << check.output;
    EXPECT_NE(check.output.find(c.message), std::string::npos) << check.output;
    Tollgated t({"--config", config}, RunDir());
    EXPECT_EQ(t.WaitExit(10s), 2) << t.Log();
    EXPECT_NE(t.Log().find(c.message), std::string::npos) << t.Log();
  }
}

}  // namespace
}  // namespace tollgate::testing
