// Reload under concurrent decisions: every decision sees one whole policy
// (never a mix), and no decision is lost (the shared bucket is charged exactly
// once per allowed decision). Runs under TSan (label concurrency).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "policy_test_util.h"

namespace tollgate {
namespace {

// Both policies hold the "common" rule unchanged plus two rules of their own.
constexpr std::string_view kPolicyA = R"({"rules": [
  {"name": "common", "limit_keys": ["const:all"], "algorithm_config": {"rps": 1, "burst": 1000000}},
  {"name": "a1", "group": "a1", "limit_keys": ["header:k"], "algorithm_config": {"rps": 1, "burst": 1000000}},
  {"name": "a2", "group": "a2", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1000000}}]})";
constexpr std::string_view kPolicyB = R"({"rules": [
  {"name": "common", "limit_keys": ["const:all"], "algorithm_config": {"rps": 1, "burst": 1000000}},
  {"name": "b1", "group": "b1", "limit_keys": ["header:k"], "algorithm_config": {"rps": 2, "burst": 1000000}},
  {"name": "b2", "group": "b2", "limit_keys": ["ip"], "algorithm_config": {"rps": 2, "burst": 1000000}}]})";

TEST(ReloadConcurrency, NoTornPolicyNoLostDecision) {
  testing::Harness h(kPolicyA);
  constexpr int kThreads = 4;
  constexpr int kChecksPerThread = 3000;
  std::atomic<int> allowed{0};
  std::atomic<int> torn{0};
  std::atomic<int> finished{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      testing::TestRequest r;
      r.Peer("192.0.2." + std::to_string(t + 1)).Header("k", "key" + std::to_string(t));
      for (int i = 0; i < kChecksPerThread; ++i) {
        CheckOutcome o = h.Check(r);
        if (o.allowed()) allowed.fetch_add(1);
        const bool is_a = o.rules.size() == 3 && o.rules[0].rule == "common" &&
                          o.rules[1].rule == "a1" && o.rules[2].rule == "a2";
        const bool is_b = o.rules.size() == 3 && o.rules[0].rule == "common" &&
                          o.rules[1].rule == "b1" && o.rules[2].rule == "b2";
        if (!is_a && !is_b) torn.fetch_add(1);
      }
      finished.fetch_add(1);
    });
  }
  // Reload back and forth until every worker is done (bounded by their work).
  int reloads = 0;
  while (finished.load() < kThreads) {
    ASSERT_TRUE(h.policies->ReloadFromText(reloads % 2 == 0 ? kPolicyB : kPolicyA).empty());
    ++reloads;
    if (reloads % 8 == 0) {
      // A bad reload in between never disturbs anyone.
      ASSERT_FALSE(h.policies->ReloadFromText("{\"rules\": [1]}").empty());
    }
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(allowed.load(), kThreads * kChecksPerThread);
  EXPECT_GT(reloads, 0);
  // The unchanged "common" rule kept its bucket across every reload: charged once per decision.
  testing::TestRequest probe;
  CheckOutcome e = h.enforcer->Explain(probe.View());
  ASSERT_FALSE(e.rules.empty());
  EXPECT_EQ(e.rules[0].rule, "common");
  EXPECT_EQ(e.rules[0].decision.remaining, 1000000 - kThreads * kChecksPerThread);
  // Counters survive reloads too.
  uint64_t common_allowed = 0;
  for (const auto& c : h.enforcer->Counters()) {
    if (c.rule == "common") common_allowed = c.allowed;
  }
  EXPECT_EQ(common_allowed, static_cast<uint64_t>(kThreads * kChecksPerThread));
}

}  // namespace
}  // namespace tollgate
