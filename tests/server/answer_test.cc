// Soft limits and per-rule answers through the real tollgated (issue 34),
// over real sockets: its gateway in front of a real upstream, and /v1/auth
// and /v1/decide on the same main listener (decision_on_main):
//  - a soft rule beside a hard one on the same key: over the soft limit the
//    request still reaches the upstream and its answer says so
//    (X-RateLimit-Soft-Exceeded, RateLimit r=0), counted
//    outcome="soft_exceeded" and logged as soft_exceeded; the hard rule
//    refuses at its own limit without reaching the upstream;
//  - a rule answering 403 with its own header field and problem texts, on the
//    gateway, on /v1/auth (403 + X-RateLimit-Status for nginx to map) and in
//    /v1/decide's JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

// Warn at 2 a day, refuse at 4 a day per API key; the "plan" rule answers
// /paid refusals with 403, a link to the plans and its own texts.
constexpr std::string_view kPolicy = R"({"rules": [
  {"name": "paid", "limit_keys": ["header:x-api-key"], "match": {"path": {"prefix": "/paid"}},
   "algorithm": "token_bucket", "algorithm_config": {"count": 1, "period": "1h", "burst": 1},
   "response": {"status": 403, "headers": [{"name": "X-Upgrade", "value": "https://example.com/plans"}],
                "title": "Plan {rule} used up", "detail": "{limit} an hour; retry in {retry_after} s"}},
  {"name": "plan-soft", "limit_keys": ["header:x-api-key"], "soft": true,
   "algorithm": "token_bucket", "algorithm_config": {"count": 2, "period": "1d", "burst": 2}},
  {"name": "plan-hard", "limit_keys": ["header:x-api-key"],
   "algorithm": "token_bucket", "algorithm_config": {"count": 4, "period": "1d", "burst": 4}}
]})";

class AnswerE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    WriteFile(dir_ + "/policy.json", std::string(kPolicy));
    WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + dir_ + R"(/policy.json",
        "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 2,
        "retry_after_jitter": 0, "decision_on_main": true, "store": "local",
        "gateway": {"upstream": "http://127.0.0.1:)" +
                                            std::to_string(upstream_.port()) + R"("}})");
    std::filesystem::create_directories(dir_ + "/run");
    t_ = std::make_unique<Tollgated>(std::vector<std::string>{"--config", dir_ + "/tollgated.json"},
                                     dir_ + "/run");
    ASSERT_TRUE(t_->WaitStarted()) << "log: " << t_->Log() << " stdout: " << t_->Stdout();
  }
  std::string Key(const std::string& name) const { return name + "-" + std::to_string(::getpid()); }
  double Metric(const std::string& series) const {
    const std::string page = Fetch(t_->admin_port(), "GET", "/metrics").body;
    const size_t at = page.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::atof(page.c_str() + at + series.size() + 2);
  }
  // The first log line whose msg is `msg`, parsed (null when none yet).
  nlohmann::json LogLine(const std::string& msg) const {
    std::istringstream lines(t_->Log());
    std::string line;
    while (std::getline(lines, line)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("msg", "") == msg) return j;
    }
    return nullptr;
  }

  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  TestUpstream upstream_;
  std::unique_ptr<Tollgated> t_;
};

TEST_F(AnswerE2E, SoftBesideHardOnTheGateway) {
  const std::string key = Key("gw");
  for (int i = 1; i <= 2; ++i) {
    HttpResponse r = Fetch(t_->port(), "GET", "/api/items", {{"X-Api-Key", key}});
    ASSERT_EQ(r.status, 200) << i << " " << r.error << r.body;
    EXPECT_FALSE(r.Has("x-ratelimit-soft-exceeded")) << i;
    EXPECT_NE(r.Header("ratelimit").find("\"plan-soft\";r=" + std::to_string(2 - i)),
              std::string::npos)
        << r.Header("ratelimit");
  }
  // Over the soft limit: admitted (the upstream answers) and told.
  for (int i = 3; i <= 4; ++i) {
    HttpResponse r = Fetch(t_->port(), "GET", "/api/items", {{"X-Api-Key", key}});
    ASSERT_EQ(r.status, 200) << i << " " << r.body;
    EXPECT_EQ(r.Header("x-ratelimit-soft-exceeded"), "plan-soft");
    EXPECT_NE(r.Header("ratelimit").find("\"plan-soft\";r=0"), std::string::npos)
        << r.Header("ratelimit");
  }
  EXPECT_EQ(upstream_.requests(), 4);
  // The hard rule refuses the 5th without reaching the upstream.
  HttpResponse fifth = Fetch(t_->port(), "GET", "/api/items", {{"X-Api-Key", key}});
  EXPECT_EQ(fifth.status, 429) << fifth.body;
  EXPECT_EQ(upstream_.requests(), 4);
  EXPECT_NE(fifth.body.find("plan-hard"), std::string::npos) << fifth.body;
  // 3: the refused 5th request found the soft rule over too (counted like a shadow rule's).
  EXPECT_EQ(Metric(R"(tollgate_decisions_total{rule="plan-soft",outcome="soft_exceeded"})"), 3);
  EXPECT_EQ(Metric(R"(tollgate_decisions_total{rule="plan-soft",outcome="shadow_rejected"})"), 0);
  EXPECT_EQ(Metric(R"(tollgate_decisions_total{rule="plan-hard",outcome="rejected"})"), 1);
  // The shadow-style line, under its own name (the log is written as it happens).
  nlohmann::json line;
  ASSERT_TRUE(WaitFor([&] { return !(line = LogLine("soft_exceeded")).is_null(); }, 10s))
      << t_->Log();
  EXPECT_EQ(line["rule"], "plan-soft");
  EXPECT_EQ(line["shadow"], "soft");
  EXPECT_TRUE(LogLine("shadow_rejected").is_null()) << t_->Log();
}

TEST_F(AnswerE2E, SoftOnAuthIsAnAllowWithTheWarning) {
  const std::string key = Key("auth");
  for (int i = 1; i <= 4; ++i) {
    HttpResponse r = Fetch(t_->port(), "GET", "/v1/auth",
                           {{"X-Api-Key", key}, {"X-Original-URI", "/api/items"}});
    ASSERT_EQ(r.status, 204) << i << " " << r.body;
    EXPECT_EQ(r.Has("x-ratelimit-soft-exceeded"), i > 2) << i;
  }
  HttpResponse r =
      Fetch(t_->port(), "GET", "/v1/auth", {{"X-Api-Key", key}, {"X-Original-URI", "/api/items"}});
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.Header("x-ratelimit-decision"), "reject");
  EXPECT_EQ(r.Header("x-ratelimit-status"), "429");
  EXPECT_EQ(upstream_.requests(), 0);
}

TEST_F(AnswerE2E, ARulesOwnAnswerOnTheGatewayAuthAndDecide) {
  const std::string key = Key("paid");
  HttpResponse first = Fetch(t_->port(), "GET", "/paid/report", {{"X-Api-Key", key}});
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_FALSE(first.Has("x-upgrade"));
  HttpResponse r = Fetch(t_->port(), "GET", "/paid/report", {{"X-Api-Key", key}});
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.Header("x-upgrade"), "https://example.com/plans");
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  EXPECT_EQ(r.Header("retry-after"), "3600");
  EXPECT_EQ(upstream_.requests(), 1);
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << r.body;
  EXPECT_EQ(body["status"], 403);
  EXPECT_EQ(body["title"], "Plan paid used up");
  EXPECT_EQ(body["detail"], "1 an hour; retry in 3600 s");

  // /v1/auth: nginx passes only 401/403 through; the status the gateway
  // answered is in X-RateLimit-Status, the rule's field beside it.
  HttpResponse auth = Fetch(t_->port(), "GET", "/v1/auth",
                            {{"X-Api-Key", key}, {"X-Original-URI", "/paid/report"}});
  EXPECT_EQ(auth.status, 403);
  EXPECT_EQ(auth.Header("x-ratelimit-decision"), "reject");
  EXPECT_EQ(auth.Header("x-ratelimit-status"), "403");
  EXPECT_EQ(auth.Header("x-upgrade"), "https://example.com/plans");

  // /v1/decide reports the status and the fields the answer would carry.
  const nlohmann::json ask = {
      {"request", {{"path", "/paid/report"}, {"headers", {{"x-api-key", key}}}}}};
  HttpResponse d = Fetch(t_->port(), "POST", "/v1/decide", {}, ask.dump());
  ASSERT_EQ(d.status, 200) << d.body;
  const nlohmann::json decision = nlohmann::json::parse(d.body, nullptr, false);
  ASSERT_FALSE(decision.is_discarded()) << d.body;
  EXPECT_EQ(decision["allowed"], false);
  EXPECT_EQ(decision["status"], 403);
  EXPECT_EQ(decision["denied_rule"], "paid");
  EXPECT_EQ(decision["headers"]["X-Upgrade"], "https://example.com/plans");
  EXPECT_EQ(upstream_.requests(), 1);
}

}  // namespace
}  // namespace tollgate::testing
