// TLS and mTLS on the real tollgated's listeners (issue 35), against real
// peers: certificates made by `openssl` at the start of the suite (a CA, server
// certificates for 127.0.0.1 / localhost, client certificates, an expired one,
// one from another CA), clients `curl` and python3's `ssl` module.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_pki.h"
#if TOLLGATE_TEST_GRPC
#include <grpcpp/grpcpp.h>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#endif

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A python3 TLS client: one connection, GET `path` (twice with --hold: the
// second after the file `hold` appears, on the same connection). Prints JSON:
// the TLS version, the server certificate's CN, the statuses, or the error.
constexpr const char* kPythonClient = R"PY(
import json, os, socket, ssl, sys, time
port, ca, cert, key, path, hold = sys.argv[1:7]
out = {}
def get(t):
    t.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: k\r\n\r\n" % path).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = t.recv(4096)
        if not chunk:
            raise EOFError("closed before a response")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    length = 0
    for line in lines[1:]:
        name, value = line.split(":", 1)
        if name.lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = t.recv(4096)
        if not chunk:
            raise EOFError("closed inside a body")
        body += chunk
    return int(lines[0].split()[1])
try:
    ctx = ssl.create_default_context(cafile=ca)
    if cert != "-":
        ctx.load_cert_chain(cert, key)
    t = ctx.wrap_socket(socket.create_connection(("127.0.0.1", int(port)), timeout=30),
                        server_hostname="localhost")
    out["version"] = t.version()
    out["cn"] = dict(x[0] for x in t.getpeercert()["subject"])["commonName"]
    out["status"] = get(t)
    if hold != "-":
        print(json.dumps(out), flush=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.01)
        out["status2"] = get(t)
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out), flush=True)
)PY";

class TlsTest : public ::testing::Test {
 protected:
  // The certificates, made once for the suite.
  static void SetUpTestSuite() {
    certs_ = new ScopedTempDir("TlsTest");
    const TestPki pki(certs_->path());
    const std::string server_san = "IP:127.0.0.1,DNS:localhost";
    for (const std::string& failed : {
             pki.MakeCa("ca", "tollgate-test-ca"),
             pki.MakeCa("other-ca", "other-test-ca"),
             pki.Issue("server", "server-1", server_san, "ca", 2),
             pki.Issue("server2", "server-2", server_san, "ca", 2),
             pki.Issue("expired", "server-old", server_san, "ca", -1),
             pki.Issue("client-a", "client-a", "DNS:client-a.test", "ca", 2),
             pki.Issue("client-b", "client-b", "DNS:client-b.test", "ca", 2),
             pki.Issue("client-c", "someone", "URI:spiffe://test/client-c", "ca", 2),
             pki.Issue("stranger", "client-a", "DNS:client-a.test", "other-ca", 2),
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
    if (Shell("curl --version").exit_code != 0) GTEST_SKIP() << "no curl";
    policy_ = dir_ + "/policy.json";
    WriteFile(policy_, GenerousPolicy(1000000));
    WriteFile(dir_ + "/client.py", kPythonClient);
  }

  static std::string Cert(const std::string& name) { return certs_->path() + "/" + name + ".pem"; }
  static std::string Key(const std::string& name) { return certs_->path() + "/" + name + ".key"; }

  // A tollgated config: `tls` (JSON) on the main listener, `extra` more fields.
  std::string Config(const std::string& tls, const std::string& extra = "") {
    const std::string path = dir_ + "/tollgated.json";
    WriteFile(path, R"({"policy": ")" + policy_ +
                        R"(", "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 2)" +
                        (tls.empty() ? "" : ", \"tls\": " + tls) + extra + "}");
    return path;
  }
  std::string ServerTls(const std::string& more = "") {
    return R"({"cert_file": ")" + Cert("server") + R"(", "key_file": ")" + Key("server") + "\"" +
           more + "}";
  }

  // curl's HTTP status for `url` (0 when the exchange failed), with its own arguments.
  static CommandResult Curl(const std::string& url, const std::string& args = "") {
    return Shell("curl -sS --max-time 20 -o /dev/null -w '%{http_code}' --cacert " + Cert("ca") +
                 " " + args + " '" + url + "'");
  }
  static std::string Url(int port, const std::string& path = "/healthz") {
    return "https://127.0.0.1:" + std::to_string(port) + path;
  }
  json Python(int port, const std::string& client, const std::string& path = "/healthz") {
    std::string cert = client.empty() ? "-" : Cert(client);
    std::string key = client.empty() ? "-" : Key(client);
    CommandResult r = Shell("python3 " + dir_ + "/client.py " + std::to_string(port) + " " +
                            Cert("ca") + " " + cert + " " + key + " " + path + " -");
    json j = json::parse(r.output, nullptr, false);
    return j.is_discarded() ? json{{"error", r.output}} : j;
  }
  // A handshake counter of /metrics (the admin listener, plain); 0 when absent.
  static uint64_t Handshakes(int admin_port, const std::string& result,
                             const std::string& listener = "main") {
    HttpResponse m = Fetch(admin_port, "GET", "/metrics");
    const std::string sample =
        "tollgate_tls_handshakes_total{listener=\"" + listener + "\",result=\"" + result + "\"} ";
    size_t at = m.body.find(sample);
    return at == std::string::npos ? 0 : std::stoull(m.body.substr(at + sample.size()));
  }

  // A tollgated counter of tollgate_tls_reloads_total; 0 when absent.
  static uint64_t Reloads(int admin_port, const std::string& listener, const std::string& result) {
    HttpResponse m = Fetch(admin_port, "GET", "/metrics");
    const std::string sample =
        "tollgate_tls_reloads_total{listener=\"" + listener + "\",result=\"" + result + "\"} ";
    size_t at = m.body.find(sample);
    return at == std::string::npos ? 0 : std::stoull(m.body.substr(at + sample.size()));
  }

  // The certificate pair `name` copied to the live files (rename into place,
  // the key first, as an operator's tool would).
  void Install(const std::string& cert_pem, const std::string& key_pem) {
    WriteFile(live_key_ + ".new", ReadAll(key_pem));
    std::filesystem::rename(live_key_ + ".new", live_key_);
    WriteFile(live_cert_ + ".new", ReadAll(cert_pem));
    std::filesystem::rename(live_cert_ + ".new", live_cert_);
  }
  std::string LiveTls(const std::string& more = "") {
    return R"({"cert_file": ")" + live_cert_ + R"(", "key_file": ")" + live_key_ + "\"" + more +
           "}";
  }

  // A python3 client holding one connection: its first line when connected
  // (the certificate it saw), its second after Release() (a second request on
  // the same connection).
  class HeldClient {
   public:
    HeldClient(const std::string& dir, int port)
        : go_(dir + "/go-" + std::to_string(port)), thread_([this, dir, port] {
            FILE* p = ::popen(("python3 " + dir + "/client.py " + std::to_string(port) + " " +
                               Cert("ca") + " - - /healthz " + go_ + " 2>&1")
                                  .c_str(),
                              "r");
            char line[4096];
            while (p != nullptr && std::fgets(line, sizeof line, p) != nullptr) {
              std::lock_guard lock(mu_);
              lines_.emplace_back(line);
            }
            if (p != nullptr) ::pclose(p);
          }) {}
    ~HeldClient() { Release(); }
    bool WaitConnected() {
      return WaitFor([&] { return Lines().size() >= 1; }, std::chrono::seconds(30));
    }
    // Lets the client send its second request and waits for it to finish.
    std::vector<json> Release() {
      WriteFile(go_, "");
      if (thread_.joinable()) thread_.join();
      std::vector<json> out;
      for (const auto& line : Lines()) out.push_back(json::parse(line, nullptr, false));
      return out;
    }

   private:
    std::vector<std::string> Lines() {
      std::lock_guard lock(mu_);
      return lines_;
    }
    const std::string go_;
    std::mutex mu_;
    std::vector<std::string> lines_;  // guarded by mu_
    std::thread thread_;
  };

  static ScopedTempDir* certs_;
  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  const std::string live_cert_ = dir_ + "/live.pem";
  const std::string live_key_ = dir_ + "/live.key";
  std::string policy_;
};

ScopedTempDir* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, ServesTheMainAndAdminListenersOverTlsToCurlAndPython) {
  const std::string admin_tls = R"(, "admin": {"listen": "127.0.0.1:0", "tls": {"cert_file": ")" +
                                Cert("server") + R"(", "key_file": ")" + Key("server") + "\"}}";
  Tollgated t({"--config", Config(ServerTls(), admin_tls)}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  CommandResult r = Curl(Url(t.port()));
  EXPECT_EQ(r.output, "200") << r.output;
  r = Curl(Url(t.port(), "/v1/auth"), "-H 'X-Api-Key: k'");
  EXPECT_EQ(r.output, "204") << r.output;  // allowed
  // Verified against the CA: without it, curl refuses the certificate.
  r = Shell("curl -sS --max-time 20 -o /dev/null " + Url(t.port()));
  EXPECT_NE(r.exit_code, 0) << r.output;

  json p = Python(t.port(), "", "/v1/auth");
  EXPECT_EQ(p.value("status", 0), 204) << p;
  EXPECT_EQ(p.value("cn", ""), "server-1") << p;
  EXPECT_TRUE(p.value("version", "") == "TLSv1.3" || p.value("version", "") == "TLSv1.2") << p;
  // TLS 1.1 and older are refused.
  r = Curl(Url(t.port()), "--tlsv1.0 --tls-max 1.1 --ciphers DEFAULT@SECLEVEL=0");
  EXPECT_NE(r.exit_code, 0) << r.output;

  // The admin listener speaks TLS too.
  r = Curl(Url(t.admin_port(), "/metrics"));
  EXPECT_EQ(r.output, "200") << r.output;
  CommandResult metrics = Shell("curl -sS --max-time 20 --cacert " + Cert("ca") + " " +
                                Url(t.admin_port(), "/metrics"));
  EXPECT_NE(metrics.output.find("tollgate_tls_handshakes_total{listener=\"main\",result=\"ok\"} "),
            std::string::npos)
      << metrics.output;
}

// The admin listener's TLS from the command line, as the main listener's.
TEST_F(TlsTest, TheAdminTlsFlagsServeTheAdminListenerOverTls) {
  Tollgated t({"--config", Config(""), "--admin-tls-cert", Cert("server"), "--admin-tls-key",
               Key("server"), "--admin-tls-client-ca", Cert("ca")},
              dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  EXPECT_EQ(Curl(Url(t.admin_port(), "/metrics"),
                 "--cert " + Cert("client-a") + " --key " + Key("client-a"))
                .output,
            "200");
  CommandResult no_cert = Curl(Url(t.admin_port(), "/metrics"));
  EXPECT_NE(no_cert.exit_code, 0) << no_cert.output;
  HttpResponse plain = Fetch(t.admin_port(), "GET", "/metrics");
  EXPECT_FALSE(plain.ok && plain.status == 200) << plain.status;
}

TEST_F(TlsTest, APlaintextClientOnTheTlsPortFailsAndTheServerKeepsServing) {
  Tollgated t({"--config", Config(ServerTls())}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  HttpResponse plain = Fetch(t.port(), "GET", "/healthz");
  EXPECT_FALSE(plain.ok && plain.status == 200) << plain.status;
  EXPECT_TRUE(WaitFor([&] { return Handshakes(t.admin_port(), "protocol") == 1; }))
      << Handshakes(t.admin_port(), "protocol");
  EXPECT_EQ(Curl(Url(t.port())).output, "200");
  EXPECT_EQ(Handshakes(t.admin_port(), "ok"), 1u);
}

TEST_F(TlsTest, MutualTlsRefusesNoCertificateAnotherCaAndNamesNotAllowed) {
  const std::string mtls =
      ServerTls(R"(, "client_ca_file": ")" + Cert("ca") +
                R"(", "allowed_names": ["client-a", "spiffe://test/client-c"])");
  Tollgated t({"--config", Config(mtls)}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  auto with = [&](const std::string& client) {
    return "--cert " + Cert(client) + " --key " + Key(client);
  };
  // Allowed by its CN, and by its SAN URI.
  EXPECT_EQ(Curl(Url(t.port()), with("client-a")).output, "200");
  EXPECT_EQ(Curl(Url(t.port()), with("client-c")).output, "200");
  EXPECT_EQ(Python(t.port(), "client-a").value("status", 0), 200);
  // Refused: no certificate, a certificate from another CA, a name not in the list.
  CommandResult none = Curl(Url(t.port()));
  EXPECT_NE(none.exit_code, 0) << none.output;
  CommandResult stranger = Curl(Url(t.port()), with("stranger"));
  EXPECT_NE(stranger.exit_code, 0) << stranger.output;
  CommandResult b = Curl(Url(t.port()), with("client-b"));
  EXPECT_NE(b.exit_code, 0) << b.output;
  json p = Python(t.port(), "client-b");
  EXPECT_TRUE(p.contains("error")) << p;
  EXPECT_TRUE(WaitFor([&] {
    return Handshakes(t.admin_port(), "no_client_cert") == 1 &&
           Handshakes(t.admin_port(), "bad_client_cert") == 1 &&
           Handshakes(t.admin_port(), "name_not_allowed") == 2;
  })) << Handshakes(t.admin_port(), "no_client_cert")
      << " " << Handshakes(t.admin_port(), "bad_client_cert") << " "
      << Handshakes(t.admin_port(), "name_not_allowed");
  EXPECT_EQ(Handshakes(t.admin_port(), "ok"), 3u);
}

TEST_F(TlsTest, AnExpiredCertificateStartsWithAWarningAndClientsRefuseIt) {
  const std::string config = Config(R"({"cert_file": ")" + Cert("expired") + R"(", "key_file": ")" +
                                    Key("expired") + "\"}");
  CommandResult check = Shell(Binary() + " --check --config " + config);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("warning: tls.cert_file: " + Cert("expired") +
                              ": the certificate expired on "),
            std::string::npos)
      << check.output;
  Tollgated t({"--config", config}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  EXPECT_NE(t.Log().find("warning: tls.cert_file: " + Cert("expired")), std::string::npos)
      << t.Log();
  CommandResult r = Curl(Url(t.port()));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("expired"), std::string::npos) << r.output;
}

TEST_F(TlsTest, BadFilesExitTwoWithTheConfigPathAndCheckSaysTheSame) {
  struct Case {
    std::string tls;
    std::string message;
  } cases[] = {
      {R"({"cert_file": ")" + Cert("server") + R"(", "key_file": ")" + Key("server2") + "\"}",
       "tls.key_file: " + Key("server2") + ": does not match the certificate in " + Cert("server")},
      {R"({"cert_file": ")" + dir_ + R"(/missing.pem", "key_file": ")" + Key("server") + "\"}",
       "tls.cert_file: " + dir_ + "/missing.pem: cannot read: No such file or directory"},
      {R"({"cert_file": ")" + policy_ + R"(", "key_file": ")" + Key("server") + "\"}",
       "tls.cert_file: " + policy_ + ": no PEM certificate"},
      {ServerTls(R"(, "allowed_names": ["x"])"), "tls.allowed_names: needs client_ca_file"},
  };
  for (const Case& c : cases) {
    const std::string config = Config(c.tls);
    CommandResult check = Shell(Binary() + " --check --config " + config);
    EXPECT_EQ(check.exit_code, 2) << check.output;
    EXPECT_NE(check.output.find(c.message), std::string::npos) << check.output;
    Tollgated t({"--config", config}, dir_);
    EXPECT_EQ(t.WaitExit(10s), 2) << t.Log();
    EXPECT_NE(t.Log().find(c.message), std::string::npos) << t.Log();
  }
}

// SIGHUP: new connections get the new certificate, a connection opened before
// keeps working; a broken certificate file keeps the current one (logged).
TEST_F(TlsTest, SighupReloadsTheCertificateWithoutDroppingConnections) {
  const std::string cert = dir_ + "/live.pem";
  const std::string key = dir_ + "/live.key";
  std::filesystem::copy_file(Cert("server"), cert);
  std::filesystem::copy_file(Key("server"), key);
  Tollgated t(
      {"--config", Config(R"({"cert_file": ")" + cert + R"(", "key_file": ")" + key + "\"}")},
      dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  EXPECT_EQ(Python(t.port(), "").value("cn", ""), "server-1");

  // A connection held open across the reload.
  const std::string go = dir_ + "/go";
  std::mutex mu;
  std::vector<std::string> lines;
  std::thread held([&] {
    FILE* p = ::popen(("python3 " + dir_ + "/client.py " + std::to_string(t.port()) + " " +
                       Cert("ca") + " - - /healthz " + go + " 2>&1")
                          .c_str(),
                      "r");
    char line[4096];
    while (p != nullptr && std::fgets(line, sizeof line, p) != nullptr) {
      std::lock_guard lock(mu);
      lines.emplace_back(line);
    }
    if (p != nullptr) ::pclose(p);
  });
  auto line_count = [&] {
    std::lock_guard lock(mu);
    return lines.size();
  };
  // However the test ends, the held client is let go and joined.
  struct Release {
    std::string go;
    std::thread& held;
    ~Release() {
      WriteFile(go, "");
      if (held.joinable()) held.join();
    }
  } release{go, held};
  ASSERT_TRUE(WaitFor([&] { return line_count() >= 1; }, 30s));

  std::filesystem::copy_file(Cert("server2"), cert,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(Key("server2"), key,
                             std::filesystem::copy_options::overwrite_existing);
  t.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return t.Log().find("tls_reloaded") != std::string::npos; }))
      << t.Log();
  EXPECT_EQ(Python(t.port(), "").value("cn", ""), "server-2");

  WriteFile(go, "");
  held.join();
  ASSERT_EQ(line_count(), 2u);
  json first = json::parse(lines[0], nullptr, false);
  json second = json::parse(lines[1], nullptr, false);
  EXPECT_EQ(first.value("cn", ""), "server-1") << lines[0];
  EXPECT_EQ(second.value("status2", 0), 200) << lines[1];

  // A broken certificate: the current one stays.
  WriteFile(cert, "not a certificate\n");
  t.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] { return t.Log().find("tls_not_reloaded") != std::string::npos; }))
      << t.Log();
  EXPECT_NE(t.Log().find("tls.cert_file: " + cert + ": no PEM certificate"), std::string::npos)
      << t.Log();
  EXPECT_EQ(Python(t.port(), "").value("cn", ""), "server-2");
}

// The file watch (policy_poll_interval_ms): a certificate renewed on disk
// reaches new handshakes without a signal, a connection opened before keeps
// working, and a pair that does not match keeps the current one (logged and
// counted).
TEST_F(TlsTest, AChangedCertificateFileIsReloadedWithoutASignal) {
  Install(Cert("server"), Key("server"));
  Tollgated t({"--config", Config(LiveTls(), R"(, "policy_poll_interval_ms": 50)")}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  EXPECT_EQ(Python(t.port(), "").value("cn", ""), "server-1");
  HeldClient held(dir_, t.port());
  ASSERT_TRUE(held.WaitConnected());

  Install(Cert("server2"), Key("server2"));
  EXPECT_TRUE(WaitFor([&] { return Python(t.port(), "").value("cn", "") == "server-2"; }, 60s))
      << t.Log();
  EXPECT_GE(Reloads(t.admin_port(), "main", "ok"), 1u);
  EXPECT_NE(t.Log().find("\"trigger\":\"file_changed\""), std::string::npos) << t.Log();
  std::vector<json> lines = held.Release();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].value("cn", ""), "server-1") << lines[0];
  EXPECT_EQ(lines[1].value("status2", 0), 200) << lines[1];

  // A certificate with another certificate's key: refused, server-2 stays.
  // (Counted from here: the watch may have caught the pair above half renamed.)
  const uint64_t failed_before = Reloads(t.admin_port(), "main", "failed");
  Install(Cert("server"), Key("server2"));
  ASSERT_TRUE(
      WaitFor([&] { return Reloads(t.admin_port(), "main", "failed") > failed_before; }, 60s))
      << t.Log();
  EXPECT_NE(t.Log().find("tls.key_file: " + live_key_ + ": does not match the certificate in " +
                         live_cert_),
            std::string::npos)
      << t.Log();
  EXPECT_EQ(Python(t.port(), "").value("cn", ""), "server-2");
  EXPECT_EQ(Curl(Url(t.port())).output, "200");
}

// A client that connects and says nothing holds a handshake slot only until
// handshake_timeout; while max_handshakes are taken, more are closed at once.
TEST_F(TlsTest, SilentClientsAreCutAtTheHandshakeTimeoutAndCapped) {
  Tollgated t(
      {"--config", Config(ServerTls(R"(, "handshake_timeout_ms": 500, "max_handshakes": 1)"))},
      dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  HttpConnection silent(t.port(), 30s);
  ASSERT_TRUE(silent.connected());
  // Its slot is taken: another handshake is refused (a TLS client sees the close).
  EXPECT_TRUE(WaitFor([&] {
    Curl(Url(t.port()));
    return Handshakes(t.admin_port(), "busy") >= 1;
  }));
  EXPECT_TRUE(silent.WaitClosed(10s));
  EXPECT_TRUE(WaitFor([&] { return Handshakes(t.admin_port(), "timeout") == 1; }));
  EXPECT_EQ(Curl(Url(t.port())).output, "200");
}

TEST_F(TlsTest, TheGatewayForwardsRequestsFromTlsClients) {
  TestUpstream upstream;
  Tollgated t({"--config", Config(ServerTls()), "--upstream",
               "http://127.0.0.1:" + std::to_string(upstream.port())},
              dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  // Bodyless (the one-write path) and with a body (the streamed path); the
  // upstream is told the client came over https.
  for (const std::string& args :
       {std::string("-H 'X-Api-Key: k'"), "-H 'X-Api-Key: k' --data-binary @" + policy_}) {
    CommandResult r = Shell("curl -sS --max-time 20 --cacert " + Cert("ca") + " " + args + " " +
                            Url(t.port(), "/anything"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    json seen = json::parse(r.output, nullptr, false);
    ASSERT_FALSE(seen.is_discarded()) << r.output;
    EXPECT_EQ(seen["headers"].value("x-forwarded-proto", ""), "https") << r.output;
  }
  EXPECT_EQ(upstream.requests(), 2);
  EXPECT_EQ(Python(t.port(), "", "/anything").value("status", 0), 200);
}

#if TOLLGATE_TEST_GRPC
namespace rlspb = ::envoy::service::ratelimit::v3;

// Envoy's ShouldRateLimit over gRPC with TLS (grpc.tls): a client with an
// allowed certificate is answered; without a certificate, with a plaintext
// channel or with a name not allowed it is refused.
TEST_F(TlsTest, TheEnvoyGrpcPortSpeaksMutualTls) {
  const std::string rls_dir = dir_ + "/ratelimit";
  std::filesystem::create_directory(rls_dir);
  WriteFile(rls_dir + "/api.yaml",
            "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
            "requests_per_unit: 100}\n");
  const std::string grpc =
      R"(, "grpc": {"listen": "127.0.0.1:0", "rls_config": [")" + rls_dir + R"("], "tls": )" +
      ServerTls(R"(, "client_ca_file": ")" + Cert("ca") + R"(", "allowed_names": ["client-a"])") +
      "}";
  Tollgated t({"--config", Config("", grpc)}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  ASSERT_GT(t.grpc_port(), 0) << t.Log();
  auto call = [&](std::shared_ptr<grpc::ChannelCredentials> creds) {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    auto stub = rlspb::RateLimitService::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(t.grpc_port()), creds, args));
    rlspb::RateLimitRequest req;
    req.set_domain("api");
    auto* entry = req.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value("u1");
    rlspb::RateLimitResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::Status st = stub->ShouldRateLimit(&ctx, req, &resp);
    return std::pair{st, resp.overall_code()};
  };
  auto tls = [&](const std::string& client) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadAll(Cert("ca"));
    if (!client.empty()) {
      o.pem_cert_chain = ReadAll(Cert(client));
      o.pem_private_key = ReadAll(Key(client));
    }
    return grpc::SslCredentials(o);
  };
  auto [ok, code] = call(tls("client-a"));
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(code, rlspb::RateLimitResponse::OK);
  EXPECT_FALSE(call(tls("")).first.ok());
  EXPECT_FALSE(call(tls("stranger")).first.ok());
  EXPECT_FALSE(call(grpc::InsecureChannelCredentials()).first.ok());
  grpc::Status denied = call(tls("client-b")).first;
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();
}

// grpc.tls follows its files like the other listeners: new channels see the
// new certificate, a channel connected before keeps working, and a broken
// pair keeps the current certificate (tollgated checks it before gRPC sees it).
TEST_F(TlsTest, TheEnvoyGrpcPortReloadsItsCertificate) {
  const std::string rls_dir = dir_ + "/ratelimit";
  std::filesystem::create_directory(rls_dir);
  WriteFile(rls_dir + "/api.yaml",
            "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
            "requests_per_unit: 100}\n");
  Install(Cert("server"), Key("server"));
  const std::string grpc =
      R"(, "policy_poll_interval_ms": 50, "grpc": {"listen": "127.0.0.1:0", "rls_config": [")" +
      rls_dir + R"("], "tls": )" +
      LiveTls(R"(, "client_ca_file": ")" + Cert("ca") + R"(", "allowed_names": ["client-a"])") +
      "}";
  Tollgated t({"--config", Config("", grpc)}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();
  ASSERT_GT(t.grpc_port(), 0) << t.Log();
  grpc::SslCredentialsOptions client;
  client.pem_root_certs = ReadAll(Cert("ca"));
  client.pem_cert_chain = ReadAll(Cert("client-a"));
  client.pem_private_key = ReadAll(Key("client-a"));
  // A channel of its own (its own connection), or `reuse`.
  auto channel = [&] {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(t.grpc_port()),
                                     grpc::SslCredentials(client), args);
  };
  // The call's status and the server certificate's CN.
  auto call = [&](const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = rlspb::RateLimitService::NewStub(ch);
    rlspb::RateLimitRequest req;
    req.set_domain("api");
    auto* entry = req.add_descriptors()->add_entries();
    entry->set_key("user");
    entry->set_value("u1");
    rlspb::RateLimitResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    grpc::Status st = stub->ShouldRateLimit(&ctx, req, &resp);
    std::string cn;
    if (auto auth = ctx.auth_context()) {
      for (const auto& v : auth->FindPropertyValues("x509_common_name"))
        cn.assign(v.data(), v.size());
    }
    return std::pair{st, cn};
  };
  std::shared_ptr<grpc::Channel> held = channel();
  auto [first, first_cn] = call(held);
  ASSERT_TRUE(first.ok()) << first.error_message();
  EXPECT_EQ(first_cn, "server-1");

  Install(Cert("server2"), Key("server2"));
  EXPECT_TRUE(WaitFor([&] { return call(channel()).second == "server-2"; }, 60s)) << t.Log();
  EXPECT_GE(Reloads(t.admin_port(), "grpc", "ok"), 1u);
  auto [again, again_cn] = call(held);
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(again_cn, "server-1");  // the same connection, the certificate it started with

  // Not a certificate: refused before gRPC sees it.
  const uint64_t failed_before = Reloads(t.admin_port(), "grpc", "failed");
  WriteFile(live_cert_, "not a certificate\n");
  ASSERT_TRUE(
      WaitFor([&] { return Reloads(t.admin_port(), "grpc", "failed") > failed_before; }, 60s))
      << t.Log();
  EXPECT_NE(t.Log().find("grpc.tls.cert_file: " + live_cert_ + ": no PEM certificate"),
            std::string::npos)
      << t.Log();
  // gRPC's watcher polls every second: calls for 3 s, so that a pair wrongly
  // handed to gRPC would be seen (an observation window, not a wait for a state).
  const auto settle = std::chrono::steady_clock::now() + 3s;
  bool kept = true;
  while (std::chrono::steady_clock::now() < settle && kept) {
    auto [st, cn] = call(channel());
    kept = st.ok() && cn == "server-2";
  }
  EXPECT_TRUE(kept) << t.Log();
}
#endif

}  // namespace
}  // namespace tollgate::testing
