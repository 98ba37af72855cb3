// The local store's state across restarts of the real tollgated (issue 36):
// a daily quota and a penalty block survive SIGTERM and a start, a corrupt
// state file is one log line and an empty start, a kill -9 loses at most the
// changes since the last periodic save.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A zone whose local time is near noon now, so that no test runs across the
// daily quota's midnight: Etc/GMT+N is UTC-N.
std::string NoonZone() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  const int n = utc.tm_hour - 12;  // -12 .. 11
  if (n == 0) return "Etc/GMT";
  return std::string("Etc/GMT") + (n > 0 ? "+" : "") + std::to_string(n);
}

class StateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    policy_ = dir_ + "/policy.json";
    state_ = dir_ + "/state";
    WriteFile(policy_, R"({"rules": [
      {"name": "daily", "limit_keys": ["header:x-api-key"], "algorithm": "fixed_window",
       "algorithm_config": {"count": 100, "calendar": "day", "time_zone": ")" +
                           NoonZone() + R"("}},
      {"name": "keyed", "limit_keys": ["header:x-user"], "algorithm": "token_bucket",
       "algorithm_config": {"count": 100, "period": "1h"}}
    ]})");
  }
  // The config with the state file; `interval_ms` 0: saved on drain only.
  void WriteConfig(int interval_ms) {
    WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + policy_ + R"(",
        "listen": "127.0.0.1:0", "admin": "127.0.0.1:0", "threads": 1,
        "store": {"url": "local", "local_state_file": ")" +
                                            state_ + R"(", "state_save_interval_ms": )" +
                                            std::to_string(interval_ms) + "}}");
  }
  // Each run logs into a directory of its own: the "started" line read is its own.
  std::unique_ptr<Tollgated> Start() {
    const std::string run = dir_ + "/run" + std::to_string(++runs_);
    std::filesystem::create_directories(run);
    auto t = std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", dir_ + "/tollgated.json"}, run);
    EXPECT_TRUE(t->WaitStarted()) << "log: " << t->Log() << " stdout: " << t->Stdout();
    return t;
  }
  static int Auth(const Tollgated& t, const std::string& header, const std::string& value) {
    return Fetch(t.port(), "GET", "/v1/auth", {{"X-Original-URI", "/api"}, {header, value}}).status;
  }
  // How many of `n` requests for the daily quota's key were allowed.
  static int Allowed(const Tollgated& t, int n) {
    int allowed = 0;
    for (int i = 0; i < n; ++i) allowed += Auth(t, "X-Api-Key", "k1") == 204 ? 1 : 0;
    return allowed;
  }
  // A sample of /metrics on the admin port, or -1.
  static double Metric(const Tollgated& t, const std::string& sample) {
    HttpResponse r = Fetch(t.admin_port(), "GET", "/metrics");
    std::istringstream lines(r.body);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
    }
    return -1;
  }
  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  std::string policy_;
  std::string state_;
  int runs_ = 0;
};

TEST_F(StateTest, ADailyQuotaKeepsItsRemainderAcrossSigtermAndStart) {
  WriteConfig(0);
  {
    auto t = Start();
    ASSERT_EQ(Allowed(*t, 90), 90);
    t->Signal(SIGTERM);
    ASSERT_EQ(t->WaitExit(10s), 0) << t->Log();
    EXPECT_NE(t->Log().find(R"("msg":"state_saved")"), std::string::npos) << t->Log();
  }
  auto t = Start();
  EXPECT_NE(t->Log().find(R"("msg":"state_loaded")"), std::string::npos) << t->Log();
  EXPECT_EQ(Metric(*t, R"(tollgate_state_load_entries{result="loaded"})"), 1);
  // 10 % of the day's quota is left, not 100 %.
  EXPECT_EQ(Allowed(*t, 11), 10) << t->Log();
}

TEST_F(StateTest, APenaltyBlockSurvivesARestart) {
  WriteConfig(0);
  {
    auto t = Start();
    ASSERT_EQ(Auth(*t, "X-User", "abuser"), 204);
    HttpResponse set =
        Fetch(t->admin_port(), "POST", "/v1/keys/set", {{"Content-Type", "application/json"}},
              R"({"rule": "keyed", "keys": {"header:x-user": "abuser"},
                                 "remaining": 0})");
    ASSERT_EQ(set.status, 200) << set.body;
    ASSERT_EQ(Auth(*t, "X-User", "abuser"), 403);
    t->Signal(SIGTERM);
    ASSERT_EQ(t->WaitExit(10s), 0) << t->Log();
  }
  auto t = Start();
  EXPECT_EQ(Auth(*t, "X-User", "abuser"), 403);
  EXPECT_EQ(Auth(*t, "X-User", "someone-else"), 204);
}

// As a reload would: a rule the policy no longer has loses its entries, the
// others keep theirs.
TEST_F(StateTest, EntriesOfARemovedRuleAreDropped) {
  WriteConfig(0);
  {
    auto t = Start();
    ASSERT_EQ(Auth(*t, "X-User", "u1"), 204);
    ASSERT_EQ(Allowed(*t, 5), 5);
    t->Signal(SIGTERM);
    ASSERT_EQ(t->WaitExit(10s), 0) << t->Log();
  }
  std::string policy = ReadAll(policy_);
  const size_t keyed = policy.find(R"(,
      {"name": "keyed")");
  ASSERT_NE(keyed, std::string::npos);
  policy.erase(keyed, policy.find('}', policy.find("period", keyed)) + 2 - keyed);
  WriteFile(policy_, policy);
  auto t = Start();
  EXPECT_EQ(Metric(*t, R"(tollgate_state_load_entries{result="loaded"})"), 1) << t->Log();
  EXPECT_EQ(Metric(*t, R"(tollgate_state_load_entries{result="dropped_rule"})"), 1);
  EXPECT_EQ(Allowed(*t, 96), 95);
}

TEST_F(StateTest, ACorruptStateFileIsOneLogLineAndAnEmptyStart) {
  WriteConfig(0);
  WriteFile(state_, "TGLSTATE this is not what a save writes");
  auto t = Start();
  const std::string log = t->Log();
  const size_t at = log.find(R"("msg":"state_load_failed")");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(R"("msg":"state_load_failed")", at + 1), std::string::npos);
  EXPECT_NE(log.find("starting with an empty local store"), std::string::npos) << log;
  EXPECT_EQ(Metric(*t, "tollgate_state_load_failed"), 1);
  EXPECT_EQ(Allowed(*t, 100), 100);
}

TEST_F(StateTest, AKillAfterAPeriodicSaveLosesAtMostTheChangesSinceIt) {
  WriteConfig(50);
  {
    auto t = Start();
    ASSERT_EQ(Allowed(*t, 30), 30);
    // Two more saves: the second began after the 30 requests were answered.
    const double saves = Metric(*t, R"(tollgate_state_saves_total{result="ok"})");
    ASSERT_GE(saves, 0);
    ASSERT_TRUE(WaitFor(
        [&] { return Metric(*t, R"(tollgate_state_saves_total{result="ok"})") >= saves + 2; },
        10s));
    ASSERT_EQ(Allowed(*t, 20), 20);  // saved or not, by the time of the kill
    t->Signal(SIGKILL);
    t->WaitExit(10s);
  }
  auto t = Start();
  const int left = Allowed(*t, 101);
  EXPECT_LE(left, 70);  // the 30 before the save were kept
  EXPECT_GE(left, 50);  // nothing counted twice
}

}  // namespace
}  // namespace tollgate::testing
