// Login protection through the real tollgated's gateway (issue 34): a rule
// that counts only failed logins (count_on ["401"]) and blocks the user for
// 15 minutes once refused (block_for), in front of a real upstream that
// answers 401 or 200, on the local store and on a real redis-server:
//  - successful logins never count; the 6th attempt after 5 failures and
//    every later one are refused without reaching the upstream, with
//    Retry-After to the block's end; another user is untouched;
//  - counted outcomes are exact under concurrency (charged at admission);
//  - the block holds across a restart of the local store (its state file)
//    and across two tollgated processes on one Redis.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#endif

namespace tollgate::testing {
namespace {

using namespace std::chrono_literals;

// At most 5 failed logins (401) per user in 15 minutes, then 15 minutes blocked.
constexpr std::string_view kLoginPolicy = R"({"rules": [
  {"name": "login", "limit_keys": ["header:x-user"], "algorithm": "token_bucket",
   "algorithm_config": {"count": 5, "period": "15m", "burst": 5},
   "count_on": ["401"], "block_for": "15m"}
]})";

class AbuseE2E : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    if (GetParam() == "redis") {
#if TOLLGATE_TEST_REDIS
      redis_ = RedisServer::Start();
      if (redis_.missing) GTEST_SKIP() << redis_.error;
      ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
      store_ = "\"" + redis_.server->url() + "\"";
#else
      GTEST_SKIP() << "the Redis store is not part of this build";
#endif
    } else {
      store_ = R"({"url": "local", "local_state_file": ")" + dir_ +
               R"(/state", "state_save_interval_ms": 0})";
    }
    WriteFile(dir_ + "/policy.json", std::string(kLoginPolicy));
    WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + dir_ + R"(/policy.json",
        "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 2,
        "retry_after_jitter": 0.5,
        "store": )" + store_ + R"(, "gateway": {"upstream": "http://127.0.0.1:)" +
                                            std::to_string(upstream_.port()) + R"("}})");
  }
  std::unique_ptr<Tollgated> Start() {
    const std::string run = dir_ + "/run" + std::to_string(++runs_);
    std::filesystem::create_directories(run);
    auto t = std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", dir_ + "/tollgated.json"}, run);
    EXPECT_TRUE(t->WaitStarted()) << "log: " << t->Log() << " stdout: " << t->Stdout();
    return t;
  }
  // One login attempt that the upstream answers `status` (when it gets it).
  static HttpResponse Login(const Tollgated& t, const std::string& user, int status) {
    return Fetch(t.port(), "POST", "/status?code=" + std::to_string(status), {{"X-User", user}});
  }
  static double Metric(const Tollgated& t, const std::string& series) {
    const std::string page = Fetch(t.admin_port(), "GET", "/metrics").body;
    const size_t at = page.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::atof(page.c_str() + at + series.size() + 2);
  }
  // Waits until `series` reads `value` (settlements land after the response).
  static bool WaitMetric(const Tollgated& t, const std::string& series, double value) {
    return WaitFor([&] { return Metric(t, series) == value; }, 10s);
  }
  std::string User(const std::string& name) const {
    return name + "-" + std::to_string(::getpid());
  }
  // Five failed logins for `user`, each answered 401 by the upstream.
  void FailFiveTimes(const Tollgated& t, const std::string& user) {
    for (int i = 0; i < 5; ++i) {
      HttpResponse r = Login(t, user, 401);
      ASSERT_EQ(r.status, 401) << i << " " << r.body;
    }
  }

  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  int runs_ = 0;
  TestUpstream upstream_;
  std::string store_;
#if TOLLGATE_TEST_REDIS
  RedisServer::StartResult redis_;
#endif
};

TEST_P(AbuseE2E, FiveFailuresBlockTheUserAndSuccessesNeverCount) {
  auto t = Start();
  ASSERT_TRUE(t);
  const std::string alice = User("alice"), bob = User("bob");
  // Right passwords, many more than the limit: never counted (each charge is
  // given back when the 200 comes; waited for, so none is in flight).
  for (int i = 0; i < 8; ++i) {
    HttpResponse r = Login(*t, alice, 200);
    ASSERT_EQ(r.status, 200) << i << " " << r.body;
    ASSERT_TRUE(
        WaitMetric(*t, "tollgate_refunds_total{rule=\"login\",outcome=\"not_counted\"}", i + 1));
  }
  FailFiveTimes(*t, alice);
  const int reached = upstream_.requests();
  EXPECT_EQ(reached, 13);
  // The 6th attempt, even with the right password: refused by tollgated,
  // and the user's box closes for 15 minutes (Retry-After: its end, no jitter).
  const auto closed_at = std::chrono::steady_clock::now();
  HttpResponse sixth = Login(*t, alice, 200);
  EXPECT_EQ(sixth.status, 429) << sixth.body;
  EXPECT_EQ(sixth.Header("retry-after"), "900");
  EXPECT_EQ(sixth.Header("x-ratelimit-reason"), "token_bucket_exceeded; policy=\"login\"");
  // Every later attempt is refused as blocked, Retry-After counting down to the same end.
  for (int i = 0; i < 3; ++i) {
    HttpResponse r = Login(*t, alice, 200);
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - closed_at).count();
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(r.Header("x-ratelimit-reason"), "blocked; policy=\"login\"");
    const int retry = std::atoi(r.Header("retry-after").c_str());
    EXPECT_LE(retry, 900);
    EXPECT_GE(retry, static_cast<int>(900 - elapsed - 1));
    EXPECT_NE(r.body.find("blocked by policy 'login' (block_for 15m)"), std::string::npos)
        << r.body;
  }
  EXPECT_EQ(upstream_.requests(), reached);  // none of them reached the upstream
  // Another user is untouched.
  EXPECT_EQ(Login(*t, bob, 401).status, 401);
  EXPECT_EQ(Login(*t, bob, 200).status, 200);
  EXPECT_EQ(Metric(*t, "tollgate_decisions_total{rule=\"login\",outcome=\"blocked\"}"), 3);
  EXPECT_EQ(Metric(*t, "tollgate_decisions_total{rule=\"login\",outcome=\"rejected\"}"), 1);
}

// Twenty failing attempts at once for one user: exactly five reach the
// upstream (each is charged when admitted; only the outcome decides whether
// the charge stays), the others are refused.
TEST_P(AbuseE2E, CountedOutcomesAreExactUnderConcurrency) {
  auto t = Start();
  ASSERT_TRUE(t);
  const std::string user = User("carol");
  std::atomic<int> answered401{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&] {
      HttpResponse r = Login(*t, user, 401);
      (r.status == 401 ? answered401 : r.status == 429 ? refused : other).fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(answered401.load(), 5);
  EXPECT_EQ(refused.load(), 15);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(upstream_.requests(), 5);
}

TEST_P(AbuseE2E, TheBlockHoldsAcrossARestartOrAnotherInstance) {
  const std::string alice = User("alice"), bob = User("bob");
  auto first = Start();
  ASSERT_TRUE(first);
  FailFiveTimes(*first, alice);
  ASSERT_EQ(Login(*first, alice, 200).status, 429);  // closes the box
  std::unique_ptr<Tollgated> second;
  if (GetParam() == "local") {
    // The state file is written on the way out and read on the way in.
    first->Signal(SIGTERM);
    ASSERT_EQ(first->WaitExit(30s), 0) << first->Log();
    second = Start();
  } else {
    second = Start();  // a second process on the same redis-server, the first still up
  }
  ASSERT_TRUE(second);
  HttpResponse r = Login(*second, alice, 200);
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.Header("x-ratelimit-reason"), "blocked; policy=\"login\"");
  EXPECT_EQ(Login(*second, bob, 200).status, 200);
  EXPECT_EQ(upstream_.requests(), 6);  // five failures and bob's login
}

// `tollgate key get` shows the block's time left; `key reset` lifts it
// together with the bucket (the admin API both use).
TEST_P(AbuseE2E, KeyResetLiftsTheBlock) {
  auto t = Start();
  ASSERT_TRUE(t);
  const std::string alice = User("alice");
  FailFiveTimes(*t, alice);
  ASSERT_EQ(Login(*t, alice, 200).status, 429);  // closes the box
  const std::string body = R"({"rule": "login", "values": [")" + alice + R"("]})";
  const Headers kJson = {{"Content-Type", "application/json"}};
  HttpResponse got = Fetch(t->admin_port(), "POST", "/v1/keys/get", kJson, body);
  ASSERT_EQ(got.status, 200) << got.body;
  const size_t at = got.body.find("\"blocked_ms\":");
  ASSERT_NE(at, std::string::npos) << got.body;
  const long blocked_ms = std::atol(got.body.c_str() + at + 13);
  EXPECT_GT(blocked_ms, 890'000) << got.body;
  EXPECT_LE(blocked_ms, 900'000) << got.body;
  ASSERT_EQ(Login(*t, alice, 200).status, 429);
  HttpResponse reset = Fetch(t->admin_port(), "POST", "/v1/keys/reset", kJson, body);
  ASSERT_EQ(reset.status, 200) << reset.body;
  EXPECT_NE(reset.body.find("\"blocked_ms\":"), std::string::npos) << reset.body;
  HttpResponse after = Login(*t, alice, 200);
  EXPECT_EQ(after.status, 200) << after.body;
}

INSTANTIATE_TEST_SUITE_P(Stores, AbuseE2E, ::testing::Values("local", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tollgate::testing
