// The gateway's invariant (issue 14), tested against an independent parser:
// every request tollgated forwards arrives at the upstream as exactly one
// message, with the framing and the path tollgated decided on; every request
// it cannot frame unambiguously is refused (4xx, connection closed) and
// reaches the upstream not at all.
//
// The upstream is Python's h11 (tests/testing/h11_upstream.h), which shares no
// code with Beast. Each vector is sent over a raw socket to a real tollgated
// (in process, gateway mode, base path /app, no pooled upstream connections so
// that the upstream's connection log says when a vector is over). The
// upstream's log must then hold exactly the expected messages (method, target,
// body) and no protocol error; the client must have received one 200 per
// forwarded message, so no message reached the upstream without a decision.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server_fixture.h"
#include "test_http.h"
#include "testing/h11_upstream.h"

namespace tollgate::testing {
namespace {

struct Forwarded {
  std::string method;
  std::string target;  // as the upstream receives it (with the base path /app)
  std::string body;
};

struct Vector {
  std::string name;
  std::string bytes;                 // sent as is, in one write
  std::vector<Forwarded> forwarded;  // empty: must be refused with a 4xx and a close
  int refused_status = 400;
};

const std::string kHost = "Host: h\r\n";

std::string Post(const std::string& fields, const std::string& body,
                 const std::string& target = "/v") {
  return "POST " + target + " HTTP/1.1\r\n" + kHost + fields + "\r\n" + body;
}

std::vector<Vector> Vectors() {
  const std::string hello_chunked = "5\r\nhello\r\n0\r\n\r\n";
  const std::string smuggled = "GET /api/login HTTP/1.1\r\nHost: a\r\n\r\n";
  std::vector<Vector> v = {
      // --- Forwarded: one message each, framed as tollgated read it ---
      {"plain GET", "GET /v HTTP/1.1\r\n" + kHost + "\r\n", {{"GET", "/app/v", ""}}},
      {"Content-Length body",
       Post("Content-Length: 5\r\n", "hello"),
       {{"POST", "/app/v", "hello"}}},
      {"chunked body",
       Post("Transfer-Encoding: chunked\r\n", hello_chunked),
       {{"POST", "/app/v", "hello"}}},
      // The last chunk alone: relayed as one empty body, not an empty chunk and a stray last
      // chunk (found by fuzz_chunked_relay).
      {"chunked, empty body",
       Post("Transfer-Encoding: chunked\r\n", "0\r\n\r\n"),
       {{"POST", "/app/v", ""}}},
      {"chunked, empty body with an extension and a trailer",
       Post("Transfer-Encoding: chunked\r\nTrailer: x-sum\r\n", "0;name=value\r\nX-Sum: 1\r\n\r\n"),
       {{"POST", "/app/v", ""}}},
      {"chunked, any case",
       Post("transfer-encoding: ChUnKeD\r\n", hello_chunked),
       {{"POST", "/app/v", "hello"}}},
      {"chunked after a tab (OWS)",
       Post("Transfer-Encoding:\tchunked\r\n", hello_chunked),
       {{"POST", "/app/v", "hello"}}},
      {"chunk extensions dropped",
       Post("Transfer-Encoding: chunked\r\n", "5;name=\"v;x\";n2\r\nhello\r\n0;last\r\n\r\n"),
       {{"POST", "/app/v", "hello"}}},
      {"trailers dropped",
       Post("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\nX-T: 1\r\nX-U: 2\r\n\r\n"),
       {{"POST", "/app/v", "hello"}}},
      {"upper-case hex chunk size",
       Post("Transfer-Encoding: chunked\r\n", "A\r\n0123456789\r\n0\r\n\r\n"),
       {{"POST", "/app/v", "0123456789"}}},
      {"Connection: Content-Length (issue repro)",
       Post("Content-Length: 36\r\nConnection: Content-Length\r\n", smuggled, "/public"),
       {{"POST", "/app/public", smuggled}}},
      {"Connection: Transfer-Encoding",
       Post("Transfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n",
            "24\r\n" + smuggled + "\r\n0\r\n\r\n"),
       {{"POST", "/app/v", smuggled}}},
      {"Connection: Host, Content-Length, X-Forwarded-For",
       Post(
           "Content-Length: 5\r\nConnection: keep-alive, Host, Content-Length, X-Forwarded-For\r\n",
           "hello"),
       {{"POST", "/app/v", "hello"}}},
      {"Transfer_Encoding is another field",
       Post("Transfer_Encoding: chunked\r\nContent-Length: 5\r\n", "hello"),
       {{"POST", "/app/v", "hello"}}},
      {"pipelined pair: two decisions, two messages",
       "GET /p1 HTTP/1.1\r\n" + kHost + "\r\nGET /p2 HTTP/1.1\r\n" + kHost + "\r\n",
       {{"GET", "/app/p1", ""}, {"GET", "/app/p2", ""}}},
      {"Content-Length: 0 then a pipelined request",
       Post("Content-Length: 0\r\n", "GET /p2 HTTP/1.1\r\n" + kHost + "\r\n"),
       {{"POST", "/app/v", ""}, {"GET", "/app/p2", ""}}},
      {"Expect: 100-continue",
       Post("Expect: 100-continue\r\nContent-Length: 5\r\n", "hello"),
       {{"POST", "/app/v", "hello"}}},
      {"HTTP/1.0 without Host", "GET /old HTTP/1.0\r\n\r\n", {{"GET", "/app/old", ""}}},
      {"absolute-form",
       "GET http://h/api/login HTTP/1.1\r\n" + kHost + "\r\n",
       {{"GET", "/app/api/login", ""}}},
      {"absolute-form, dot segments and query",
       "GET HTTP://H/a/../api/login?x=1 HTTP/1.1\r\n" + kHost + "\r\n",
       {{"GET", "/app/api/login?x=1", ""}}},
      {"OPTIONS *", "OPTIONS * HTTP/1.1\r\n" + kHost + "\r\n", {{"OPTIONS", "*", ""}}},
      {"base path escape /../admin",
       "GET /../admin HTTP/1.1\r\n" + kHost + "\r\n",
       {{"GET", "/app/admin", ""}}},
      {"encoded dots %2e%2e",
       "GET /x/%2e%2E/%2e%2e/admin HTTP/1.1\r\n" + kHost + "\r\n",
       {{"GET", "/app/admin", ""}}},
      {"encoded unreserved and repeated slashes",
       "GET //%61pi//login HTTP/1.1\r\n" + kHost + "\r\n",
       {{"GET", "/app/api/login", ""}}},
      {"%2F in the query stays",
       "GET /q?next=%2Fadmin;x HTTP/1.1\r\n" + kHost + "\r\n",
       {{"GET", "/app/q?next=%2Fadmin;x", ""}}},

      // --- Refused: 400 and a close, nothing upstream ---
      {"CL.TE", Post("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\nG"), {}},
      {"TE.CL",
       Post("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", "8\r\nSMUGGLED\r\n0\r\n\r\n"),
       {}},
      {"TE.TE: two Transfer-Encoding fields",
       Post("Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", hello_chunked),
       {}},
      {"TE: gzip, chunked", Post("Transfer-Encoding: gzip, chunked\r\n", hello_chunked), {}},
      {"TE: chunked, gzip (chunked not last)",
       Post("Transfer-Encoding: chunked, gzip\r\nContent-Length: 5\r\n", "hello"),
       {}},
      {"TE: chunked, chunked", Post("Transfer-Encoding: chunked, chunked\r\n", hello_chunked), {}},
      {"TE: xchunked", Post("Transfer-Encoding: xchunked\r\n", hello_chunked), {}},
      {"TE: \"chunked\"", Post("Transfer-Encoding: \"chunked\"\r\n", hello_chunked), {}},
      {"TE: chunked with a trailing comma",
       Post("Transfer-Encoding: chunked,\r\n", hello_chunked),
       {}},
      {"TE: identity alone", Post("Transfer-Encoding: identity\r\n", "hello"), {}},
      {"TE with space before the colon",
       Post("Transfer-Encoding : chunked\r\n", hello_chunked),
       {}},
      {"TE with a vertical tab",
       Post("Transfer-Encoding: \x0b"
            "chunked\r\n",
            hello_chunked),
       {}},
      {"TE obs-fold", Post("Transfer-Encoding: gzip\r\n chunked\r\n", hello_chunked), {}},
      {"obs-fold in another field", Post("X-A: a\r\n\tb\r\nContent-Length: 5\r\n", "hello"), {}},
      {"TE in HTTP/1.0",
       "POST /v HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" + hello_chunked,
       {}},
      {"Content-Length: 5, 5", Post("Content-Length: 5, 5\r\n", "hello"), {}},
      {"Content-Length twice, same value",
       Post("Content-Length: 5\r\nContent-Length: 5\r\n", "hello"),
       {}},
      {"Content-Length twice, different values",
       Post("Content-Length: 5\r\nContent-Length: 41\r\n", "hello"),
       {}},
      {"Content-Length: +5", Post("Content-Length: +5\r\n", "hello"), {}},
      {"Content-Length: -1", Post("Content-Length: -1\r\n", "hello"), {}},
      {"Content-Length overflow", Post("Content-Length: 18446744073709551621\r\n", "hello"), {}},
      {"bare LF in the header", "GET /v HTTP/1.1\r\nHost: h\nX-A: 1\r\n\r\n", {}},
      {"bare CR in a value", "GET /v HTTP/1.1\r\nHost: h\r\nX-A: 1\r2\r\n\r\n", {}},
      {"NUL in a value",
       "GET /v HTTP/1.1\r\nHost: h\r\nX-A: 1" + std::string(1, '\0') + "2\r\n\r\n",
       {}},
      {"Content-Length in the trailer",
       Post("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\nContent-Length: 99\r\n\r\n"),
       {}},
      {"chunk-size overflow",
       Post("Transfer-Encoding: chunked\r\n", "10000000000000005\r\nhello\r\n0\r\n\r\n"),
       {}},
      {"chunk-size 0x prefix",
       Post("Transfer-Encoding: chunked\r\n", "0x5\r\nhello\r\n0\r\n\r\n"),
       {}},
      {"chunk-size with a sign",
       Post("Transfer-Encoding: chunked\r\n", "+5\r\nhello\r\n0\r\n\r\n"),
       {}},
      {"chunk extension with a bare LF",
       Post("Transfer-Encoding: chunked\r\n", "5;a\nb\r\nhello\r\n0\r\n\r\n"),
       {}},
      {"no Host in HTTP/1.1", "GET /v HTTP/1.1\r\n\r\n", {}},
      {"two Host fields", "GET /v HTTP/1.1\r\nHost: h\r\nHost: evil\r\n\r\n", {}},
      {"absolute-form, authority is not Host",
       "GET http://other/api/login HTTP/1.1\r\n" + kHost + "\r\n",
       {}},
      {"absolute-form with userinfo", "GET http://u@h/api/login HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"authority-form CONNECT", "CONNECT h:443 HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"authority-form GET", "GET h:80 HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"asterisk-form GET", "GET * HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"encoded slash %2F", "GET /api%2Flogin HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"encoded backslash %5c", "GET /api%5clogin HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"backslash", "GET /api\\login HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"path parameter ;", "GET /api/login;jsessionid=1 HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"encoded NUL", "GET /api/login%00.json HTTP/1.1\r\n" + kHost + "\r\n", {}},
      {"duplicate key header",
       "GET /v HTTP/1.1\r\n" + kHost + "X-Api-Key: a\r\nx-api-key: b\r\n\r\n",
       {}},
  };
  return v;
}

class GatewaySmuggling : public ::testing::Test {
 protected:
  void SetUp() override {
    auto up = H11Upstream::Start();
    if (up.missing) GTEST_SKIP() << up.error;
    ASSERT_TRUE(up) << up.error;
    upstream_ = std::move(up.server);
    server::ServerConfig cfg = TestServer::DefaultConfig();
    cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream_->port()) + "/app";
    cfg.upstream_max_idle = 0;  // every exchange closes its upstream connection: Quiet() = done
    std::string error;
    // Keyed on a header (a duplicate refuses the request) and generous.
    server_ = TestServer::Start(cfg, R"({"rules": [
      {"name": "keyed", "limit_keys": ["header:x-api-key"], "missing_key": "shared",
       "algorithm": "token_bucket", "algorithm_config": {"rps": 1000000, "burst": 1000000}}]})",
                                &error);
    ASSERT_TRUE(server_) << error;
  }

  // Sends `v` and checks the invariant; returns the upstream events it caused.
  void Run(const Vector& v) {
    SCOPED_TRACE(v.name);
    const size_t before = upstream_->Events().size();
    HttpConnection c(server_->port);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.SendRaw(v.bytes));
    if (v.forwarded.empty()) {
      HttpResponse r = c.ReadResponse();
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.status, v.refused_status) << r.body;
      EXPECT_EQ(r.Header("connection"), "close");
      EXPECT_TRUE(c.WaitClosed(std::chrono::seconds(5)));
    } else {
      for (size_t i = 0; i < v.forwarded.size(); ++i) {
        HttpResponse r = c.ReadResponse();
        ASSERT_TRUE(r.ok) << r.error;
        EXPECT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.body, "ok");
      }
    }
    c.Close();
    ASSERT_TRUE(WaitFor([&] { return upstream_->Quiet(); }, std::chrono::seconds(10)))
        << "the upstream still has a connection open";
    std::vector<H11Upstream::Event> events = upstream_->Events();
    std::vector<H11Upstream::Event> messages;
    for (size_t i = before; i < events.size(); ++i) {
      EXPECT_NE(events[i].kind, "error") << events[i].detail;
      if (events[i].kind == "message") messages.push_back(events[i]);
    }
    ASSERT_EQ(messages.size(), v.forwarded.size());
    for (size_t i = 0; i < messages.size(); ++i) {
      EXPECT_EQ(messages[i].method, v.forwarded[i].method);
      EXPECT_EQ(messages[i].target, v.forwarded[i].target);
      EXPECT_EQ(messages[i].body, v.forwarded[i].body);
      // One framing field at most, as tollgated re-derived it.
      EXPECT_LE(messages[i].Values("content-length").size() +
                    messages[i].Values("transfer-encoding").size(),
                1u);
      EXPECT_EQ(messages[i].Values("host").size(), 1u);
    }
  }

  std::unique_ptr<H11Upstream> upstream_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(GatewaySmuggling, EveryVectorIsRefusedOrForwardedAsExactlyOneMessage) {
  const std::vector<Vector> vectors = Vectors();
  EXPECT_GE(vectors.size(), 40u);
  for (const Vector& v : vectors) Run(v);
}

// The response direction: an upstream response whose framing is ambiguous is
// never relayed (502 and a close); one whose Connection names its own framing
// keeps it, and bytes after the response never reach the client.
TEST_F(GatewaySmuggling, UpstreamResponsesAreRelayedWithTheFramingTollgatedRead) {
  for (const char* name : {"te-cl", "cl-list", "cl-twice", "obs-fold", "te-gzip"}) {
    SCOPED_TRACE(name);
    HttpConnection c(server_->port);
    HttpResponse r = c.Request("GET", std::string("/resp/") + name);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 502) << r.body;
    EXPECT_TRUE(c.WaitClosed(std::chrono::seconds(5)));
  }
  for (const char* name : {"conn-cl", "conn-te"}) {
    SCOPED_TRACE(name);
    HttpConnection c(server_->port);
    HttpResponse r = c.Request("GET", std::string("/resp/") + name);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "ok");
    EXPECT_TRUE(r.keep_alive);
    // The next response on this connection is the next request's, not the
    // bytes the upstream sent after its first response ("smuggled!").
    r = c.Request("GET", "/after");
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.body, "ok");
  }
  // HTTP/1.0 clients never get chunked: a chunked upstream body is sent as is
  // and ends with the connection.
  HttpConnection c(server_->port);
  ASSERT_TRUE(c.SendRaw("GET /resp/conn-te HTTP/1.0\r\n\r\n"));
  const std::string raw = c.ReadAtLeast(1 << 20);  // stops at EOF
  EXPECT_EQ(raw.find("Transfer-Encoding"), std::string::npos) << raw;
  EXPECT_EQ(raw.substr(raw.size() - 4), "\r\nok") << raw;
}

// An upstream that streams an endless chunk-extension line or trailer section
// fills the bounded buffer the response is parsed from: tollgated closes the
// upstream connection (and the client's) long before the 256 MiB the upstream
// would send, instead of buffering it all.
TEST_F(GatewaySmuggling, AnEndlessUpstreamChunkExtensionOrTrailerIsCutNotBuffered) {
  for (const char* name : {"endless-ext", "endless-trailer"}) {
    SCOPED_TRACE(name);
    HttpConnection c(server_->port);
    ASSERT_TRUE(c.SendRaw(std::string("GET /resp/") + name + " HTTP/1.1\r\nHost: a\r\n\r\n"));
    EXPECT_TRUE(c.WaitClosed(Scaled(std::chrono::seconds(60))));
    std::vector<H11Upstream::Event> ended;
    ASSERT_TRUE(WaitFor(
        [&] {
          ended.clear();
          for (const auto& e : upstream_->Events()) {
            if (e.kind == "endless" && e.target == name) ended.push_back(e);
          }
          return !ended.empty();
        },
        Scaled(std::chrono::seconds(60))));
    EXPECT_EQ(ended.back().detail, "cut");
  }
}

}  // namespace
}  // namespace tollgate::testing
