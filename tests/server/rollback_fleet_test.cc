// The rollback guard shared across a fleet (issue 18): tollgated processes on
// one real redis-server. A trip on one instance puts the rule in shadow on the
// others, an operator's clear on any instance clears every one, a new
// instance starts with the fleet's trips, a garbage record in the hash is
// counted and ignored, and store.share_rollback: false keeps the guard per
// instance.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/redis_server.h"
#include "testing/scoped_temp_dir.h"
#include "testing/timing.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;

constexpr const char* kPolicy = R"({"rules": [{"name": "api", "limit_keys": ["header:x-api-key"],
    "algorithm_config": {"rps": 0.001, "burst": 1},
    "rollback": {"max_reject_ratio": 0.5, "min_requests": 4, "window_seconds": 3600}}]})";

class RollbackFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
  }

  // One instance in its own directory (logs), on `redis`, admin with a token.
  std::unique_ptr<Tollgated> Start(const RedisServer& redis, const std::string& name,
                                   bool share = true) {
    const std::string dir = temp_.path() + "/" + name;
    EXPECT_EQ(::mkdir(dir.c_str(), 0700), 0);
    WriteFile(dir + "/policy.json", kPolicy);
    WriteFile(dir + "/admin.token", token_ + "\n");
    WriteFile(dir + "/tollgated.json", R"({"policy": ")" + dir + R"(/policy.json",
        "listen": "127.0.0.1:0", "threads": 1,
        "admin": {"listen": "127.0.0.1:0", "token_file": ")" +
                                           dir +
                                           R"(/admin.token"},
        "store": {"url": ")" + redis.url() +
                                           R"(", "rollback_sync_ms": 50,
                  "share_rollback": )" + (share ? "true" : "false") +
                                           "}}");
    auto t = std::make_unique<Tollgated>(
        std::vector<std::string>{"--config", dir + "/tollgated.json"}, dir);
    if (!t->WaitStarted()) {
      ADD_FAILURE() << name << " log: " << t->Log() << " stdout: " << t->Stdout();
      return nullptr;
    }
    return t;
  }
  // /v1/auth on `key`: 204 allowed, 403 rejected (what nginx's auth_request understands).
  int Auth(Tollgated& t, const std::string& key) {
    return Fetch(t.port(), "GET", "/v1/auth", {{"X-Original-URI", "/"}, {"X-Api-Key", key}}).status;
  }
  json View(Tollgated& t) {
    return json::parse(Fetch(t.admin_port(), "GET", "/v1/rollback", Bearer()).body, nullptr, false);
  }
  // The rule's entry of the view, or null.
  json Api(Tollgated& t) {
    json v = View(t);
    if (!v.is_object() || !v["rules"].is_array()) return nullptr;
    for (const json& r : v["rules"]) {
      if (r.value("rule", "") == "api") return r;
    }
    return nullptr;
  }
  bool Tripped(Tollgated& t) {
    json r = Api(t);
    return r.is_object() && r.value("tripped", false);
  }
  Headers Bearer() const { return {{"Authorization", "Bearer " + token_}}; }
  static double Metric(const std::string& body, const std::string& series) {
    size_t at = body.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::atof(body.c_str() + at + series.size() + 2);
  }

  ScopedTempDir temp_;
  const std::string token_ = "fleet-token-0123456789-" + std::to_string(::getpid());
};

TEST_F(RollbackFleetTest, ATripOnOneInstanceIsShadowEverywhereAndAClearAnywhereClearsAll) {
  TOLLGATE_START_REDIS(redis);
  auto a = Start(redis, "a");
  auto b = Start(redis, "b");
  ASSERT_TRUE(a && b);
  json view = View(*a);
  ASSERT_EQ(view["scope"], "fleet") << view;
  EXPECT_EQ(view["fleet"]["key"], "tg:{rollback}") << view;
  const std::string a_id = view["fleet"]["instance"];

  // A sees 1 allowed and 3 rejected of 4: over 0.5 at the 4th, tripped there.
  EXPECT_EQ(Auth(*a, "hot"), 204);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Auth(*a, "hot"), 403) << i;
  ASSERT_TRUE(Tripped(*a)) << View(*a);
  // B never saw a rejection of its own, yet it goes to shadow: "hot"'s
  // bucket (shared in Redis) is empty, and B lets it through.
  ASSERT_TRUE(WaitFor([&] { return Tripped(*b); })) << View(*b) << b->Log();
  json api = Api(*b);
  EXPECT_EQ(api["trigger"], "reject_ratio") << api;
  EXPECT_EQ(api["origin"], a_id) << api;
  EXPECT_EQ(api["trips"]["reject_ratio"], 0) << api;  // not B's own trip
  EXPECT_EQ(api["adopted"]["trips"], 1) << api;
  EXPECT_EQ(Auth(*b, "hot"), 204);
  auto m = Fetch(b->admin_port(), "GET", "/metrics", Bearer());
  EXPECT_EQ(Metric(m.body, R"(tollgate_rollback_adopted_total{rule="api",transition="trip"})"), 1)
      << m.body;
  EXPECT_EQ(Metric(m.body, R"(tollgate_rule_rolled_back{rule="api"})"), 1);
  EXPECT_GE(Metric(m.body, R"(tollgate_rollback_fleet_reads_total{result="ok"})"), 1);
  const std::string b_log = b->Log();
  const size_t at = b_log.find("\"msg\":\"rollback_adopted\"");
  ASSERT_NE(at, std::string::npos) << b_log;
  EXPECT_NE(b_log.find(a_id, at), std::string::npos) << b_log;
  // The fleet's record in Redis: one line a rule, parseable, tripped by A.
  const std::string record = redis.Command({"HGET", "tg:{rollback}", "api"});
  EXPECT_NE(record.find(" tripped "), std::string::npos) << record;
  EXPECT_NE(record.find(a_id), std::string::npos) << record;

  // An operator clears on B: the answer says the fleet has it, and A enforces again.
  auto cleared = Fetch(b->admin_port(), "POST", "/v1/rollback/clear?rule=api", Bearer());
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  json answer = json::parse(cleared.body);
  EXPECT_EQ(answer["scope"], "fleet");
  EXPECT_EQ(answer["fleet"]["published"], true) << answer;
  EXPECT_FALSE(Tripped(*b));
  ASSERT_TRUE(WaitFor([&] { return !Tripped(*a); })) << View(*a) << a->Log();
  EXPECT_EQ(Auth(*a, "hot"), 403);  // the bucket is still empty, and enforced again
  EXPECT_EQ(Api(*a)["adopted"]["clears"], 1);
  const std::string audit_log = b->Log();
  const size_t audit = audit_log.find("\"msg\":\"rollback_cleared\"");
  ASSERT_NE(audit, std::string::npos) << audit_log;
  EXPECT_NE(audit_log.find("\"published\":true", audit), std::string::npos) << audit_log;

  // An operator's trip on A, then a new instance: it starts in shadow, its
  // first request already (the fleet was read before it served).
  auto trip = Fetch(a->admin_port(), "POST", "/v1/rollback/trip?rule=api&reason=INC-42", Bearer());
  ASSERT_EQ(trip.status, 200) << trip.body;
  EXPECT_EQ(json::parse(trip.body)["fleet"]["published"], true) << trip.body;
  auto c = Start(redis, "c");
  ASSERT_TRUE(c);
  EXPECT_EQ(Auth(*c, "hot"), 204);
  api = Api(*c);
  ASSERT_TRUE(api.is_object()) << View(*c);
  EXPECT_EQ(api["tripped"], true) << api;
  EXPECT_EQ(api["trigger"], "admin") << api;
  EXPECT_NE(api["reason"].get<std::string>().find("INC-42"), std::string::npos) << api;
  ASSERT_TRUE(WaitFor([&] { return Tripped(*b); }));

  // A record nobody can read: counted, skipped, the instances go on.
  ASSERT_EQ(redis.Command({"HSET", "tg:{rollback}", "other", "7 1 tripped nothex admin o\n"}), "1");
  ASSERT_TRUE(WaitFor([&] {
    auto metrics = Fetch(c->admin_port(), "GET", "/metrics", Bearer());
    return Metric(metrics.body, "tollgate_rollback_fleet_bad_records_total") >= 1;
  }));
  EXPECT_TRUE(Tripped(*c));
  EXPECT_EQ(Fetch(c->port(), "GET", "/healthz").status, 200);
  EXPECT_NE(View(*c)["fleet"]["last_error"].get<std::string>().find("other"), std::string::npos);
}

TEST_F(RollbackFleetTest, ShareRollbackFalseKeepsTheGuardPerInstance) {
  TOLLGATE_START_REDIS(redis);
  auto a = Start(redis, "a", false);
  auto b = Start(redis, "b", false);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(View(*a)["scope"], "instance");
  EXPECT_EQ(Auth(*a, "hot"), 204);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Auth(*a, "hot"), 403) << i;
  ASSERT_TRUE(Tripped(*a));
  EXPECT_EQ(redis.Command({"EXISTS", "tg:{rollback}"}), "0");
  // B decides on its own guard: "hot" is rejected there.
  EXPECT_EQ(Auth(*b, "hot"), 403);
  EXPECT_FALSE(Tripped(*b));
}

}  // namespace
}  // namespace tollgate::testing
