// /v1/auth (nginx auth_request) over real sockets, against what the gateway
// does with the same request (issue 29, finding 6): a repeated limit key
// header is refused, X-Original-URI is brought to the gateway's origin-form
// (the same normalisation and refusals), a path's non-ASCII bytes are
// percent-encoded as the gateway encodes them, and the example policy keys
// IPv6 clients by /64.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "testing/test_paths.h"
#include "tollgate/clock.h"

namespace tollgate::testing {
namespace {

// One bucket of 3 per API key on /api/login, one on the café page; the
// refill (one token per 100 s) never comes during a test.
constexpr char kLoginPolicy[] = R"({"rules": [
  {"name": "login", "match": {"path": {"prefix": "/api/login"}},
   "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 0.01, "burst": 3}},
  {"name": "cafe", "match": {"path": {"prefix": "/caf%C3%A9"}},
   "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 0.01, "burst": 3}}]})";

std::unique_ptr<TestServer> StartServer(const std::string& policy,
                                        server::ServerConfig config = TestServer::DefaultConfig(),
                                        const Clock* clock = &SystemClock::Instance()) {
  std::string error;
  auto t = TestServer::Start(std::move(config), policy, &error, nullptr, clock);
  EXPECT_TRUE(t) << error;
  return t;
}

int AuthStatus(int port, const std::string& uri, const std::string& key) {
  return Fetch(port, "GET", "/v1/auth", {{"X-Original-URI", uri}, {"X-Api-Key", key}}).status;
}

// Before: the first copy was the key, so rotating it gave a fresh bucket per
// request (5/5 allowed instead of 3/5). Now 400, as the gateway answers.
TEST(Auth, ARepeatedKeyHeaderIsRefusedNotKeyedOnItsFirstCopy) {
  auto t = StartServer(TightPolicy());
  ASSERT_TRUE(t);
  for (int i = 0; i < 5; ++i) {
    HttpResponse r = Fetch(t->port, "GET", "/v1/auth",
                           {{"X-Original-URI", "/api/items"},
                            {"X-Api-Key", "rotated-" + std::to_string(i)},
                            {"x-api-key", "victim"}});
    EXPECT_EQ(r.status, 400) << i << " " << r.body;
    EXPECT_NE(r.body.find("x-api-key"), std::string::npos) << r.body;
  }
  // One copy: decided as before.
  EXPECT_EQ(AuthStatus(t->port, "/api/items", "victim"), 204);
}

// A head longer than the session's first read (512 bytes on a fresh
// connection: a long bearer token, any browser's request) arrives in parts.
// The parser takes the request line from the first part, and the framing check
// used to see the rest alone: 400 "no Host field" for every such request, on
// /v1/auth as in the gateway (found by the status page's chromium test). Heads
// of every length around and past the first read are decided, and counted.
TEST(Auth, AHeadLongerThanTheFirstReadIsDecided) {
  auto t = StartServer(kLoginPolicy);
  ASSERT_TRUE(t);
  for (size_t pad : {300, 420, 480, 500, 520, 600, 1500, 6000}) {
    HttpResponse r = Fetch(t->port, "GET", "/v1/auth",
                           {{"X-Original-URI", "/api/login"},
                            {"X-Api-Key", "long-" + std::to_string(pad)},
                            {"Authorization", "Bearer " + std::string(pad, 'j')}});
    EXPECT_EQ(r.status, 204) << pad << " " << r.body;
  }
  const Headers long_head = {{"X-Original-URI", "/api/login"},
                             {"X-Api-Key", "one-client"},
                             {"Authorization", "Bearer " + std::string(1500, 'j')}};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fetch(t->port, "GET", "/v1/auth", long_head).status, 204);
  EXPECT_EQ(Fetch(t->port, "GET", "/v1/auth", long_head).status, 403);  // auth_request's refusal
}

// X-Original-URI, like the gateway's target, is refused when upstreams could
// read it two ways, and otherwise normalised: before, "/api%2Flogin" met no
// rule (204 x4) while "/api/login" was limited.
TEST(Auth, OriginalUriIsNormalisedAndRefusedAsTheGatewayDoes) {
  auto t = StartServer(kLoginPolicy);
  ASSERT_TRUE(t);
  for (const std::string uri :
       {"/api%2Flogin", "/api%2flogin", "/api%5Clogin", "/api\\login", "/api/login;x=1",
        "/api/login%00", "/api/login#x", "http://evil.example/api/login", "/api/ login",
        "/api/\tlogin", "*", ""}) {
    HttpResponse r =
        Fetch(t->port, "GET", "/v1/auth", {{"X-Original-URI", uri}, {"X-Api-Key", "k"}});
    EXPECT_EQ(r.status, 400) << "'" << uri << "' " << r.body;
    EXPECT_NE(r.body.find("X-Original-URI"), std::string::npos) << r.body;
  }
  // Every other spelling of /api/login meets its rule and its bucket.
  std::vector<int> statuses;
  for (const std::string uri : {"/x/../%61pi/login", "//api/./login?y=%2F", "/api/login"}) {
    statuses.push_back(AuthStatus(t->port, uri, "k"));
  }
  statuses.push_back(AuthStatus(t->port, "/api/login", "k"));
  EXPECT_EQ(statuses, (std::vector<int>{204, 204, 204, 403}));
  // The original URI is named once, like Host.
  HttpResponse twice =
      Fetch(t->port, "GET", "/v1/auth",
            {{"X-Original-URI", "/"}, {"X-Original-URI", "/api/login"}, {"X-Api-Key", "k2"}});
  EXPECT_EQ(twice.status, 400) << twice.body;
}

// A raw UTF-8 path and its percent-encoded spelling are one path, on
// /v1/auth as through the gateway (which forwards the encoded one): before,
// the raw bytes met no rule written for the encoded path.
TEST(Auth, NonAsciiPathBytesArePercentEncodedAsTheGatewayEncodesThem) {
  auto t = StartServer(kLoginPolicy);
  ASSERT_TRUE(t);
  std::vector<int> statuses;
  for (const std::string uri :
       {"/caf\xC3\xA9", "/caf%c3%a9/menu", "/caf\xC3\xA9/x", "/caf\xC3\xA9"}) {
    statuses.push_back(AuthStatus(t->port, uri, "k"));
  }
  EXPECT_EQ(statuses, (std::vector<int>{204, 204, 204, 403}));

  TestUpstream upstream;
  server::ServerConfig cfg = TestServer::DefaultConfig();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto gateway = StartServer(kLoginPolicy, cfg);
  ASSERT_TRUE(gateway);
  HttpConnection c(gateway->port);
  ASSERT_TRUE(c.SendRaw("GET /caf\xC3\xA9/menu?q=\xC3\xA9 HTTP/1.1\r\nHost: test\r\n\r\n"));
  HttpResponse r = c.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["target"], "/caf%C3%A9/menu?q=\xC3\xA9");
}

// The example policy keys clients by IPv6 /64 (one client usually holds a
// whole /64: per /128 it had 2^64 buckets), IPv4 by address. Clients are told
// apart by X-Forwarded-For from a trusted proxy, as behind nginx; the clock
// stands still, so no token comes back during the test.
TEST(Auth, TheExamplePolicyKeysIpv6ClientsByTheirSlash64) {
  std::ifstream in(tollgate::testing::SourcePathOf("examples/policy.json"));
  ASSERT_TRUE(in) << "examples/policy.json";
  const std::string policy((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  server::ServerConfig cfg = TestServer::DefaultConfig();
  cfg.trusted_proxies = {"127.0.0.1"};
  ManualClock clock;
  auto t = StartServer(policy, cfg, &clock);
  ASSERT_TRUE(t);
  const auto from = [&](const std::string& client) {
    return Fetch(t->port, "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Forwarded-For", client}})
        .status;
  };
  for (int i = 0; i < 10; ++i) ASSERT_EQ(from("2001:db8:1:2::a"), 204) << i;  // burst 10
  EXPECT_EQ(from("2001:db8:1:2:ffff:ffff:ffff:ffff"), 403);  // same /64: same bucket
  EXPECT_EQ(from("2001:db8:1:3::a"), 204);                   // another /64
  for (int i = 0; i < 10; ++i) ASSERT_EQ(from("198.51.100.7"), 204) << i;
  EXPECT_EQ(from("198.51.100.7"), 403);
  EXPECT_EQ(from("198.51.100.8"), 204);  // IPv4: one bucket per address, as before
}

}  // namespace
}  // namespace tollgate::testing
