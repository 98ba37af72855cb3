// tollgated with Redis down: per-rule failure modes from the policy (and
// reload), the Tollgate-Unenforced marker on every front end, the 429 of a
// degrade rule that rides with an open one, the store config and the
// failure-mode metrics (every name docs/failure-modes.md lists must exist).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "server/config.h"
#include "server/server_fixture.h"
#include "server/test_http.h"
#include "src/runtime/store_bundle.h"
#include "testing/redis_server.h"
#include "tollgate/resilient_store.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;

// Every rule has its own group, so all that match apply (no tiers).
std::string ModesPolicy(const std::string& pay_mode) {
  return R"({"rules": [
    {"name": "pub", "group": "pub", "limit_keys": ["header:x-api-key"],
     "match": {"path": {"prefix": "/api"}}, "failure_mode": "open",
     "algorithm_config": {"rps": 1, "burst": 1000}},
    {"name": "deg", "group": "deg", "limit_keys": ["header:x-api-key"],
     "match": {"path": {"prefix": "/api"}}, "failure_mode": "degrade",
     "algorithm_config": {"rps": 0.001, "burst": 4}},
    {"name": "pay", "group": "pay", "limit_keys": ["header:x-api-key"],
     "match": {"path": {"prefix": "/pay"}})" +
         (pay_mode.empty() ? std::string() : R"(, "failure_mode": ")" + pay_mode + "\"") + R"(,
     "algorithm_config": {"rps": 1, "burst": 1000}}
  ]})";
}

class FailureModeE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = RedisServer::Start();
    if (redis_.missing) GTEST_SKIP() << redis_.error;
    ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
  }
  std::unique_ptr<TestServer> Start(server::ServerConfig c, const std::string& policy) {
    std::string error;
    auto s = TestServer::Start(std::move(c), policy, &error);
    EXPECT_TRUE(s != nullptr) << error;
    return s;
  }
  server::ServerConfig Config() {
    server::ServerConfig c = TestServer::DefaultConfig();
    c.store = redis_->url();
    c.failure_mode = FailureMode::kClosed;  // rules without their own mode
    c.degrade_fraction = 0.5;
    return c;
  }
  RedisServer::StartResult redis_;
};

json Decide(int port, const std::string& path, const std::string& key) {
  json body = {{"request", {{"method", "GET"}, {"path", path}, {"headers", {{"x-api-key", key}}}}}};
  auto r = Fetch(port, "POST", "/v1/decide", {}, body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body, nullptr, false);
  // The HTTP response carries the same headers as the JSON.
  if (j.is_object() && j["headers"].contains("Tollgate-Unenforced")) {
    EXPECT_EQ(r.Header("tollgate-unenforced"), "store-unavailable");
  }
  return j;
}

Headers Auth(const std::string& uri, const std::string& key) {
  return {{"X-Original-URI", uri}, {"X-Original-Method", "GET"}, {"X-Api-Key", key}};
}

TEST_F(FailureModeE2E, PerRuleModesMarkerAnd429WhileRedisIsDown) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  cfg.decision_on_main = true;  // a gateway exposes /v1/decide and /v1/auth only when asked
  auto s = Start(cfg, ModesPolicy(""));
  ASSERT_TRUE(s);

  // Redis up: enforced decisions with RateLimit headers, no marker.
  json up = Decide(s->port, "/api/x", "warm");
  EXPECT_TRUE(up["enforced"].get<bool>()) << up;
  EXPECT_TRUE(up["headers"].contains("RateLimit")) << up;
  EXPECT_FALSE(up["headers"].contains("Tollgate-Unenforced")) << up;

  redis_->Kill();

  // pub (open) + deg (degrade, 4 x 0.5 = 2 local tokens): two passes unenforced and marked...
  json first = Decide(s->port, "/api/x", "k");
  EXPECT_TRUE(first["allowed"].get<bool>()) << first;
  EXPECT_FALSE(first["enforced"].get<bool>()) << first;
  EXPECT_EQ(first["headers"]["Tollgate-Unenforced"], "store-unavailable") << first;
  auto auth = Fetch(s->port, "GET", "/v1/auth", Auth("/api/x", "k"));
  EXPECT_EQ(auth.status, 204) << auth.body;
  EXPECT_EQ(auth.Header("tollgate-unenforced"), "store-unavailable");
  EXPECT_FALSE(auth.Has("ratelimit"));

  // ...then the degrade rule's share is used up: an enforced 429 with headers, not a 503.
  json denied = Decide(s->port, "/api/x", "k");
  EXPECT_FALSE(denied["allowed"].get<bool>()) << denied;
  EXPECT_EQ(denied["status"], 429) << denied;
  EXPECT_TRUE(denied["enforced"].get<bool>()) << denied;
  EXPECT_EQ(denied["denied_rule"], "deg") << denied;
  EXPECT_NE(denied["headers"]["RateLimit"].get<std::string>().find("\"deg\";r=0"),
            std::string::npos)
      << denied;
  EXPECT_TRUE(denied["headers"].contains("Retry-After")) << denied;
  EXPECT_FALSE(denied["headers"].contains("Tollgate-Unenforced")) << denied;
  auto gw = Fetch(s->port, "GET", "/api/x", {{"X-Api-Key", "k"}});
  EXPECT_EQ(gw.status, 429) << gw.body;
  EXPECT_NE(gw.Header("ratelimit").find("\"deg\""), std::string::npos);
  EXPECT_EQ(upstream.requests(), 0);

  // The gateway forwards an unenforced pass and marks the response.
  auto gw_pass = Fetch(s->port, "GET", "/api/x", {{"X-Api-Key", "gw"}});
  EXPECT_EQ(gw_pass.status, 200) << gw_pass.body;
  EXPECT_EQ(gw_pass.Header("tollgate-unenforced"), "store-unavailable");
  EXPECT_EQ(upstream.requests(), 1);

  // pay has no mode of its own: the server's closed -> 503.
  json pay = Decide(s->port, "/pay", "k");
  EXPECT_EQ(pay["status"], 503) << pay;
  EXPECT_FALSE(pay["headers"].contains("Tollgate-Unenforced")) << pay;

  // A reload giving pay its own mode takes effect on the next decision.
  WriteFile(s->policy_path, ModesPolicy("open"));
  auto errors = s->server->Reload();
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  json pay_open = Decide(s->port, "/pay", "k");
  EXPECT_EQ(pay_open["status"], 200) << pay_open;
  EXPECT_FALSE(pay_open["enforced"].get<bool>()) << pay_open;
  EXPECT_EQ(pay_open["headers"]["Tollgate-Unenforced"], "store-unavailable") << pay_open;
}

// Fail-closed with the breaker open: the 503 says when to come back, the time
// to the breaker's next probe (breaker.open_ms), on /v1/decide, /v1/auth and
// the gateway, in Retry-After and the problem body.
TEST_F(FailureModeE2E, FailClosed503CarriesRetryAfterFromTheBreakersNextProbe) {
  TestUpstream upstream;
  server::ServerConfig cfg = Config();
  cfg.upstream = "http://127.0.0.1:" + std::to_string(upstream.port());
  cfg.decision_on_main = true;
  cfg.breaker_consecutive_failures = 1;
  cfg.breaker_open = server::Millis(30'000);
  cfg.retry_after_jitter = 0;
  auto s = Start(cfg, ModesPolicy(""));
  ASSERT_TRUE(s);
  EXPECT_EQ(Decide(s->port, "/pay", "warm")["status"], 200);
  redis_->Kill();
  const auto killed = std::chrono::steady_clock::now();
  // The first failed call opens the breaker (503 either way); /readyz then says so.
  EXPECT_EQ(Decide(s->port, "/pay", "k")["status"], 503);
  ASSERT_TRUE(WaitFor([&] { return Fetch(s->port, "GET", "/readyz").status == 503; }));
  json pay = Decide(s->port, "/pay", "k");
  const int64_t elapsed_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - killed)
          .count();
  ASSERT_EQ(pay["status"], 503) << pay;
  ASSERT_TRUE(pay["headers"].contains("Retry-After")) << pay;
  const int retry = std::stoi(pay["headers"]["Retry-After"].get<std::string>());
  // The probe is due 30 s after the breaker opened, which was after `killed`.
  EXPECT_LE(retry, 30) << pay;
  EXPECT_GE(retry, std::max<int64_t>(1, 30 - elapsed_s - 1)) << pay;
  EXPECT_EQ(pay["retry_after_seconds"], retry) << pay;
  EXPECT_EQ(pay["problem"]["retry-after"], retry) << pay;
  auto auth = Fetch(s->port, "GET", "/v1/auth", Auth("/pay", "k"));
  EXPECT_EQ(auth.status, 403);
  EXPECT_EQ(auth.Header("x-ratelimit-decision"), "unavailable");
  EXPECT_GE(std::atoi(auth.Header("retry-after").c_str()), 1) << auth.Header("retry-after");
  auto gw = Fetch(s->port, "GET", "/pay", {{"X-Api-Key", "k"}});
  EXPECT_EQ(gw.status, 503) << gw.body;
  EXPECT_GE(std::atoi(gw.Header("retry-after").c_str()), 1);
  EXPECT_LE(std::atoi(gw.Header("retry-after").c_str()), 30);
  EXPECT_EQ(upstream.requests(), 0);
}

// Each "tollgate_..." name in a doc page.
std::set<std::string> MetricNamesIn(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> names;
  const std::string s = text.str();
  std::regex re("tollgate_[a-z_]+[a-z]");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), re); it != std::sregex_iterator(); ++it)
    names.insert(it->str());
  return names;
}

TEST_F(FailureModeE2E, FailureModeMetricsExistAndMatchTheDocs) {
  server::ServerConfig cfg = Config();
  cfg.breaker_consecutive_failures = 2;
  auto s = Start(cfg, ModesPolicy(""));
  ASSERT_TRUE(s);
  redis_->Kill();
  for (int i = 0; i < 3; ++i) Decide(s->port, "/api/x", "m");
  const std::string m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_NE(m.find("tollgate_breaker_opened_total{reason=\"consecutive_failures\"} 1"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("tollgate_breaker_state{state=\"open\"} 1"), std::string::npos) << m;
  for (const char* name :
       {"tollgate_charge_back_keys_total", "tollgate_charge_back_forgiven_tokens_total",
        "tollgate_charge_back_dropped_tokens_total", "tollgate_charge_back_failures_total",
        "tollgate_charge_back_pending_keys", "tollgate_fleet_instances",
        "tollgate_fleet_heartbeats_total", "tollgate_breaker_probes_total",
        "tollgate_store_deadline_expired_total"}) {
    EXPECT_NE(m.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  }
  // Every metric name docs/failure-modes.md mentions is one tollgated exports.
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");  // set by ctest
  const std::string root =
      src ? src : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  const auto names = MetricNamesIn(root + "/docs/failure-modes.md");
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    EXPECT_NE(m.find("# TYPE " + name + " "), std::string::npos)
        << name << " is in docs/failure-modes.md but not on /metrics";
  }
}

// Over TLS (rediss://) the fleet registry rides the store's own connections:
// two tollgated stores on one Redis count two instances (the degrade divisor).
TEST(FleetOverTls, TwoStoresCountEachOther) {
  RedisServer::Options so;
  so.tls = true;
  auto started = RedisServer::Start(so);
  if (started.missing) GTEST_SKIP() << started.error;
  ASSERT_TRUE(started.server != nullptr) << started.error;
  server::ServerConfig c = TestServer::DefaultConfig();
  c.store = started.server->tls_url() + "?tls_ca_file=" + started.server->ca_file();
  c.failure_mode = FailureMode::kDegrade;
  c.store_timeout =
      Scaled(server::Millis(1000));  // the first heartbeat also waits for the handshake
  auto spec = StoreSpecOf(c);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto a = runtime::CreateStore(*spec, StoreEnv{});
  auto b = runtime::CreateStore(*spec, StoreEnv{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto instances = [](const runtime::StoreBundle& bundle) {
    auto* r = dynamic_cast<ResilientStore*>(bundle.store.get());
    return r != nullptr ? r->Stats().instances : -1;
  };
  WaitFor([&] { return instances(*a) == 2 && instances(*b) == 2; }, std::chrono::seconds(4),
          std::chrono::milliseconds(10));
  EXPECT_EQ(instances(*a), 2);
  EXPECT_EQ(instances(*b), 2);
}

TEST(StoreConfig, ParsesChargeBackDeadlineAndBreaker) {
  server::ServerConfig c;
  auto errors = server::ParseServerConfig(R"({"store": {"url": "redis://127.0.0.1:6379",
      "charge_back": false, "call_deadline_ms": 50,
      "breaker": {"consecutive_failures": 3, "failure_ratio": 0.25, "min_calls": 10,
                  "window_ms": 5000, "open_ms": 100, "half_open_probes": 2}}})",
                                          &c);
  ASSERT_TRUE(errors.empty()) << errors[0].ToString();
  EXPECT_FALSE(c.charge_back);
  EXPECT_EQ(c.call_deadline, server::Millis(50));
  EXPECT_EQ(c.breaker_consecutive_failures, 3);
  EXPECT_DOUBLE_EQ(c.breaker_failure_ratio, 0.25);
  EXPECT_EQ(c.breaker_min_calls, 10);
  EXPECT_EQ(c.breaker_window, server::Millis(5000));
  EXPECT_EQ(c.breaker_open, server::Millis(100));
  EXPECT_EQ(c.breaker_half_open_probes, 2);

  server::ServerConfig d;
  EXPECT_TRUE(d.charge_back);  // default on
  auto bad = server::ParseServerConfig(R"({"store": {"charge_back": 1, "call_deadline_ms": -1,
      "breaker": {"consecutive_failures": 0, "failure_ratio": 0, "half_open_probes": 70000,
                  "open": 5}}})",
                                       &d);
  std::set<std::string> got;
  for (const auto& e : bad) got.insert(e.ToString());
  for (const char* want :
       {"store.charge_back: must be true or false", "store.call_deadline_ms: must be in [0, 60000]",
        "store.breaker.consecutive_failures: must be in [1, 1000000]",
        "store.breaker.failure_ratio: must be > 0",
        "store.breaker.half_open_probes: must be in [1, 65535]",
        "store.breaker.open: unknown field"}) {
    EXPECT_TRUE(got.count(want)) << want;
  }
  server::ServerConfig e;
  auto not_object = server::ParseServerConfig(R"({"store": {"breaker": 5}})", &e);
  ASSERT_EQ(not_object.size(), 1u);
  EXPECT_EQ(not_object[0].ToString(), "store.breaker: must be an object");
}

}  // namespace
}  // namespace tollgate::testing
