// End-to-end tests of tollgated over real sockets, run once per store
// (local, and Redis when the Redis store is part of the build).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "tollgate/identity_redactor.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#endif

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class ServerE2E : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "redis") {
#if TOLLGATE_TEST_REDIS
      redis_ = RedisServer::Start();
      if (redis_.missing) GTEST_SKIP() << redis_.error;
      ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
      store_ = redis_->url();
#else
      GTEST_SKIP() << "the Redis store is not part of this build";
#endif
    }
  }

  server::ServerConfig Config() {
    server::ServerConfig c = TestServer::DefaultConfig();
    c.store = store_;
    return c;
  }

  std::unique_ptr<TestServer> Start(server::ServerConfig c, const std::string& policy,
                                    std::shared_ptr<server::Logger> log = nullptr) {
    std::string error;
    auto s = TestServer::Start(std::move(c), policy, &error, std::move(log));
    EXPECT_TRUE(s != nullptr) << error;
    return s;
  }
  std::unique_ptr<TestServer> Start() { return Start(Config(), TightPolicy()); }

  std::string store_ = "local";
#if TOLLGATE_TEST_REDIS
  RedisServer::StartResult redis_;
#endif
};

// A key unique to each test, so buckets never leak between tests (Redis persists across them).
std::string Key(const std::string& suffix = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->name()) + "-" + std::to_string(::getpid()) + suffix;
}

std::string ReadFileForDebug(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A logger writing JSON lines to `path` (tests read the file), or null.
std::shared_ptr<server::Logger> FileLogger(const std::string& path) {
  auto log = server::Logger::Create(server::LogLevel::kInfo, path);
  if (!log.ok()) return nullptr;
  return std::move(log).value();
}

Headers AuthHeaders(const std::string& key, const std::string& uri = "/api/items") {
  return {{"X-Original-URI", uri}, {"X-Original-Method", "GET"}, {"X-Api-Key", key}};
}

TEST_P(ServerE2E, HealthReadyAndMetricsOnBothListeners) {
  auto s = Start();
  ASSERT_TRUE(s);
  for (int port : {s->port, s->admin_port}) {
    auto h = Fetch(port, "GET", "/healthz");
    ASSERT_TRUE(h.ok) << h.error;
    EXPECT_EQ(h.status, 200);
    auto r = Fetch(port, "GET", "/readyz");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(json::parse(r.body)["ready"].get<bool>());
    auto m = Fetch(port, "GET", "/metrics");
    EXPECT_EQ(m.status, 200);
    EXPECT_NE(m.Header("content-type").find("version=0.0.4"), std::string::npos);
    EXPECT_NE(m.body.find("# TYPE tollgate_decisions_total counter"), std::string::npos);
    EXPECT_EQ(m.body.back(), '\n');
  }
  EXPECT_EQ(Fetch(s->port, "POST", "/healthz").status, 405);
  EXPECT_EQ(Fetch(s->port, "GET", "/nope").status, 404);
}

TEST_P(ServerE2E, AuthAllowsWithHeadersThenRejectsWithMarker) {
  auto s = Start();
  ASSERT_TRUE(s);
  std::string key = Key();
  for (int i = 0; i < 3; ++i) {
    auto r = Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 204) << i;
    EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=" + std::to_string(2 - i)), std::string::npos)
        << r.Header("ratelimit");
    EXPECT_NE(r.Header("ratelimit-policy").find("\"keyed\";q=3"), std::string::npos);
    EXPECT_FALSE(r.Has("x-ratelimit-decision"));
  }
  auto r = Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.Header("x-ratelimit-decision"), "reject");
  EXPECT_GE(std::atoi(r.Header("retry-after").c_str()), 1);
  EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=0"), std::string::npos);
  // Another key is independent.
  EXPECT_EQ(Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key + "-other")).status, 204);
}

TEST_P(ServerE2E, DecideWithRequestDescriptionAndItems) {
  auto s = Start();
  ASSERT_TRUE(s);
  std::string key = Key();
  json body = {
      {"request", {{"method", "GET"}, {"path", "/api/items"}, {"headers", {{"x-api-key", key}}}}}};
  auto r =
      Fetch(s->port, "POST", "/v1/decide", {{"Content-Type", "application/json"}}, body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_TRUE(j["allowed"].get<bool>());
  EXPECT_EQ(j["status"], 200);
  ASSERT_FALSE(j["rules"].empty());
  EXPECT_EQ(j["rules"][0]["rule"], "keyed");
  EXPECT_EQ(j["rules"][0]["key"], key);
  EXPECT_EQ(j["rules"][0]["remaining"], 2);
  EXPECT_TRUE(j["headers"].contains("RateLimit"));
  EXPECT_NE(r.Header("ratelimit").find("\"keyed\""), std::string::npos);

  // Explicit items share the bucket: cost 2 leaves 0, then 1 more is rejected.
  json items = {{"items", {{{"rule", "keyed"}, {"key", key}, {"cost", 2}}}}};
  r = Fetch(s->port, "POST", "/v1/decide", {}, items.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(json::parse(r.body)["allowed"].get<bool>());
  items = {{"items", {{{"rule", "keyed"}, {"key", key}}}}};
  r = Fetch(s->port, "POST", "/v1/decide", {}, items.dump());
  j = json::parse(r.body);
  EXPECT_FALSE(j["allowed"].get<bool>());
  EXPECT_EQ(j["status"], 429);
  EXPECT_EQ(j["denied_rule"], "keyed");
  EXPECT_GE(j["retry_after_seconds"].get<int>(), 1);
  EXPECT_TRUE(j.contains("problem"));
}

TEST_P(ServerE2E, DecideRejectsBadInputWithProblemDetails) {
  auto s = Start();
  ASSERT_TRUE(s);
  struct Case {
    std::string body;
    std::string expect_path;
  } cases[] = {
      {"{not json", ""},
      {"[]", ""},
      {R"({"request": {"path": "/x"}, "items": []})", ""},
      {R"({"request": {"path": 5}})", "request.path"},
      {R"({"request": {"path": "/x", "headers": {"a": 1}}})", "request.headers.a"},
      {R"({"items": [{"rule": "keyed"}]})", "items[0].key"},
      {R"({"items": [{"key": "k", "cost": -1}]})", "items[0].cost"},
      {R"({"request": {"path": "/x", "bogus": 1}})", "request.bogus"},
  };
  for (const auto& c : cases) {
    auto r = Fetch(s->port, "POST", "/v1/decide", {}, c.body);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(r.Header("content-type"), "application/problem+json");
    json j = json::parse(r.body);
    EXPECT_EQ(j["status"], 400);
    if (!c.expect_path.empty()) {
      EXPECT_EQ(j["errors"][0]["path"], c.expect_path) << r.body;
    }
  }
  // An unknown rule is the policy layer's error, still a 400.
  auto r = Fetch(s->port, "POST", "/v1/decide", {}, R"({"items": [{"rule": "nope", "key": "k"}]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Fetch(s->port, "GET", "/v1/decide").status, 405);
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").status, 200);
}

// "values" names a bucket of a rule with several limit_keys as a request
// fills it: a described request and an item with its values share the
// bucket (a '|' in a value included), on every store; a bare "key" for such a
// rule, or a wrong count of values, is a 400 naming the field.
TEST_P(ServerE2E, DecideItemsNameAMultiKeyBucketByItsValues) {
  auto s = Start(Config(), R"({"rules": [
    {"name": "pair", "limit_keys": ["header:x-api-key", "header:x-region", "const:v1"],
     "algorithm_config": {"rps": 0.001, "burst": 3}}]})");
  ASSERT_TRUE(s);
  const std::string key = Key("|a");
  json body = {
      {"request", {{"path", "/x"}, {"headers", {{"x-api-key", key}, {"x-region", "eu west"}}}}}};
  auto r = Fetch(s->port, "POST", "/v1/decide", {}, body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json request = json::parse(r.body);
  ASSERT_EQ(request["rules"][0]["remaining"], 2) << r.body;

  json items = {{"items", {{{"rule", "pair"}, {"values", {key, "eu west", nullptr}}}}}};
  r = Fetch(s->port, "POST", "/v1/decide", {}, items.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["rules"][0]["remaining"], 1) << r.body;
  EXPECT_EQ(j["rules"][0]["key"], request["rules"][0]["key"]);
  // Another region is another bucket.
  items = {{"items", {{{"rule", "pair"}, {"values", {key, "us", "v1"}}}}}};
  r = Fetch(s->port, "POST", "/v1/decide", {}, items.dump());
  EXPECT_EQ(json::parse(r.body)["rules"][0]["remaining"], 2) << r.body;

  struct Case {
    json item;
    std::string path, message;
  } cases[] = {
      {{{"rule", "pair"}, {"key", key}}, "items[0].key", "name them with values"},
      {{{"rule", "pair"}, {"values", {key}}}, "items[0].values", "keys on 3 value(s), got 1"},
      {{{"rule", "pair"}, {"values", {key, "eu", "v2"}}},
       "items[0].values[2]",
       "const:v1 is always 'v1'"},
      {{{"rule", "pair"}, {"values", {key, 7, nullptr}}}, "items[0].values[1]", "string or null"},
      {{{"rule", "pair"}, {"values", json::array()}}, "items[0].values", "array of 1 to"},
      {{{"rule", "pair"}, {"values", json(std::vector<std::string>(33, "v"))}},
       "items[0].values",
       "array of 1 to 32"},
      {{{"rule", "pair"}, {"values", {std::string(4097, 'x'), "eu", nullptr}}},
       "items[0].values[0]",
       "longer than 4096 bytes"},
      {{{"rule", "pair"}, {"values", {key, {{"nested", true}}, nullptr}}},
       "items[0].values[1]",
       "string or null"},
      {{{"values", {key, "eu", nullptr}}}, "items[0].values", "needs \"rule\""},
      {{{"rule", "pair"}, {"key", key}, {"values", {key, "eu", nullptr}}},
       "items[0].key",
       "exactly one of"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.item.dump());
    r = Fetch(s->port, "POST", "/v1/decide", {}, json{{"items", {c.item}}}.dump());
    ASSERT_EQ(r.status, 400) << r.body;
    j = json::parse(r.body);
    ASSERT_TRUE(j["errors"].is_array()) << r.body;
    EXPECT_EQ(j["errors"][0]["path"], c.path) << r.body;
    EXPECT_NE(j["errors"][0]["message"].get<std::string>().find(c.message), std::string::npos)
        << r.body;
  }
  // The refused bodies charged nothing.
  r = Fetch(s->port, "POST", "/v1/decide", {}, body.dump());
  EXPECT_EQ(json::parse(r.body)["rules"][0]["remaining"], 0) << r.body;
}

TEST_P(ServerE2E, EveryHeaderStyle) {
  struct Style {
    std::string name;
    std::vector<std::string> present;
    std::vector<std::string> absent;
  } styles[] = {
      {"draft11", {"ratelimit", "ratelimit-policy"}, {"x-ratelimit-limit", "ratelimit-limit"}},
      {"draft03", {"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"}, {"ratelimit"}},
      {"x-ratelimit",
       {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"},
       {"ratelimit"}},
      {"x-ratelimit-epoch", {"x-ratelimit-limit", "x-ratelimit-reset"}, {"ratelimit"}},
      {"none", {}, {"ratelimit", "x-ratelimit-limit", "ratelimit-limit"}},
  };
  for (const auto& style : styles) {
    SCOPED_TRACE(style.name);
    server::ServerConfig c = Config();
    std::string why;
    ASSERT_TRUE(ParseHeaderStyles(style.name, &c.header_styles, &why)) << why;
    auto s = Start(c, TightPolicy());
    ASSERT_TRUE(s);
    std::string key = Key(style.name);
    auto r = Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
    EXPECT_EQ(r.status, 204);
    for (const auto& h : style.present) EXPECT_TRUE(r.Has(h)) << h;
    for (const auto& h : style.absent) EXPECT_FALSE(r.Has(h)) << h;
    if (style.name == "x-ratelimit-epoch") {
      long long reset = std::atoll(r.Header("x-ratelimit-reset").c_str());
      EXPECT_GT(reset, 1'600'000'000LL);  // epoch seconds, not a delta
    }
    for (int i = 0; i < 3; ++i) Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
    r = Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
    EXPECT_EQ(r.status, 403);
    EXPECT_TRUE(r.Has("retry-after"));  // on every style, none included
  }
}

TEST_P(ServerE2E, KeepAliveServesManyRequestsOnOneConnection) {
  auto s = Start();
  ASSERT_TRUE(s);
  HttpConnection c(s->port);
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 50; ++i) {
    auto r = c.Request("GET", "/healthz");
    ASSERT_TRUE(r.ok) << i << " " << r.error;
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.keep_alive);
  }
  // Connection: close is honoured.
  auto r = c.Request("GET", "/healthz", {{"Connection", "close"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(c.WaitClosed(2s));
}

TEST_P(ServerE2E, MalformedAndOversizedRequestsGetErrorsAndServerStaysUp) {
  server::ServerConfig cfg = Config();
  cfg.max_header_bytes = 4096;
  cfg.max_body_bytes = 1024;
  auto s = Start(cfg, TightPolicy());
  ASSERT_TRUE(s);
  {
    HttpConnection c(s->port);
    ASSERT_TRUE(c.SendRaw("THIS IS NOT HTTP\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 400);
    EXPECT_TRUE(c.WaitClosed(2s));
  }
  {
    HttpConnection c(s->port);
    ASSERT_TRUE(c.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(8000, 'a') +
                          "\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 431);
  }
  {
    auto r = Fetch(s->port, "POST", "/v1/decide", {}, std::string(5000, '{'));
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 413);
  }
  {
    // Expect: 100-continue with a too-large declared body: 413 without reading it.
    HttpConnection c(s->port);
    ASSERT_TRUE(
        c.SendRaw("POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n"
                  "Expect: 100-continue\r\n\r\n"));
    auto r = c.ReadResponse();
    EXPECT_EQ(r.status, 413);
  }
  {
    HttpConnection c(s->port);
    ASSERT_TRUE(c.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"));
    auto r = c.ReadResponse();
    EXPECT_EQ(r.status, 400);
  }
  {
    HttpConnection c(s->port);
    ASSERT_TRUE(
        c.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "zz\r\n"));
    auto r = c.ReadResponse();
    EXPECT_EQ(r.status, 400);
  }
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").status, 200);
}

TEST_P(ServerE2E, RedisCallsAreCountedInMetrics) {
  if (GetParam() != "redis") GTEST_SKIP() << "Redis counters only exist on the Redis store";
  auto s = Start();
  ASSERT_TRUE(s);
  const std::string key = Key();
  for (int i = 0; i < 4; ++i) Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
  const std::string m = Fetch(s->admin_port, "GET", "/metrics").body;
  const std::string name = "\ntollgate_redis_script_calls_total ";
  const size_t at = m.find(name);
  ASSERT_NE(at, std::string::npos) << m;
  EXPECT_GE(std::stoll(m.substr(at + name.size())), 1) << m.substr(at, 60);
  EXPECT_NE(m.find("# TYPE tollgate_redis_errors_total counter"), std::string::npos) << m;
  EXPECT_NE(m.find("tollgate_redis_errors_total{kind=\"timeout\"} 0"), std::string::npos) << m;
}

TEST_P(ServerE2E, SlowAndIdleClientsTimeOut) {
  server::ServerConfig cfg = Config();
  cfg.read_timeout = server::Millis(200);
  cfg.idle_timeout = server::Millis(300);
  auto s = Start(cfg, TightPolicy());
  ASSERT_TRUE(s);
  HttpConnection slow(s->port);
  ASSERT_TRUE(slow.SendRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n"));  // never finished
  HttpConnection idle(s->port);
  auto r = idle.Request("GET", "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(slow.WaitClosed(3s));
  EXPECT_TRUE(idle.WaitClosed(3s));
  EXPECT_TRUE(WaitFor([&] {
    auto m = Fetch(s->port, "GET", "/metrics");
    return m.body.find("tollgate_connection_timeouts_total 2") != std::string::npos;
  }));
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").status, 200);
}

TEST_P(ServerE2E, ReloadUnderLoadFailsNoRequest) {
  auto s = Start(Config(), GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      HttpConnection c(s->port);
      std::string key = Key(std::to_string(t));
      while (!stop.load()) {
        auto r = c.Request("GET", "/v1/auth", AuthHeaders(key));
        if (r.ok && r.status == 204) {
          ++ok;
        } else {
          ++failed;
          c.Close();
          c = HttpConnection(s->port);
        }
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return ok.load() > 100; }));
  for (int i = 0; i < 20; ++i) {
    WriteFile(s->policy_path, GenerousPolicy(1'000'000 + i));
    auto r = Fetch(s->admin_port, "POST", "/v1/reload", {{"Content-Type", "application/json"}});
    ASSERT_EQ(r.status, 200) << r.body;
    int before = ok.load();
    ASSERT_TRUE(WaitFor([&] { return ok.load() > before + 10; }));
  }
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(ok.load(), 200);
  auto policy = json::parse(Fetch(s->admin_port, "GET", "/v1/policy").body);
  EXPECT_EQ(policy["generation"], 21);
}

// Server::Create's clock is the server's only time source: the Date header,
// the policy reload stamp and the decisions all follow a ManualClock.
TEST_P(ServerE2E, TheInjectedClockDrivesDatesReloadStampsAndDecisions) {
  ManualClock clock;  // wall time 1'700'001'000 s: 2023-11-14T22:30:00Z
  std::string error;
  auto s = TestServer::Start(Config(), TightPolicy(), &error, nullptr, &clock);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").Header("date"), "Tue, 14 Nov 2023 22:30:00 GMT");
  auto policy = Fetch(s->admin_port, "GET", "/v1/policy");
  ASSERT_EQ(policy.status, 200) << policy.body;
  EXPECT_EQ(json::parse(policy.body)["last_reload"]["wall_time_ns"], clock.WallNow());

  clock.Advance(std::chrono::hours(1));
  EXPECT_EQ(
      Fetch(s->admin_port, "POST", "/v1/reload", {{"Content-Type", "application/json"}}).status,
      200);
  policy = Fetch(s->admin_port, "GET", "/v1/policy");
  EXPECT_EQ(json::parse(policy.body)["last_reload"]["wall_time_ns"], clock.WallNow());
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").Header("date"), "Tue, 14 Nov 2023 23:30:00 GMT");

  // Decisions: the burst of 3 is spent, then refilled only by moving the clock
  // (one token per 100 s; the real clock would take that long). A Redis store
  // keeps its own time (server-clock mode), so this part is the local store's.
  if (GetParam() != "local") return;
  const Headers h = AuthHeaders(Key());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fetch(s->port, "GET", "/v1/auth", h).status, 204) << i;
  EXPECT_EQ(Fetch(s->port, "GET", "/v1/auth", h).status, 403);
  clock.Advance(std::chrono::seconds(100));
  EXPECT_EQ(Fetch(s->port, "GET", "/v1/auth", h).status, 204);
  EXPECT_EQ(Fetch(s->port, "GET", "/v1/auth", h).status, 403);
}

TEST_P(ServerE2E, AdminReloadPolicyTopExplainAndToken) {
  server::ServerConfig cfg = Config();
  cfg.admin_token = "s3cret-0123456789";
  cfg.identity_hash_key = "fleet-wide-hash-key-0123";
  const IdentityRedactor ids(cfg.identity_hash_key, false);
  auto s = Start(cfg, TightPolicy());
  ASSERT_TRUE(s);
  Headers auth = {{"Authorization", "Bearer s3cret-0123456789"}};
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/v1/policy").status, 401);
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/v1/policy", {{"Authorization", "Bearer nope"}}).status,
            401);
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/healthz").status, 200);  // probes need no token
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/readyz").status, 200);
  // /metrics is not a probe: it needs the token on both listeners.
  auto unauth_metrics = Fetch(s->admin_port, "GET", "/metrics");
  EXPECT_EQ(unauth_metrics.status, 401);
  EXPECT_EQ(unauth_metrics.body.find("tollgate_decisions_total"), std::string::npos);
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/metrics", {{"Authorization", "Bearer nope"}}).status,
            401);
  EXPECT_EQ(Fetch(s->port, "GET", "/metrics").status, 401);
  EXPECT_EQ(Fetch(s->port, "GET", "/metrics", auth).status, 200);
  auto p = Fetch(s->admin_port, "GET", "/v1/policy", auth);
  ASSERT_EQ(p.status, 200);
  json pj = json::parse(p.body);
  EXPECT_EQ(pj["generation"], 1);
  EXPECT_EQ(pj["rules"][0]["name"], "keyed");

  // A broken policy is refused with its errors; the old one stays live.
  WriteFile(s->policy_path, R"({"rules": [{"name": "x", "algorithm": "nope"}]})");
  auto bad = Fetch(s->admin_port, "POST", "/v1/reload", auth);
  EXPECT_EQ(bad.status, 400);
  EXPECT_FALSE(json::parse(bad.body)["errors"].empty()) << bad.body;
  EXPECT_EQ(json::parse(Fetch(s->admin_port, "GET", "/v1/policy", auth).body)["generation"], 1);
  WriteFile(s->policy_path, TightPolicy());
  EXPECT_EQ(Fetch(s->admin_port, "POST", "/v1/reload", auth).status, 200);
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/v1/reload", auth).status, 405);

  // Rejections show up in /v1/top, never in /metrics labels.
  std::string key = Key("\"quoted\"");
  for (int i = 0; i < 8; ++i) Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
  auto top = Fetch(s->admin_port, "GET", "/v1/top?n=5", auth);
  ASSERT_EQ(top.status, 200);
  json tj = json::parse(top.body);
  ASSERT_FALSE(tj["rules"].empty()) << top.body;
  EXPECT_EQ(tj["rules"][0]["rule"], "keyed");
  // Identities are hashed with the configured key unless raw=1 asks (with the token).
  EXPECT_EQ(tj["rules"][0]["top"][0]["key"], ids.Hash(key));
  EXPECT_EQ(top.body.find("quoted"), std::string::npos) << top.body;
  EXPECT_EQ(tj["rules"][0]["top"][0]["rejected"], 5);
  json raw_top = json::parse(Fetch(s->admin_port, "GET", "/v1/top?n=5&raw=1", auth).body);
  EXPECT_EQ(raw_top["rules"][0]["top"][0]["key"], key);
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/v1/top?n=0", auth).status, 400);
  auto metrics = Fetch(s->admin_port, "GET", "/metrics", auth).body;
  EXPECT_EQ(metrics.find("quoted"), std::string::npos);
  EXPECT_NE(metrics.find("tollgate_decisions_total{rule=\"keyed\",outcome=\"rejected\"} 5"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tollgate_policy_reloads_total{result=\"failure\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("tollgate_policy_reloads_total{result=\"success\"} 1"), std::string::npos);

  // Explain charges nothing.
  std::string fresh = Key("explain");
  auto e = Fetch(
      s->admin_port, "GET",
      "/v1/explain?method=GET&path=/api/items&header=x-api-key:" + fresh + "&ip=10.1.2.3", auth);
  ASSERT_EQ(e.status, 200) << e.body;
  json ej = json::parse(e.body);
  EXPECT_EQ(ej["rules"][0]["rule"], "keyed");
  EXPECT_EQ(ej["rules"][0]["key"], ids.Hash(fresh));
  EXPECT_EQ(e.body.find(fresh), std::string::npos) << e.body;  // nor in the trace or headers
  EXPECT_EQ(e.body.find("10.1.2.3"), std::string::npos) << e.body;
  EXPECT_EQ(ej["request"]["client_ip"], ids.Hash("10.1.2.3"));
  EXPECT_EQ(ej["rules"][0]["remaining"], 3);
  auto raw =
      Fetch(s->admin_port, "GET",
            "/v1/explain?path=/api/items&header=x-api-key:" + fresh + "&ip=10.1.2.3&raw=1", auth);
  ASSERT_EQ(raw.status, 200) << raw.body;
  json rj = json::parse(raw.body);
  EXPECT_EQ(rj["rules"][0]["key"], fresh);
  EXPECT_EQ(rj["request"]["client_ip"], "10.1.2.3");
  EXPECT_NE(rj["trace"].dump().find(fresh), std::string::npos) << raw.body;
  e = Fetch(s->admin_port, "GET", "/v1/explain?path=/api/items&header=x-api-key:" + fresh, auth);
  EXPECT_EQ(json::parse(e.body)["rules"][0]["remaining"], 3);
  EXPECT_EQ(Fetch(s->admin_port, "GET", "/v1/explain?path=nope", auth).status, 400);
}

// Without a token on the admin listener, raw=1 is refused; identities in the
// rejection and access logs are hashed unless identities.raw is set.
TEST_P(ServerE2E, IdentitiesAreRedactedInLogsTopAndExplainUnlessRawIsConfigured) {
  for (bool configured_raw : {false, true}) {
    SCOPED_TRACE(configured_raw ? "identities.raw" : "default");
    ScopedTempDir dir;
    std::shared_ptr<server::Logger> shared_log = FileLogger(dir.File("log.jsonl"));
    ASSERT_TRUE(shared_log);
    server::ServerConfig cfg = Config();
    cfg.reject_log_sample = 1;
    cfg.access_log = true;
    cfg.raw_identities = configured_raw;
    cfg.identity_hash_key = "fleet-wide-hash-key-0123";
    const IdentityRedactor ids(cfg.identity_hash_key, false);
    auto s = Start(cfg, TightPolicy(), shared_log);
    ASSERT_TRUE(s);
    const std::string key = Key(configured_raw ? "-raw" : "-hashed");
    for (int i = 0; i < 4; ++i) Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
    EXPECT_EQ(Fetch(s->admin_port, "GET", "/v1/top?raw=1").status, configured_raw ? 200 : 403);
    EXPECT_EQ(Fetch(s->admin_port, "GET", "/v1/explain?path=/&raw=1").status,
              configured_raw ? 200 : 403);
    auto top = Fetch(s->admin_port, "GET", "/v1/top");
    ASSERT_EQ(top.status, 200);
    EXPECT_EQ(json::parse(top.body)["rules"][0]["top"][0]["key"],
              configured_raw ? key : ids.Hash(key))
        << top.body;
    s.reset();
    shared_log->Flush();
    const std::string text = ReadFileForDebug(dir.File("log.jsonl"));
    std::istringstream lines(text);
    std::string line;
    int rejected = 0, requests = 0;
    while (std::getline(lines, line)) {
      json j = json::parse(line);
      if (j["msg"] == "rejected") {
        ++rejected;
        EXPECT_EQ(j["key"], configured_raw ? key : ids.Hash(key)) << line;
        EXPECT_EQ(j["peer"], configured_raw ? "127.0.0.1" : ids.Hash("127.0.0.1")) << line;
      } else if (j["msg"] == "request") {
        ++requests;
        EXPECT_EQ(j["peer"], configured_raw ? "127.0.0.1" : ids.Hash("127.0.0.1")) << line;
      }
    }
    EXPECT_EQ(rejected, 1) << text;
    EXPECT_GE(requests, 4) << text;
    if (!configured_raw) {
      EXPECT_EQ(text.find(key), std::string::npos) << text;
      EXPECT_EQ(text.find("127.0.0.1\""), std::string::npos) << text;
    }
  }
}

TEST_P(ServerE2E, RejectionLogsAreSampledEscapedAndCarryTraceId) {
  ScopedTempDir dir;
  std::shared_ptr<server::Logger> shared_log = FileLogger(dir.File("log.jsonl"));
  ASSERT_TRUE(shared_log);
  server::ServerConfig cfg = Config();
  cfg.reject_log_sample = 1;
  cfg.reject_logs_per_second = 2;
  auto s = Start(cfg, TightPolicy(), shared_log);
  ASSERT_TRUE(s);
  std::string key = Key("\"},{\"evil\":1,\"x\":\"\\\xff");  // quotes, backslash, bad UTF-8
  std::string trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  Headers h = AuthHeaders(key);
  h.push_back({"traceparent", trace});
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) Fetch(s->port, "GET", "/v1/auth", h);
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  s.reset();  // flushes
  shared_log->Flush();
  std::ifstream in(dir.File("log.jsonl"));
  std::string line;
  int rejected = 0;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;  // every line is one JSON object
    EXPECT_FALSE(j.contains("evil"));
    if (j["msg"] == "rejected") {
      ++rejected;
      EXPECT_EQ(j["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
      EXPECT_EQ(j["rule"], "keyed");
    }
  }
  // 7 rejections, at most 2 logged per second of the clock: the requests
  // touched at most ceil(elapsed) + 1 seconds (two when they took under one).
  EXPECT_GE(rejected, 1) << ReadFileForDebug(dir.File("log.jsonl"));
  EXPECT_LE(rejected, 2 * (static_cast<int>(std::ceil(elapsed_s)) + 1)) << elapsed_s << " s";
}

// ---- Gateway mode ----

TEST_P(ServerE2E, GatewayForwardsAllowedRequestsAndAnswers429Itself) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, TightPolicy());
  ASSERT_TRUE(s);
  std::string key = Key();
  std::string trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  HttpConnection c(s->port);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Request("GET", "/api/items?x=1",
                       {{"X-Api-Key", key},
                        {"X-Forwarded-For", "198.51.100.1"},
                        {"traceparent", trace},
                        {"Connection", "keep-alive, X-Hop"},
                        {"X-Hop", "secret"},
                        {"Keep-Alive", "timeout=5"}});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Header("x-upstream"), "yes");
    EXPECT_FALSE(r.Has("keep-alive"));  // hop-by-hop from the upstream removed
    EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=" + std::to_string(2 - i)),
              std::string::npos);
    json j = json::parse(r.body);
    EXPECT_EQ(j["target"], "/api/items?x=1");
    // The peer is no trusted proxy: its X-Forwarded-For is replaced, not extended.
    EXPECT_EQ(j["headers"]["x-forwarded-for"], "127.0.0.1");
    EXPECT_EQ(j["headers"]["x-real-ip"], "127.0.0.1");
    EXPECT_EQ(j["headers"]["traceparent"], trace);
    EXPECT_EQ(j["headers"]["host"], "127.0.0.1:" + std::to_string(upstream.port()));
    EXPECT_EQ(j["headers"]["x-forwarded-host"], "localhost");
    EXPECT_FALSE(j["headers"].contains("x-hop"));
    EXPECT_FALSE(j["headers"].contains("keep-alive"));
  }
  EXPECT_EQ(upstream.connections(), 1);  // pooled keep-alive connection reused

  auto r = c.Request("GET", "/api/items", {{"X-Api-Key", key}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  EXPECT_EQ(r.Header("cache-control"), "no-store");
  EXPECT_GE(std::atoi(r.Header("retry-after").c_str()), 1);
  json problem = json::parse(r.body);
  EXPECT_EQ(problem["status"], 429);
  EXPECT_NE(problem["type"].get<std::string>().find("quota-exceeded"), std::string::npos);
  EXPECT_EQ(upstream.requests(), 3);
  // tollgated's own endpoints are still served in gateway mode.
  EXPECT_EQ(c.Request("GET", "/healthz").status, 200);
}

TEST_P(ServerE2E, GatewayStreamsBodiesBothWays) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  std::string key = Key();
  HttpConnection c(s->port);
  std::string big(200'000, 'b');
  auto r = c.Request("POST", "/upload", {{"X-Api-Key", key}}, big);
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(json::parse(r.body)["body_bytes"], 200000);
  // A chunked request body.
  ASSERT_TRUE(
      c.SendRaw("POST /upload HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + key +
                "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  r = c.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(json::parse(r.body)["body_bytes"], 11);
  // A chunked response.
  r = c.Request("GET", "/chunked", {{"X-Api-Key", key}});
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, "part0part1part2part3part4");
  EXPECT_TRUE(r.Has("ratelimit"));
  // HEAD has no body.
  r = c.Request("HEAD", "/x", {{"X-Api-Key", key}});
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body.empty());
  r = c.Request("GET", "/status?code=404", {{"X-Api-Key", key}});
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(r.Has("ratelimit"));
}

// Heads longer than a first read (512 bytes) arrive in parts, both ways: the
// client's request head (a long bearer token) and the upstream's response head
// (cookies, security headers), on the fast path (no body) and the streamed one
// (a body). Before, the part after the start line was checked alone: 400 "no
// Host field" for the request; a streamed response's framing check skipped its
// first field (a Content-Length repeated there was relayed).
TEST_P(ServerE2E, GatewayRelaysHeadsLongerThanAFirstReadBothWays) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  const std::string key = Key();
  for (size_t pad : {100, 480, 600, 1500, 6000}) {
    for (const std::string method : {"GET", "POST"}) {
      SCOPED_TRACE(method + " " + std::to_string(pad));
      const std::string body = method == "POST" ? std::string(3000, 'b') : "";
      HttpResponse r =
          Fetch(s->port, method, "/bighead?n=" + std::to_string(pad),
                {{"X-Api-Key", key}, {"Authorization", "Bearer " + std::string(pad, 'j')}}, body);
      EXPECT_EQ(r.status, 200) << r.error << r.body;
      EXPECT_EQ(r.body, "ok");
      EXPECT_EQ(r.Header("x-pad").size(), pad);
      // The framing check sees the whole response head, its first field too.
      r = Fetch(s->port, method, "/bighead?dup=1&n=" + std::to_string(pad), {{"X-Api-Key", key}},
                body);
      EXPECT_EQ(r.status, 502) << r.error << r.body;
    }
  }
}

// Issue 14, findings 2, 8 and 10: every spelling of a path meets the rule of
// the path the upstream serves (absolute-form, dot segments, encoded
// unreserved characters, the base path); a repeated key header is refused.
TEST_P(ServerE2E, GatewayDecidesEverySpellingOfAPathOnThePathItForwards) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port()) + "/app";
  auto s = Start(cfg, R"({"rules": [
    {"name": "login", "match": {"path": {"prefix": "/api/login"}}, "limit_keys": ["header:x-api-key"],
     "algorithm": "token_bucket", "algorithm_config": {"rps": 0.01, "burst": 3}}]})");
  ASSERT_TRUE(s);
  const std::string key = Key();
  HttpConnection c(s->port);
  std::vector<int> statuses;
  for (const std::string target :
       {"http://test/api/login", "/x/../%61pi/login", "//api/./login?y=1", "/../api/login"}) {
    ASSERT_TRUE(
        c.SendRaw("GET " + target + " HTTP/1.1\r\nHost: test\r\nX-Api-Key: " + key + "\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.ok) << r.error;
    statuses.push_back(r.status);
    if (r.status == 200) {
      const std::string forwarded = json::parse(r.body)["target"];
      EXPECT_EQ(forwarded.substr(0, forwarded.find('?')), "/app/api/login") << target;
    }
  }
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 200, 429}));
  EXPECT_EQ(upstream.requests(), 3);
  // The key header twice: 400 (never a bucket picked by one of the copies).
  HttpConnection d(s->port);
  auto r = d.Request("GET", "/api/login", {{"X-Api-Key", Key()}, {"x-api-key", Key()}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("x-api-key"), std::string::npos) << r.body;
  EXPECT_EQ(upstream.requests(), 3);
}

// Issue 14: the client's read_timeout closed the connection while tollgated
// waited for a slower upstream, so the client got an empty reply instead of
// the 504. The upstream timeout is longer than the read timeout here; both
// are scaled together (their ratio is what the bug needs).
TEST_P(ServerE2E, GatewaySlowUpstreamIs504NotTheClientsReadTimeout) {
  server::ServerConfig cfg = Config();
  cfg.read_timeout = Scaled(server::Millis(150));
  cfg.upstream_timeout = Scaled(server::Millis(600));
  TestUpstream upstream;
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  const std::string slow = "/slow?ms=" + std::to_string(3 * cfg.upstream_timeout.count());
  HttpConnection c(s->port, std::chrono::seconds(20));
  auto r = c.Request("GET", slow, {{"X-Api-Key", Key()}});  // the fast path
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504);
  HttpConnection c2(s->port, std::chrono::seconds(20));
  r = c2.Request("POST", slow, {{"X-Api-Key", Key()}}, "body");  // the streamed path
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504);
}

TEST_P(ServerE2E, GatewayUpstreamFailuresBecome502And504) {
  ScopedTempDir dir;
  auto created = server::Logger::Create(server::LogLevel::kInfo, dir.File("log.jsonl"));
  ASSERT_TRUE(created.ok());
  std::shared_ptr<server::Logger> log = std::move(created).value();
  server::ServerConfig cfg = Config();
  cfg.upstream_timeout = server::Millis(300);
  cfg.identity_hash_key = "fleet-wide-hash-key-0123";
  auto upstream = std::make_unique<TestUpstream>();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream->port());
  auto s = Start(cfg, GenerousPolicy(1'000'000), log);
  ASSERT_TRUE(s);
  std::string key = Key();
  const std::string trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto r = Fetch(s->port, "GET", "/slow?ms=1500", {{"X-Api-Key", key}, {"traceparent", trace}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504);
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  upstream.reset();  // nobody listens there any more
  r = Fetch(s->port, "POST", "/x?q=1", {{"X-Api-Key", key}}, "body");  // the streamed path
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").status, 200);
  auto m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_NE(m.find("tollgate_upstream_errors_total{kind=\"timeout\"} 1"), std::string::npos) << m;

  // One structured line per failure, with the trace id when the request had one.
  s.reset();
  log->Flush();
  std::ifstream in(dir.File("log.jsonl"));
  std::string line;
  std::vector<json> failures;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    if (j["msg"] == "upstream_failed") failures.push_back(j);
  }
  ASSERT_EQ(failures.size(), 2u) << ReadFileForDebug(dir.File("log.jsonl"));
  EXPECT_EQ(failures[0]["status"], 504);
  EXPECT_EQ(failures[0]["kind"], "timeout");
  EXPECT_EQ(failures[0]["method"], "GET");
  EXPECT_EQ(failures[0]["path"], "/slow?ms=1500");
  EXPECT_EQ(failures[0]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
  // The client's address is an identity: hashed like everywhere else.
  EXPECT_EQ(failures[0]["peer"], IdentityRedactor(cfg.identity_hash_key, false).Hash("127.0.0.1"));
  EXPECT_EQ(failures[1]["status"], 502);
  EXPECT_EQ(failures[1]["method"], "POST");
  EXPECT_EQ(failures[1]["path"], "/x?q=1");
  EXPECT_FALSE(failures[1].contains("trace_id"));
}

// Sizes on both sides of the whole-response fast path (header + body within
// 16 KiB) and the streaming path, over one client and one upstream connection.
TEST_P(ServerE2E, GatewayRelaysContentLengthBodiesByteExactly) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  std::string key = Key();
  HttpConnection c(s->port);
  for (size_t n : {0, 1, 100, 16'000, 16'384, 16'385, 40'000, 300'000}) {
    auto r = c.Request("GET", "/bytes?n=" + std::to_string(n), {{"X-Api-Key", key}});
    ASSERT_TRUE(r.ok) << n << ": " << r.error;
    ASSERT_EQ(r.status, 200) << n;
    EXPECT_EQ(r.Header("content-length"), std::to_string(n));
    EXPECT_TRUE(r.body == PatternBytes(n)) << n << ": body differs";
    EXPECT_EQ(r.Header("content-type"), "application/octet-stream");
    EXPECT_FALSE(r.Has("x-up-hop")) << n;  // named by the upstream's Connection
    EXPECT_FALSE(r.Has("connection")) << n;
    // The upstream's RateLimit items are kept and ours appended (the draft: an
    // intermediary must not remove the origin's).
    EXPECT_LT(r.Header("ratelimit").find("upstream"), r.Header("ratelimit").find("\"keyed\""))
        << r.Header("ratelimit");
    EXPECT_TRUE(r.keep_alive);
  }
  EXPECT_EQ(upstream.connections(), 1);  // fast and streamed responses both pooled it
  // An HTTP/1.0 keep-alive client is told the connection stays open.
  ASSERT_TRUE(c.SendRaw(
      "GET /bytes?n=5 HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\nX-Api-Key: " + key +
      "\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.body, PatternBytes(5));
  EXPECT_EQ(r.Header("connection"), "keep-alive");
  EXPECT_EQ(c.Request("GET", "/bytes?n=3", {{"X-Api-Key", key}}).body, PatternBytes(3));
}

// A response larger than the relay buffer reaches the client while the
// upstream is still sending it: the upstream holds its second half until the
// client has seen the first.
TEST_P(ServerE2E, GatewayStreamsLargeResponsesBeforeTheyEnd) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  std::string key = Key();
  HttpConnection c(s->port, std::chrono::seconds(3));
  for (size_t n : {20'000, 400'000}) {
    ASSERT_TRUE(c.SendRaw("GET /hold?n=" + std::to_string(n) +
                          " HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + key + "\r\n\r\n"));
    // Times out (3 s) if the gateway waits for the whole response.
    std::string first = c.ReadAtLeast(n / 2);
    size_t header_end = first.find("\r\n\r\n");
    ASSERT_NE(header_end, std::string::npos) << n;
    first = c.ReadAtLeast(header_end + 4 + n / 2);
    ASSERT_GE(first.size(), header_end + 4 + n / 2) << n << ": the first half did not arrive";
    EXPECT_EQ(first.substr(header_end + 4, n / 2), PatternBytes(n).substr(0, n / 2));
    upstream.ReleaseHeld();
    auto r = c.ReadResponse();
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.body == PatternBytes(n)) << n << ": body differs";
    EXPECT_TRUE(r.Has("ratelimit"));
  }
}

TEST_P(ServerE2E, GatewayUpstreamClosingMidBody) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  std::string key = Key();
  // Small: nothing was sent to the client yet, so it gets a 502.
  HttpConnection c(s->port);
  auto r = c.Request("GET", "/truncate?n=1000", {{"X-Api-Key", key}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  EXPECT_FALSE(r.keep_alive);
  // Large: the header went out with the first piece; the client sees the
  // connection close before the announced length.
  HttpConnection big(s->port);
  r = big.Request("GET", "/truncate?n=100000", {{"X-Api-Key", key}});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "eof in body");
  auto m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_NE(m.find("tollgate_upstream_errors_total{kind=\"broken\"} 2"), std::string::npos) << m;
  // The gateway still works.
  EXPECT_EQ(Fetch(s->port, "GET", "/bytes?n=10", {{"X-Api-Key", key}}).body, PatternBytes(10));
}

// The upstream closes a keep-alive connection right after answering: the next
// request must not fail on the pooled connection (stale check or one retry).
TEST_P(ServerE2E, GatewayReplacesPooledConnectionsTheUpstreamClosed) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.threads = 1;  // one worker: one pool
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  std::string key = Key();
  HttpConnection c(s->port);
  for (int i = 0; i < 5; ++i) {
    auto r = c.Request("GET", "/drop", {{"X-Api-Key", key}});
    ASSERT_TRUE(r.ok) << i << ": " << r.error;
    EXPECT_EQ(r.status, 200) << i << ": " << r.body;
  }
  EXPECT_EQ(upstream.connections(), 5);
}

// The streamed path (a request with a body): from a trusted proxy, every
// X-Forwarded-For line, in order, then the peer, as on the fast path.
TEST_P(ServerE2E, GatewayStreamedRequestJoinsEveryForwardedForLine) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.trusted_proxies = {"127.0.0.1"};
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  auto s = Start(cfg, GenerousPolicy(1'000'000));
  ASSERT_TRUE(s);
  std::string key = Key();
  HttpConnection c(s->port);
  const std::string body(100'000, 'p');  // larger than any buffered fast path
  ASSERT_TRUE(c.SendRaw("POST /upload HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + key +
                        "\r\nX-Forwarded-For: 198.51.100.1, 198.51.100.2"
                        "\r\nContent-Type: text/plain"
                        "\r\nX-Forwarded-For: 203.0.113.7"
                        "\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["body_bytes"], body.size());
  EXPECT_EQ(j["headers"]["x-forwarded-for"], "198.51.100.1, 198.51.100.2, 203.0.113.7, 127.0.0.1")
      << r.body;
  // A bodyless request on the same connection (fast path) agrees.
  ASSERT_TRUE(
      c.SendRaw("GET /x HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + key +
                "\r\nX-Forwarded-For: 198.51.100.1\r\nX-Forwarded-For: 203.0.113.7\r\n\r\n"));
  r = c.ReadResponse();
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(json::parse(r.body)["headers"]["x-forwarded-for"],
            "198.51.100.1, 203.0.113.7, 127.0.0.1");
}

// failure_mode closed + a store that cannot decide: /readyz says 503 (and says why).
TEST_P(ServerE2E, ReadyzIs503WhenClosedModeStoreIsDown) {
  if (GetParam() != "redis") GTEST_SKIP() << "the local store cannot fail";
#if TOLLGATE_TEST_REDIS
  server::ServerConfig cfg = Config();
  cfg.failure_mode = FailureMode::kClosed;
  cfg.store_timeout = Scaled(server::Millis(50));
  auto s = Start(cfg, TightPolicy());
  ASSERT_TRUE(s);
  std::string key = Key();
  auto ready = Fetch(s->port, "GET", "/readyz");
  ASSERT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(json::parse(ready.body)["ready"], true);
  EXPECT_EQ(Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key)).status, 204);

  redis_.server->Kill();
  // Decisions fail (closed) until the store is seen as down; readyz follows.
  EXPECT_TRUE(WaitFor(
      [&] {
        Fetch(s->port, "GET", "/v1/auth", AuthHeaders(key));
        return Fetch(s->port, "GET", "/readyz").status == 503;
      },
      10s));
  for (int port : {s->port, s->admin_port}) {
    ready = Fetch(port, "GET", "/readyz");
    ASSERT_EQ(ready.status, 503) << ready.body;
    json j = json::parse(ready.body);
    EXPECT_EQ(j["ready"], false);
    EXPECT_EQ(j["draining"], false);
  }
  // Why, on the admin listener only (the public one says ready or not).
  json j = json::parse(Fetch(s->admin_port, "GET", "/readyz").body);
  EXPECT_EQ(j["store_healthy"], false);
  EXPECT_EQ(j["failure_mode"], "closed");
  EXPECT_EQ(Fetch(s->port, "GET", "/healthz").status, 200);  // alive, just not ready
#endif
}

#if TOLLGATE_TEST_GRPC
// The Envoy RLS YAML is checked against the store at load: sliding_log (explicit
// or as the configured default) is a start-up error on Redis, fine locally.
TEST_P(ServerE2E, RlsSlidingLogIsALoadErrorOnRedis) {
  ScopedTempDir dir;
  WriteFile(dir.File("explicit.yaml"),
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
            "requests_per_unit: 5, algorithm: sliding_log}\n");
  WriteFile(dir.File("windows.yaml"),
            "domain: w\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, "
            "requests_per_unit: 5, algorithm: fixed_window}\n  - key: b\n    rate_limit: {unit: "
            "minute, requests_per_unit: 5, algorithm: sliding_window}\n");
  WriteFile(dir.File("implicit.yaml"),
            "domain: i\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
            "requests_per_unit: 5}\n");
  const bool redis = GetParam() == "redis";
  struct Case {
    std::string file;
    std::string default_algorithm;
    bool fails_on_redis;
  };
  for (const Case& c :
       {Case{"explicit.yaml", "token_bucket", true}, Case{"implicit.yaml", "sliding_log", true},
        Case{"implicit.yaml", "fixed_window", false},
        Case{"windows.yaml", "token_bucket", false}}) {
    SCOPED_TRACE(c.file + " default " + c.default_algorithm);
    server::ServerConfig cfg = Config();
    cfg.grpc_listen = "127.0.0.1:0";
    cfg.rls_config = {dir.File(c.file)};
    ASSERT_TRUE(ParseAlgorithm(c.default_algorithm, &cfg.rls_default_algorithm));
    std::string error;
    auto s = TestServer::Start(cfg, TightPolicy(), &error);
    if (redis && c.fails_on_redis) {
      EXPECT_FALSE(s) << "sliding_log loaded on Redis";
      EXPECT_NE(error.find("sliding_log is not supported by the redis store"), std::string::npos)
          << error;
    } else {
      EXPECT_TRUE(s) << error;
    }
  }
  // An unknown algorithm or style is refused where the config is parsed.
  server::ServerConfig bad = Config();
  std::string error;
  for (const ConfigError& e : server::ParseServerConfig(
           R"({"grpc": {"default_algorithm": "gcra", "headers": "fancy"}})", &bad)) {
    error += e.ToString() + "\n";
  }
  EXPECT_NE(error.find("grpc.default_algorithm: unknown algorithm \"gcra\""), std::string::npos)
      << error;
  EXPECT_NE(error.find("grpc.headers: unknown style \"fancy\""), std::string::npos) << error;
}
#endif

INSTANTIATE_TEST_SUITE_P(Stores, ServerE2E, ::testing::Values("local", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tollgate::testing
