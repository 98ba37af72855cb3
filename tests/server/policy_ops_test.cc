// The operations half of issue 18 through the real tollgated binary: several
// header styles at once on every kind of answer, shadow rejections logged
// under a rate limit, and the rollback guard's triggers with its admin
// endpoints (clear, trip), /readyz and metrics.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class PolicyOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
  }
  // Writes the policy and a config (`extra` = more top-level fields) and starts tollgated.
  std::unique_ptr<Tollgated> Start(const std::string& policy, const std::string& extra) {
    WriteFile(dir_ + "/policy.json", policy);
    WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + dir_ + R"(/policy.json",
        "listen": "127.0.0.1:0", "threads": 1)" +
                                            extra + "}");
    auto t = std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", dir_ + "/tollgated.json"}, dir_);
    if (!t->WaitStarted()) {
      ADD_FAILURE() << "log: " << t->Log() << " stdout: " << t->Stdout();
      return nullptr;
    }
    return t;
  }
  int CountLines(const std::string& log, const std::string& needle) {
    int n = 0;
    for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  }
  // The value of an unlabelled or labelled sample line, or -1.
  static double Metric(const std::string& body, const std::string& series) {
    size_t at = body.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::atof(body.c_str() + at + series.size() + 2);
  }
  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
};

// draft11 + draft03 + x-ratelimit together: each field once (a repeated field
// would read "9, 9"), the same numbers in every style, on the gateway's
// forwarded answer, /v1/auth and /v1/decide; on a 429 every reset equals the
// jittered Retry-After.
TEST_F(PolicyOpsTest, SeveralHeaderStylesAtOnceOnEveryAnswer) {
  TestUpstream upstream;
  auto t = Start(TightPolicy(), R"(, "admin": "127.0.0.1:0",
      "headers": ["draft11", "draft03", "x-ratelimit"], "retry_after_jitter": 3,
      "gateway": {"upstream": "http://127.0.0.1:)" +
                                    std::to_string(upstream.port()) + R"("},
      "decision_on_main": true)");
  ASSERT_TRUE(t);
  auto check_allowed = [](const HttpResponse& r, int remaining) {
    const std::string rem = std::to_string(remaining);
    EXPECT_EQ(r.Header("ratelimit-remaining"), rem);
    EXPECT_EQ(r.Header("x-ratelimit-remaining"), rem);
    EXPECT_EQ(r.Header("ratelimit-limit"), "3");
    EXPECT_EQ(r.Header("x-ratelimit-limit"), "3");
    EXPECT_EQ(r.Header("ratelimit-reset"), r.Header("x-ratelimit-reset"));
    EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=" + rem + ";t="), std::string::npos)
        << r.Header("ratelimit");
    EXPECT_EQ(r.Header("ratelimit-policy").find(", \"keyed\""), std::string::npos);  // once
  };
  auto gw = Fetch(t->port(), "GET", "/api", {{"X-Api-Key", "k"}});
  ASSERT_EQ(gw.status, 200) << gw.body;
  check_allowed(gw, 2);
  auto auth = Fetch(t->port(), "GET", "/v1/auth", {{"X-Original-URI", "/api"}, {"X-Api-Key", "k"}});
  ASSERT_EQ(auth.status, 204) << auth.body;
  check_allowed(auth, 1);
  json body = {{"request", {{"path", "/api"}, {"headers", {{"x-api-key", "k"}}}}}};
  auto decide = Fetch(t->port(), "POST", "/v1/decide", {}, body.dump());
  ASSERT_EQ(decide.status, 200) << decide.body;
  check_allowed(decide, 0);
  json j = json::parse(decide.body);
  EXPECT_EQ(j["headers"]["X-RateLimit-Remaining"], "0") << j;
  EXPECT_EQ(j["headers"]["RateLimit-Remaining"], "0") << j;

  auto rejected = Fetch(t->port(), "GET", "/api", {{"X-Api-Key", "k"}});
  ASSERT_EQ(rejected.status, 429) << rejected.body;
  const std::string retry = rejected.Header("retry-after");
  ASSERT_FALSE(retry.empty());
  EXPECT_EQ(rejected.Header("ratelimit-reset"), retry);
  EXPECT_EQ(rejected.Header("x-ratelimit-reset"), retry);
  EXPECT_NE(rejected.Header("ratelimit").find(";t=" + retry), std::string::npos);
  EXPECT_EQ(json::parse(rejected.body)["retry-after"], std::stoi(retry));
  EXPECT_EQ(upstream.requests(), 1);
}

// A rule's own "headers" override the server-wide list for that rule's
// report: the server says draft11, the legacy rule x-ratelimit. An allow
// carries each rule in its styles; legacy's rejection only legacy's.
TEST_F(PolicyOpsTest, PerRuleHeaderStylesOverrideTheServerDefault) {
  auto t = Start(R"({"rules": [
      {"name": "modern", "group": "modern", "limit_keys": ["header:x-api-key"],
       "algorithm_config": {"rps": 0.01, "burst": 50}},
      {"name": "legacy", "group": "legacy", "limit_keys": ["header:x-api-key"], "headers": ["x-ratelimit"],
       "algorithm_config": {"rps": 0.01, "burst": 2}}]})",
                 R"(, "headers": "draft11", "retry_after_jitter": 0)");
  ASSERT_TRUE(t);
  auto auth = [&] {
    return Fetch(t->port(), "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Api-Key", "k"}});
  };
  auto first = auth();
  ASSERT_EQ(first.status, 204) << first.body;
  EXPECT_NE(first.Header("ratelimit").find("\"modern\";r=49"), std::string::npos)
      << first.Header("ratelimit");
  EXPECT_EQ(first.Header("ratelimit").find("legacy"), std::string::npos);
  EXPECT_EQ(first.Header("x-ratelimit-limit"), "2");
  EXPECT_EQ(first.Header("x-ratelimit-remaining"), "1");
  ASSERT_EQ(auth().status, 204);
  auto rejected = auth();  // /v1/auth answers a rejection 403 for nginx, with the 429's fields
  ASSERT_EQ(rejected.status, 403) << rejected.body;
  EXPECT_EQ(rejected.Header("x-ratelimit-decision"), "reject");
  EXPECT_EQ(rejected.Header("ratelimit"), "");
  EXPECT_EQ(rejected.Header("ratelimit-policy"), "");
  EXPECT_EQ(rejected.Header("x-ratelimit-remaining"), "0");
  EXPECT_EQ(rejected.Header("x-ratelimit-reset"), rejected.Header("retry-after"));
}

// A shadow rule over its limit: every would-be rejection is either one
// "shadow_rejected" line (rule, redacted key, limit, would-be Retry-After) or
// counted as suppressed, and never more lines a second than configured.
TEST_F(PolicyOpsTest, ShadowRejectionsAreLoggedRedactedAndRateLimited) {
  auto t = Start(R"({"rules": [{"name": "calibrate", "mode": "shadow",
      "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 0.01, "burst": 1}}]})",
                 R"(, "admin": "127.0.0.1:0", "log": {"shadow_per_second": 3})");
  ASSERT_TRUE(t);
  const std::string key = "shadow-key-" + std::to_string(::getpid());
  const int kRequests = 40;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRequests; ++i) {
    auto r = Fetch(t->port(), "GET", "/v1/auth", {{"X-Original-URI", "/x"}, {"X-Api-Key", key}});
    ASSERT_EQ(r.status, 204) << r.body;  // shadow: never rejects
  }
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0)
          .count();
  const int would_reject = kRequests - 1;
  int lines = 0;
  double suppressed = -1;
  // Lines reach the file a moment after the answers: wait until each is accounted for.
  EXPECT_TRUE(WaitFor([&] {
    lines = CountLines(t->Log(), "\"msg\":\"shadow_rejected\"");
    auto m = Fetch(t->admin_port(), "GET", "/metrics");
    suppressed = Metric(m.body, "tollgate_shadow_logs_suppressed_total");
    return lines + suppressed == would_reject;
  })) << lines
      << " lines + " << suppressed << " suppressed != " << would_reject << "\n"
      << t->Log();
  EXPECT_GE(lines, 1);
  EXPECT_LE(lines, 3 * (seconds + 2));  // at most 3 in any one second
  EXPECT_GT(suppressed, 0);
  const std::string log = t->Log();
  EXPECT_EQ(log.find(key), std::string::npos) << "the key must be redacted";
  const size_t line = log.find("\"msg\":\"shadow_rejected\"");
  ASSERT_NE(line, std::string::npos);
  const std::string first = log.substr(line, log.find('\n', line) - line);
  for (const char* field :
       {"\"rule\":\"calibrate\"", "\"shadow\":\"configured\"", "\"key\":\"hmac:", "\"limit\":\"",
        "\"would_retry_after_s\":", "\"suppressed_before\":", "\"path\":\"/x\""}) {
    EXPECT_NE(first.find(field), std::string::npos) << field << " in " << first;
  }
  // /v1/top counts shadow rejections per rule as well.
  auto top = Fetch(t->admin_port(), "GET", "/v1/top");
  EXPECT_NE(top.body.find("\"rule\":\"calibrate\""), std::string::npos) << top.body;
}

// Gateway mode: the upstream answering 5xx trips the guard; the admin
// listener's /readyz, the admin view and metrics show it; clearing needs the admin token, is
// audit-logged, and the rule enforces again.
TEST_F(PolicyOpsTest, UpstreamErrorsTripTheGuardAndAnAdminClearsIt) {
  TestUpstream upstream;
  const std::string token = "admin-token-0123456789-" + std::to_string(::getpid());
  WriteFile(dir_ + "/admin.token", token + "\n");
  auto t = Start(R"({"rules": [{"name": "api", "limit_keys": ["header:x-api-key"],
      "algorithm_config": {"rps": 0.01, "burst": 2},
      "rollback": {"max_upstream_error_increase": 0.05, "min_requests": 10,
                   "window_seconds": 3600}}]})",
                 R"(, "admin": {"listen": "127.0.0.1:0", "token_file": ")" + dir_ +
                     R"(/admin.token"}, "gateway": {"upstream": "http://127.0.0.1:)" +
                     std::to_string(upstream.port()) + R"("})");
  ASSERT_TRUE(t);
  const Headers bearer = {{"Authorization", "Bearer " + token}};
  auto tripped = [&] {
    auto r = Fetch(t->admin_port(), "GET", "/readyz");
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() && !j["rolled_back"].empty();
  };
  // Each request its own key, so the limit never rejects: only errors count.
  for (int i = 0; i < 9; ++i) {
    auto r = Fetch(t->port(), "GET", "/status?code=503", {{"X-Api-Key", "k" + std::to_string(i)}});
    ASSERT_EQ(r.status, 503);
    ASSERT_FALSE(tripped()) << i;  // fewer answers than min_requests
  }
  ASSERT_EQ(Fetch(t->port(), "GET", "/status?code=502", {{"X-Api-Key", "k9"}}).status, 502);
  // The answer is recorded right after it is relayed: wait for it.
  ASSERT_TRUE(WaitFor(tripped)) << t->Log();
  json ready = json::parse(Fetch(t->admin_port(), "GET", "/readyz").body);
  EXPECT_EQ(ready["ready"], true) << ready;  // still deciding, in shadow
  EXPECT_EQ(ready["rolled_back"][0]["rule"], "api") << ready;
  EXPECT_EQ(ready["rolled_back"][0]["trigger"], "upstream_errors") << ready;
  auto m = Fetch(t->admin_port(), "GET", "/metrics", bearer);
  EXPECT_EQ(
      Metric(m.body, R"(tollgate_rollback_trips_total{rule="api",trigger="upstream_errors"})"), 1)
      << m.body;
  EXPECT_EQ(Metric(m.body, R"(tollgate_rule_rolled_back{rule="api"})"), 1);
  EXPECT_NE(t->Log().find("rollback guard tripped (upstream_errors)"), std::string::npos)
      << t->Log();
  // Shadow now: a third request on one key passes.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Fetch(t->port(), "GET", "/ok", {{"X-Api-Key", "same"}}).status, 200) << i;
  }

  // Clearing: admin listener only, token required, audit-logged.
  // The main listener of a gateway forwards the path: it clears nothing.
  (void)Fetch(t->port(), "POST", "/v1/rollback/clear?rule=api", bearer);
  EXPECT_TRUE(tripped());
  EXPECT_EQ(Fetch(t->admin_port(), "POST", "/v1/rollback/clear?rule=api").status, 401);
  EXPECT_EQ(Fetch(t->admin_port(), "GET", "/v1/rollback/clear?rule=api", bearer).status, 405);
  EXPECT_EQ(Fetch(t->admin_port(), "POST", "/v1/rollback/clear?rule=nope", bearer).status, 404);
  EXPECT_EQ(Fetch(t->admin_port(), "POST", "/v1/rollback/clear", bearer).status, 400);
  auto cleared = Fetch(t->admin_port(), "POST", "/v1/rollback/clear?rule=api", bearer);
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(json::parse(cleared.body)["was_tripped"], true);
  EXPECT_FALSE(tripped());
  EXPECT_TRUE(WaitFor([&] {
    return t->Log().find("\"msg\":\"rollback_cleared\"") != std::string::npos;
  })) << t->Log();
  const std::string log = t->Log();
  const size_t at = log.find("\"msg\":\"rollback_cleared\"");
  const std::string audit = log.substr(at, log.find('\n', at) - at);
  EXPECT_NE(audit.find("\"was_trigger\":\"upstream_errors\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"peer\":\"127.0.0.1\""), std::string::npos) << audit;
  // Enforcing again: "same" used its 2 tokens in shadow, so it is rejected now.
  EXPECT_EQ(Fetch(t->port(), "GET", "/ok", {{"X-Api-Key", "same"}}).status, 429);
  m = Fetch(t->admin_port(), "GET", "/metrics", bearer);
  EXPECT_EQ(Metric(m.body, R"(tollgate_rollback_clears_total{rule="api"})"), 1) << m.body;

  // An operator can trip it by hand too, and the admin view shows why.
  auto trip =
      Fetch(t->admin_port(), "POST", "/v1/rollback/trip?rule=api&reason=incident-7", bearer);
  ASSERT_EQ(trip.status, 200) << trip.body;
  json view = json::parse(Fetch(t->admin_port(), "GET", "/v1/rollback", bearer).body);
  ASSERT_EQ(view["rules"].size(), 1u) << view;
  EXPECT_EQ(view["rules"][0]["tripped"], true) << view;
  EXPECT_EQ(view["rules"][0]["trigger"], "admin") << view;
  EXPECT_NE(view["rules"][0]["reason"].get<std::string>().find("incident-7"), std::string::npos);
  EXPECT_EQ(view["rules"][0]["trips"]["upstream_errors"], 1) << view;
  EXPECT_EQ(view["scope"], "instance");
  EXPECT_EQ(Fetch(t->port(), "GET", "/ok", {{"X-Api-Key", "same"}}).status, 200);
}

// Gateway mode: an upstream slower than max_upstream_p99_ms (it sleeps
// 60 ms, the max is 20 ms: only a lower bound on time is assumed) trips the
// guard with the upstream-latency trigger once min_requests answers are in.
TEST_F(PolicyOpsTest, UpstreamLatencyAboveTheP99MaxTripsTheGuard) {
  TestUpstream upstream;
  auto t = Start(R"({"rules": [{"name": "api", "limit_keys": ["header:x-api-key"],
      "algorithm_config": {"rps": 1000000, "burst": 1000000},
      "rollback": {"max_upstream_p99_ms": 20, "min_requests": 3, "window_seconds": 3600}}]})",
                 R"(, "admin": "127.0.0.1:0", "gateway": {"upstream": "http://127.0.0.1:)" +
                     std::to_string(upstream.port()) + R"("})");
  ASSERT_TRUE(t);
  auto rolled_back = [&] {
    json j = json::parse(Fetch(t->admin_port(), "GET", "/readyz").body, nullptr, false);
    return j.is_object() ? j["rolled_back"] : json::array();
  };
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Fetch(t->port(), "GET", "/slow?ms=60", {{"X-Api-Key", "k"}}).status, 200);
    ASSERT_TRUE(rolled_back().empty()) << i;  // fewer answers than min_requests
  }
  ASSERT_EQ(Fetch(t->port(), "GET", "/slow?ms=60", {{"X-Api-Key", "k"}}).status, 200);
  ASSERT_TRUE(WaitFor([&] { return !rolled_back().empty(); })) << t->Log();
  EXPECT_EQ(rolled_back()[0]["trigger"], "upstream_latency_p99");
  auto m = Fetch(t->admin_port(), "GET", "/metrics");
  EXPECT_EQ(
      Metric(m.body, R"(tollgate_rollback_trips_total{rule="api",trigger="upstream_latency_p99"})"),
      1)
      << m.body;
  EXPECT_NE(t->Log().find("rollback guard tripped (upstream_latency_p99)"), std::string::npos)
      << t->Log();
}

// The latency trigger on the real clock: a p99 limit of 1 ns, which every
// decision exceeds, trips the guard once the window holds min_requests.
TEST_F(PolicyOpsTest, DecisionLatencyAboveTheP99MaxTripsTheGuard) {
  auto t = Start(R"({"rules": [{"name": "slow", "limit_keys": ["header:x-api-key"],
      "algorithm_config": {"rps": 1000000, "burst": 1000000},
      "rollback": {"max_p99_ms": 0.000001, "min_requests": 5, "window_seconds": 3600}}]})",
                 R"(, "admin": "127.0.0.1:0")");
  ASSERT_TRUE(t);
  auto auth = [&] {
    return Fetch(t->port(), "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Api-Key", "k"}});
  };
  for (int i = 0; i < 4; ++i) ASSERT_EQ(auth().status, 204);
  json ready = json::parse(Fetch(t->admin_port(), "GET", "/readyz").body);
  EXPECT_TRUE(ready["rolled_back"].empty()) << ready;
  ASSERT_EQ(auth().status, 204);
  ready = json::parse(Fetch(t->admin_port(), "GET", "/readyz").body);
  ASSERT_EQ(ready["rolled_back"].size(), 1u) << ready;
  EXPECT_EQ(ready["rolled_back"][0]["trigger"], "latency_p99") << ready;
}

}  // namespace
}  // namespace tollgate::testing
