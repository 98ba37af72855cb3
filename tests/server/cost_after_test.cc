// Cost after the response and refunds through tollgated's gateway, over real
// sockets, on the local store and on a real redis-server: an upstream reports
// the tokens a response cost in a header or in the trailer of a chunked body;
// a big response drives the key into debt and the next request gets 429 with a
// Retry-After matching the debt; 5xx answers are refunded exactly once.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "testing/test_paths.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#endif

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

std::string ReadExample(const std::string& name) {
  std::ifstream in(tollgate::testing::SourcePathOf("examples/policies/" + name));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value of the first sample `series` (name and labels) in a metrics page, or -1.
double Sample(const std::string& page, const std::string& series) {
  const size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::atof(page.c_str() + at + series.size() + 2);
}

class CostAfterE2E : public ::testing::TestWithParam<std::string> {
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

  std::unique_ptr<TestServer> Start(const std::string& policy) {
    server::ServerConfig c = TestServer::DefaultConfig();
    c.store = store_;
    c.upstream = "http://127.0.0.1:" + std::to_string(upstream_.port());
    c.retry_after_jitter = 0;  // Retry-After is compared with the debt
    std::string error;
    auto s = TestServer::Start(std::move(c), policy, &error);
    EXPECT_TRUE(s != nullptr) << error;
    return s;
  }

  // Waits until `series` reads `value` on the admin listener's /metrics
  // (settlements land after the response was sent).
  bool WaitForSample(const TestServer& s, const std::string& series, double value) {
    return WaitFor(
        [&] { return Sample(Fetch(s.admin_port, "GET", "/metrics").body, series) == value; }, 10s);
  }

  std::string Key(const std::string& suffix) const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->name()) + "-" + std::to_string(::getpid()) + "-" + suffix;
  }

  TestUpstream upstream_;
  std::string store_ = "local";
#if TOLLGATE_TEST_REDIS
  RedisServer::StartResult redis_;
#endif
};

// The example's llm-tokens rule: 100000 tokens an hour (one per 36 ms), burst
// 20000. A response of 30000 tokens leaves 10000 in debt: a request of 1
// token fits again after 10001 tokens refilled, 360.036 s after the charge.
TEST_P(CostAfterE2E, BigResponseDrivesTheKeyIntoDebtThatRetryAfterReports) {
  auto s = Start(ReadExample("llm-tokens.json"));
  ASSERT_TRUE(s);
  int settlements = 0;
  for (const std::string path : {"/tokens?n=30000", "/tokens-trailer?n=30000"}) {
    SCOPED_TRACE(path);
    const std::string key = Key(path.substr(1, 8));
    HttpConnection c(s->port);
    const auto started = std::chrono::steady_clock::now();
    auto r = c.Request("GET", path, {{"X-Api-Key", key}});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_TRUE(
        WaitForSample(*s, "tollgate_settlements_total{rule=\"llm-tokens\"}", ++settlements));
    auto denied = c.Request("GET", "/tokens?n=1", {{"X-Api-Key", key}});
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ASSERT_TRUE(denied.ok) << denied.error;
    ASSERT_EQ(denied.status, 429) << denied.body;
    EXPECT_NE(denied.body.find("llm-tokens"), std::string::npos) << denied.body;
    const int retry = std::atoi(denied.Header("retry-after").c_str());
    // ceil(360.036 - the time since the charge), which lies within `elapsed`.
    EXPECT_LE(retry, 361);
    EXPECT_GE(retry, static_cast<int>(std::floor(360.036 - elapsed)));
    EXPECT_EQ(upstream_.requests(), settlements);  // the denied request never went upstream
  }
  // The header of the trailer's response said 0: the trailer's 30000 was charged.
  const std::string m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_EQ(Sample(m, "tollgate_settled_cost_total{rule=\"llm-tokens\"}"), 2 * 29999) << m;
  EXPECT_EQ(Sample(m, "tollgate_response_cost_invalid_total{rule=\"llm-tokens\"}"), 0) << m;
}

TEST_P(CostAfterE2E, MissingOrHostileCostChargesTheDefaultAndIsCounted) {
  auto s = Start(ReadExample("llm-tokens.json"));
  ASSERT_TRUE(s);
  const std::string key = Key("k");
  HttpConnection c(s->port);
  // No x-llm-tokens at all, then a value that is no integer: 500 each (default_cost).
  for (const std::string path : {"/status?code=200", "/tokens?n=-5", "/tokens?n=1e9"}) {
    auto r = c.Request("GET", path, {{"X-Api-Key", key}});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200) << r.body;
  }
  ASSERT_TRUE(WaitForSample(*s, "tollgate_settlements_total{rule=\"llm-tokens\"}", 3));
  const std::string m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_EQ(Sample(m, "tollgate_response_cost_invalid_total{rule=\"llm-tokens\"}"), 3) << m;
  EXPECT_EQ(Sample(m, "tollgate_settled_cost_total{rule=\"llm-tokens\"}"), 3 * 499) << m;
}

// A fixed-cost rule that refunds 5xx: burst 3, one token per 100 s. Six 503s
// all reach the upstream (each charge refunded once), then three 200s do and
// the fourth is refused: the refunds gave back exactly what was charged.
TEST_P(CostAfterE2E, FailedUpstreamAnswersAreRefundedExactlyOnce) {
  auto s = Start(R"({"rules": [
    {"name": "refunded", "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
     "algorithm_config": {"count": 1, "period": "100s", "burst": 3}, "refund_on": ["5xx"]},
    {"name": "llm", "group": "tokens", "limit_keys": ["header:x-api-key"],
     "algorithm": "token_bucket",
     "algorithm_config": {"count": 1000, "period": "100000s", "burst": 1000,
                          "cost_source": "response_header:x-llm-tokens"},
     "refund_on": ["503"]}
  ]})");
  ASSERT_TRUE(s);
  const std::string key = Key("k");
  HttpConnection c(s->port);
  for (int i = 0; i < 6; ++i) {
    auto r = c.Request("GET", "/tokens?n=900&status=503", {{"X-Api-Key", key}});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 503) << i << r.body;
    // Each settlement lands before the next decision (the store is remote).
    ASSERT_TRUE(
        WaitForSample(*s, "tollgate_refunds_total{rule=\"refunded\",outcome=\"5xx\"}", i + 1));
  }
  for (int i = 0; i < 3; ++i) {
    auto r = c.Request("GET", "/status?code=200", {{"X-Api-Key", key}});
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.status, 200) << i << r.body;
  }
  ASSERT_TRUE(WaitForSample(*s, "tollgate_settlements_total{rule=\"refunded\"}", 9));
  auto denied = c.Request("GET", "/status?code=200", {{"X-Api-Key", key}});
  ASSERT_TRUE(denied.ok) << denied.error;
  EXPECT_EQ(denied.status, 429) << denied.body;
  const std::string m = Fetch(s->admin_port, "GET", "/metrics").body;
  EXPECT_EQ(Sample(m, "tollgate_refunds_total{rule=\"refunded\",outcome=\"5xx\"}"), 6) << m;
  // The 503s' 900 tokens were refunded by "503", never charged.
  EXPECT_EQ(Sample(m, "tollgate_refunds_total{rule=\"llm\",outcome=\"503\"}"), 6) << m;
  EXPECT_EQ(Sample(m, "tollgate_settled_cost_total{rule=\"llm\"}"), 0) << m;
  EXPECT_EQ(upstream_.requests(), 9);
}

INSTANTIATE_TEST_SUITE_P(Stores, CostAfterE2E, ::testing::Values("local", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tollgate::testing
