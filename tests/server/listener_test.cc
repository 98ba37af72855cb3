// tollgated's listeners under hostile clients, over real sockets (in process):
// what the gateway listener exposes, connection caps per listener and per
// address, the body timeout, Host checks, one Content-Type on a rejected
// /v1/decide, a 413 the client actually receives, problem titles.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "tollgate/http_text.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

std::unique_ptr<TestServer> Start(server::ServerConfig c, const std::string& policy) {
  std::string error;
  auto s = TestServer::Start(std::move(c), policy, &error);
  EXPECT_TRUE(s != nullptr) << error;
  return s;
}

server::ServerConfig GatewayConfig(const TestUpstream& upstream) {
  server::ServerConfig c = TestServer::DefaultConfig();
  c.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  return c;
}

std::string DecideBody(const std::string& key) {
  return json({{"request", {{"method", "GET"}, {"path", "/"}, {"headers", {{"x-api-key", key}}}}}})
      .dump();
}

// Counts the header lines named `lower_name` in a raw response head.
int CountFields(const std::string& raw, const std::string& lower_name) {
  const std::string head = AsciiLowered(raw.substr(0, raw.find("\r\n\r\n")));
  int n = 0;
  for (size_t at = head.find("\r\n" + lower_name + ":"); at != std::string::npos;
       at = head.find("\r\n" + lower_name + ":", at + 1)) {
    ++n;
  }
  return n;
}

TEST(Listener, GatewayListenerProxiesDecisionAndMetricsPathsUnlessExposed) {
  TestUpstream upstream;
  auto s = Start(GatewayConfig(upstream), TightPolicy());
  ASSERT_TRUE(s);
  // Not tollgated's endpoints here: proxied like any path (the upstream answers).
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{{"POST", "/v1/decide"},
                                                        {"GET", "/v1/auth"},
                                                        {"GET", "/metrics"},
                                                        {"POST", "/v1/reload"}}) {
    int before = upstream.requests();
    HttpResponse r = Fetch(s->port, method, path, {{"X-Api-Key", "exposure-" + path}},
                           method == "POST" ? DecideBody("victim") : "");
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 200) << method << " " << path << ": " << r.body;
    EXPECT_EQ(upstream.requests(), before + 1) << method << " " << path;
    EXPECT_EQ(r.body.find("tollgate_"), std::string::npos) << "metrics leaked on " << path;
  }
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").body, "ok\n");
  // The victim's bucket was never drained through the public port.
  HttpResponse admin = Fetch(s->admin_port, "GET", "/metrics");
  EXPECT_EQ(admin.status, 200);
  EXPECT_NE(admin.body.find("tollgate_"), std::string::npos);

  // Enabled explicitly, they are served by tollgated.
  server::ServerConfig c = GatewayConfig(upstream);
  c.decision_on_main = true;
  c.metrics_on_main = true;
  auto exposed = Start(c, TightPolicy());
  ASSERT_TRUE(exposed);
  int before = upstream.requests();
  HttpResponse d = Fetch(exposed->port, "POST", "/v1/decide", {}, DecideBody("k"));
  EXPECT_EQ(d.status, 200);
  EXPECT_TRUE(json::parse(d.body, nullptr, false).contains("allowed")) << d.body;
  EXPECT_NE(Fetch(exposed->port, "GET", "/metrics").body.find("tollgate_"), std::string::npos);
  EXPECT_EQ(upstream.requests(), before);
}

// Idle sockets filling the public port's cap leave the admin listener alone.
TEST(Listener, IdleSocketsOnTheMainPortDoNotLockOutAdmin) {
  server::ServerConfig c = TestServer::DefaultConfig();
  c.max_connections = 8;
  c.idle_timeout = Scaled(server::Millis(60000));
  auto s = Start(c, TightPolicy());
  ASSERT_TRUE(s);
  std::vector<std::unique_ptr<HttpConnection>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<HttpConnection>(s->port));
    ASSERT_TRUE(idle.back()->connected());
  }
  // The main port is full: a ninth connection is accepted after the eight and closed.
  HttpResponse refused = Fetch(s->port, "GET", "/healthz");
  EXPECT_FALSE(refused.ok) << refused.status;
  // The admin listener still answers its probes and reloads.
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/healthz").status, 200);
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/metrics").status, 200);
  EXPECT_EQ(
      Fetch(s->admin_port, "POST", "/v1/reload", {{"Content-Type", "application/json"}}).status,
      200);
  // A slot freed on main is usable again.
  idle.pop_back();
  EXPECT_TRUE(WaitFor([&] { return Fetch(s->port, "GET", "/healthz").status == 200; }, 10s));
}

TEST(Listener, OneAddressHoldsAtMostMaxConnectionsPerIp) {
  server::ServerConfig c = TestServer::DefaultConfig();
  c.max_connections_per_ip = 3;
  c.admin_max_connections = 2;
  auto s = Start(c, TightPolicy());
  ASSERT_TRUE(s);
  std::vector<std::unique_ptr<HttpConnection>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<HttpConnection>(s->port));
    ASSERT_EQ(held.back()->Request("GET", "/healthz").status, 200);  // accepted and served
  }
  EXPECT_FALSE(Fetch(s->port, "GET", "/healthz").ok);
  // Per listener: the admin listener has its own count (and its own cap of 2).
  HttpConnection admin1(s->admin_port);
  ASSERT_EQ(admin1.Request("GET", "/healthz").status, 200);
  // The second admin slot: free again once the server ended the Fetch's session.
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/healthz").status, 200);
  std::unique_ptr<HttpConnection> admin2;
  ASSERT_TRUE(WaitFor(
      [&] {
        admin2 = std::make_unique<HttpConnection>(s->admin_port);
        return admin2->Request("GET", "/healthz").status == 200;
      },
      10s));
  EXPECT_FALSE(Fetch(s->admin_port, "GET", "/healthz").ok);
}

// A request body that trickles in cannot hold the connection past body_timeout,
// although every single read meets read_timeout.
TEST(Listener, SlowGatewayBodyIsCutAtBodyTimeout) {
  TestUpstream upstream;
  server::ServerConfig c = GatewayConfig(upstream);
  c.read_timeout = server::Millis(3600 * 1000);  // each read may take an hour
  c.body_timeout = server::Millis(300);
  auto s = Start(c, TightPolicy());
  ASSERT_TRUE(s);
  HttpConnection conn(s->port, 2s);
  ASSERT_TRUE(conn.SendRaw(
      "POST /upload HTTP/1.1\r\nHost: t\r\nX-Api-Key: slow\r\nContent-Length: 100000\r\n\r\n"));
  // One byte every 20 ms would take 2000 s; the server must close long before.
  bool closed = false;
  auto give_up = std::chrono::steady_clock::now() + Scaled(30s);
  while (!closed && std::chrono::steady_clock::now() < give_up) {
    closed = !conn.SendRaw("x") || conn.WaitClosed(20ms);
  }
  EXPECT_TRUE(closed) << "a trickling body held the connection";
}

TEST(Listener, MissingOrDuplicateHostIs400) {
  TestUpstream upstream;
  auto s = Start(GatewayConfig(upstream), TightPolicy());
  ASSERT_TRUE(s);
  for (const std::string& head : {std::string("GET /api/x HTTP/1.1\r\n\r\n"),
                                  std::string("GET /api/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
                                  std::string("GET /api/x HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
                                  std::string("GET /api/x HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"),
                                  std::string("GET /api/x HTTP/1.1\r\nHost: a/b@c\r\n\r\n"),
                                  std::string("GET /healthz HTTP/1.1\r\n\r\n")}) {
    HttpConnection conn(s->port);
    ASSERT_TRUE(conn.SendRaw(head));
    HttpResponse r = conn.ReadResponse();
    EXPECT_EQ(r.status, 400) << head;
    EXPECT_EQ(r.Header("content-type"), "application/problem+json");
    EXPECT_TRUE(conn.WaitClosed(5s)) << head;
  }
  EXPECT_EQ(upstream.requests(), 0);
  // HTTP/1.0 may omit Host.
  HttpConnection old(s->port);
  ASSERT_TRUE(old.SendRaw("GET /healthz HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(old.ReadResponse().status, 200);
}

TEST(Listener, RejectedDecideAnswerHasOneContentType) {
  auto s = Start(TestServer::DefaultConfig(), TightPolicy());
  ASSERT_TRUE(s);
  for (int i = 0; i < 4; ++i) {
    std::string raw;  // burst 3: the fourth is rejected
    HttpConnection conn(s->port);
    std::string body = DecideBody("one-content-type");
    ASSERT_TRUE(conn.SendRaw("POST /v1/decide HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body));
    raw = conn.ReadAtLeast(1);
    while (raw.find("\r\n\r\n") == std::string::npos) {
      std::string more = conn.ReadAtLeast(raw.size() + 1);
      if (more.size() == raw.size()) break;
      raw = std::move(more);
    }
    HttpResponse r = conn.ReadResponse();
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(CountFields(raw, "content-type"), 1) << raw;
    if (i == 3) {
      EXPECT_FALSE(json::parse(r.body)["allowed"].get<bool>()) << r.body;
      EXPECT_EQ(r.Header("content-type"), "application/json");
      // The rejection's own Content-Type stays in the JSON, for the 429 it describes.
      EXPECT_EQ(json::parse(r.body)["headers"].value("Content-Type", ""),
                "application/problem+json")
          << r.body;
    }
  }
}

// RFC 9112 9.6: the 413 reaches a client that sends its whole request before
// reading (as most do). Without the lingering close the server's close, with
// the body unread, resets the connection and the client's send fails.
TEST(Listener, TooLargeBodyGets413AfterTheClientSentItAll) {
  server::ServerConfig c = TestServer::DefaultConfig();
  c.max_body_bytes = 1024;
  c.lingering_close = Scaled(server::Millis(20000));
  auto s = Start(c, TightPolicy());
  ASSERT_TRUE(s);
  const size_t body_size = size_t{8} << 20;  // more than the socket buffers hold
  for (std::string path : {"/v1/decide", "/v1/auth"}) {
    HttpConnection conn(s->port, 20s);
    ASSERT_TRUE(conn.SendRaw("POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                             std::to_string(body_size) + "\r\n\r\n" + std::string(body_size, 'x')))
        << path << ": the connection was reset before the client could read the answer";
    HttpResponse r = conn.ReadResponse();
    ASSERT_TRUE(r.ok) << path << ": " << r.error;
    EXPECT_EQ(r.status, 413) << path;
    EXPECT_EQ(json::parse(r.body)["title"], "Content Too Large") << r.body;
    EXPECT_TRUE(conn.WaitClosed(5s));
  }
}

TEST(Listener, AboutBlankProblemTitlesAreTheStatusPhrase) {
  auto s = Start(TestServer::DefaultConfig(), TightPolicy());
  ASSERT_TRUE(s);
  struct Case {
    int port;
    std::string method, path;
    int status;
    std::string title;
  };
  for (const Case& k : {Case{s->port, "GET", "/v1/decide", 405, "Method Not Allowed"},
                        Case{s->port, "GET", "/nope", 404, "Not Found"},
                        Case{s->admin_port, "GET", "/nope", 404, "Not Found"},
                        Case{s->port, "POST", "/v1/decide", 400, "Bad Request"}}) {
    HttpResponse r = Fetch(k.port, k.method, k.path, {}, k.method == "POST" ? "{" : "");
    EXPECT_EQ(r.status, k.status) << k.path;
    json j = json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.value("type", ""), "about:blank") << r.body;
    EXPECT_EQ(j.value("title", ""), k.title) << r.body;
    EXPECT_EQ(j.value("status", 0), k.status) << r.body;
  }
}

}  // namespace
}  // namespace tollgate::testing
