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

// The request path reads the policy and the Enforcer's binding from per-thread caches (issue 32:
// no shared lock per decision). A thread that decided before a reload decides with the new policy
// on its very next decision, whichever thread reloaded.
TEST(ReloadConcurrency, AThreadsCachedPolicyGivesWayToTheNextSwap) {
  testing::Harness h(kPolicyA);
  testing::TestRequest r;
  r.Peer("192.0.2.1").Header("k", "key");
  auto rules_seen = [&] {
    std::string seen;
    std::thread([&] {  // a worker of its own each time: its cache starts empty
      for (const RuleOutcome& o : h.Check(r).rules) seen += o.rule + " ";
    })
        .join();
    return seen;
  };
  std::string before, after, again;
  std::atomic<int> step{0};
  std::thread worker([&] {  // one thread throughout: its cache must follow the swaps
    auto names = [&] {
      std::string seen;
      for (const RuleOutcome& o : h.Check(r).rules) seen += o.rule + " ";
      return seen;
    };
    before = names();
    step = 1;
    while (step.load() != 2) std::this_thread::yield();
    after = names();
    step = 3;
    while (step.load() != 4) std::this_thread::yield();
    again = names();
  });
  while (step.load() != 1) std::this_thread::yield();
  ASSERT_TRUE(h.policies->ReloadFromText(kPolicyB).empty());
  step = 2;
  while (step.load() != 3) std::this_thread::yield();
  ASSERT_TRUE(h.policies->ReloadFromText(kPolicyA).empty());
  step = 4;
  worker.join();
  EXPECT_EQ(before, "common a1 a2 ");
  EXPECT_EQ(after, "common b1 b2 ");
  EXPECT_EQ(again, "common a1 a2 ");
  EXPECT_EQ(rules_seen(), "common a1 a2 ");
}

// Several engines on one thread (an embedder, a test) never see each other's policy through the
// per-thread caches, however they alternate: five, more than the caches have slots.
TEST(ReloadConcurrency, EnginesOnOneThreadKeepTheirOwnPolicies) {
  std::vector<std::unique_ptr<testing::Harness>> engines;
  for (int e = 0; e < 5; ++e) {
    engines.push_back(std::make_unique<testing::Harness>(e % 2 == 0 ? kPolicyA : kPolicyB));
  }
  testing::TestRequest r;
  r.Peer("192.0.2.1").Header("k", "key");
  for (int round = 0; round < 6; ++round) {
    if (round == 3) {  // every engine swaps to the other policy
      for (size_t e = 0; e < engines.size(); ++e) {
        ASSERT_TRUE(engines[e]->policies->ReloadFromText(e % 2 == 0 ? kPolicyB : kPolicyA).empty());
      }
    }
    for (size_t e = 0; e < engines.size(); ++e) {
      const bool a = (e % 2 == 0) == (round < 3);
      ASSERT_EQ(engines[e]->Check(r).rules.at(1).rule, a ? "a1" : "b1")
          << "engine " << e << ", round " << round;
    }
  }
}

}  // namespace
}  // namespace tollgate
