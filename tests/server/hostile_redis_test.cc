// tollgated (the real binary) against a hostile Redis: a fake server that
// answers with wrong types, absurd lengths, deep nesting, half replies,
// endless bulk strings, impossible slot ranges or nothing. Whatever it does,
// every decision finishes through the failure mode (open: allowed and marked
// unenforced; closed: 503), /readyz reports the store unhealthy (and not
// ready under closed), and SIGTERM ends the process within its drain time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"
#include "testing/hostile_redis.h"

namespace tollgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using Reply = HostileRedis::Reply;

constexpr auto kStoreTimeout = 300ms;
constexpr auto kDrain = 1000ms;

struct Case {
  std::string name;
  bool cluster = false;
  HostileRedis::Options redis;
  std::string failure_mode;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " (" << c.failure_mode << ")"; }

std::string PrintCase(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

class HostileRedisE2E : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
  }
  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
};

TEST_P(HostileRedisE2E, DecisionsFollowTheFailureModeReadyzAndSigtermHold) {
  const Case& c = GetParam();
  std::string error;
  auto redis = HostileRedis::Start(c.redis, &error);
  ASSERT_TRUE(redis) << error;
  const std::string policy = dir_ + "/policy.json";
  WriteFile(policy, GenerousPolicy(1000000));
  const std::string url = (c.cluster ? "redis-cluster://127.0.0.1:" : "redis://127.0.0.1:") +
                          std::to_string(redis->port());
  const json config = {
      {"policy", policy},
      {"listen", "127.0.0.1:0"},
      {"admin", "127.0.0.1:0"},
      {"threads", 2},
      {"store",
       {{"url", url}, {"failure_mode", c.failure_mode}, {"timeout_ms", kStoreTimeout.count()}}},
      {"http", {{"drain_timeout_ms", kDrain.count()}}}};
  WriteFile(dir_ + "/tollgated.json", config.dump());
  Tollgated t({"--config", dir_ + "/tollgated.json"}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << t.Log();

  // Each decision comes back (the connection's timeout bounds the wait,
  // scaled for a loaded machine) with the failure mode's answer.
  const bool open = c.failure_mode == "open";
  // Enough of them to open the circuit breaker (5 consecutive failures).
  for (int i = 0; i < 8; ++i) {
    HttpConnection conn(t.port(), kStoreTimeout + 5s);
    ASSERT_TRUE(conn.connected());
    json body = {{"items", {{{"rule", "keyed"}, {"key", "user-" + std::to_string(i)}}}}};
    const HttpResponse r = conn.Request("POST", "/v1/decide", {}, body.dump());
    ASSERT_EQ(r.status, 200) << "decision " << i << ": " << r.body << "\nlog: " << t.Log();
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j.value("allowed", !open), open) << r.body;
    EXPECT_EQ(j.value("status", 0), open ? 200 : 503) << r.body;
    if (open) {
      EXPECT_FALSE(j.value("enforced", true)) << r.body;
    }
  }

  // The hostile server was really asked (past the handshake when it answers it).
  EXPECT_GT(redis->accepted(), 0u);
  // A script call (a decision's EVALSHA or the fleet registry's EVAL) reaches it, though not
  // always within the eight decisions above: when the fleet's first read got the hostile reply
  // just before them, they fail fast while the connection is re-established.
  if (c.redis.answer_script_load) {
    EXPECT_TRUE(WaitFor(
        [&] {
          const auto commands = redis->commands();
          return std::any_of(commands.begin(), commands.end(),
                             [](const std::string& cmd) { return cmd.starts_with("EVAL"); });
        },
        5s))
        << "no script call reached the server";
  }

  // /readyz: the store is not healthy; not ready when closed (the breaker is
  // open; a half-open probe may flip it back for a moment, hence the wait).
  json ready;
  EXPECT_TRUE(WaitFor([&] {
    const HttpResponse r = Fetch(t.admin_port(), "GET", "/readyz");
    ready = json::parse(r.body, nullptr, false);
    return ready.is_object() && !ready.value("store_healthy", true) &&
           r.status == (open ? 200 : 503);
  })) << ready.dump();

  // SIGTERM ends it within the drain time (plus the process's own shutdown,
  // scaled), whatever the store is doing.
  t.Signal(SIGTERM);
  EXPECT_EQ(t.WaitExit(kDrain + 3s), 0) << t.Log();
}

HostileRedis::Options Replies(Reply reply, bool answer_script_load = false) {
  HostileRedis::Options o;
  o.reply = reply;
  o.answer_script_load = answer_script_load;
  return o;
}

// Cluster nodes whose topology is sound but whose answers are not.
HostileRedis::Options SoundTopology(Reply reply) {
  HostileRedis::Options o = Replies(reply, true);
  o.topology_override = true;
  o.topology = Reply::kValidTopology;
  return o;
}

std::vector<Case> Cases() {
  const std::pair<const char*, Reply> replies[] = {{"WrongType", Reply::kWrongType},
                                                   {"HugeArray", Reply::kHugeArray},
                                                   {"NegativeLength", Reply::kNegativeLength},
                                                   {"DeepNesting", Reply::kDeepNesting},
                                                   {"Partial", Reply::kPartial},
                                                   {"EndlessBulk", Reply::kEndlessBulk},
                                                   {"Silence", Reply::kSilence}};
  std::vector<Case> cases;
  int n = 0;
  // Failure modes alternate so that both meet every kind of store.
  auto mode = [&n] { return n++ % 2 ? "closed" : "open"; };
  for (const auto& [name, reply] : replies) {
    cases.push_back({std::string("Standalone") + name, false, Replies(reply), mode()});
    cases.push_back(
        {std::string("StandaloneAfterScriptLoad") + name, false, Replies(reply, true), mode()});
    cases.push_back({std::string("ClusterTopology") + name, true, Replies(reply), mode()});
    cases.push_back({std::string("ClusterNode") + name, true, SoundTopology(reply), mode()});
  }
  cases.push_back({"ClusterSlotRangeToInt64Max", true, Replies(Reply::kHugeSlotRange), "open"});
  cases.push_back(
      {"ClusterSlotRangeToInt64MaxClosed", true, Replies(Reply::kHugeSlotRange), "closed"});
  cases.push_back({"ClusterNegativeSlotRange", true, Replies(Reply::kNegativeSlotRange), "open"});
  cases.push_back(
      {"ClusterNegativeSlotRangeClosed", true, Replies(Reply::kNegativeSlotRange), "closed"});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Replies, HostileRedisE2E, ::testing::ValuesIn(Cases()), PrintCase);

}  // namespace
}  // namespace tollgate::testing
