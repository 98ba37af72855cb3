// Shared setup for the middleware tests: a policy, a LocalStore and an Enforcer
// on a ManualClock (nothing refills unless a test moves the clock).
#ifndef TOLLGATE_TESTS_MIDDLEWARE_MIDDLEWARE_FIXTURE_H_
#define TOLLGATE_TESTS_MIDDLEWARE_MIDDLEWARE_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tollgate/client.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"

namespace tollgate::testing {

// per-key: 2 per key, cost from X-Cost. shadowed: 1 per key on /shadow, shadow mode.
// inflight: 1 request in flight per key on /inflight. llm-handler (/llm): cost from
// the handler, refunded on 5xx; llm-header (/gen): cost from the x-llm-tokens response header.
inline constexpr const char* kMiddlewarePolicy = R"({"rules": [
  {"name": "per-key", "limit_keys": ["header:x-api-key"],
   "match": {"path": {"prefix": "/api"}},
   "algorithm": "token_bucket",
   "algorithm_config": {"rps": 1, "burst": 2, "cost_source": "header:x-cost", "default_cost": 1}},
  {"name": "shadowed", "limit_keys": ["header:x-api-key"], "mode": "shadow",
   "match": {"path": {"prefix": "/shadow"}},
   "algorithm": "token_bucket", "algorithm_config": {"rps": 1, "burst": 1}},
  {"name": "inflight", "group": "inflight", "limit_keys": ["header:x-api-key"],
   "match": {"path": {"prefix": "/inflight"}},
   "algorithm": "concurrency", "algorithm_config": {"max_in_flight": 1, "lease": "1h"}},
  {"name": "llm-handler", "limit_keys": ["header:x-api-key"],
   "match": {"path": {"prefix": "/llm"}}, "algorithm": "token_bucket",
   "algorithm_config": {"rps": 1, "burst": 10, "cost_source": "handler"}, "refund_on": ["5xx"]},
  {"name": "llm-header", "limit_keys": ["header:x-api-key"],
   "match": {"path": {"prefix": "/gen"}}, "algorithm": "token_bucket",
   "algorithm_config": {"rps": 1, "burst": 10, "cost_source": "response_header:x-llm-tokens"}}
]})";

// A rule whose rollback guard watches the handler's answers, judged from 4:
// 5xx above 5 points over the baseline (kWatchedPolicy), or a p99 above 5 ms
// (kSlowWatchedPolicy; one trigger each, so a loaded machine cannot trip the other).
inline constexpr const char* kWatchedPolicy = R"({"rules": [
  {"name": "watched", "limit_keys": ["header:x-api-key"],
   "algorithm_config": {"rps": 1000, "burst": 1000},
   "rollback": {"max_upstream_error_increase": 0.05, "min_requests": 4,
                "window_seconds": 3600}}]})";
inline constexpr const char* kSlowWatchedPolicy = R"({"rules": [
  {"name": "watched", "limit_keys": ["header:x-api-key"],
   "algorithm_config": {"rps": 1000, "burst": 1000},
   "rollback": {"max_upstream_p99_ms": 5, "min_requests": 4, "window_seconds": 3600}}]})";

struct EnforcerFixture {
  explicit EnforcerFixture(const char* policy = kMiddlewarePolicy) {
    LocalStoreOptions o;
    o.max_keys = 1024;
    o.shards = 1;
    o.clock = &clock;
    auto s = LocalStore::Create(o);
    EXPECT_TRUE(s.ok());
    store = std::move(*s);
    auto policies = PolicyStore::FromText(policy);
    EXPECT_TRUE(policies.ok()) << policies.status().ToString();
    EnforcerOptions eo;
    eo.retry_after_jitter = 0;
    eo.releases_leases = true;  // the adapters give leases back when the handler returns
    auto e = Enforcer::Create(*policies, store.get(), &clock, eo);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    enforcer = std::move(*e);
  }

  ManualClock clock;
  std::unique_ptr<LocalStore> store;
  std::unique_ptr<Enforcer> enforcer;
};

// A store that cannot be reached: every decision fails (the fail-closed 503 path).
class UnreachableStore final : public Store {
 public:
  Result<BatchDecision> Acquire(std::span<const AcquireItem>) override {
    return ConnectionError("unreachable store (test)");
  }
  std::string Name() const override { return "unreachable"; }
  bool Healthy() const override { return false; }
};

// An Enforcer on the middleware policy over UnreachableStore.
struct FailingEnforcerFixture {
  FailingEnforcerFixture() {
    auto policies = PolicyStore::FromText(kMiddlewarePolicy);
    EXPECT_TRUE(policies.ok()) << policies.status().ToString();
    auto e = Enforcer::Create(*policies, &store, &clock);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    enforcer = std::move(*e);
  }
  ManualClock clock;
  UnreachableStore store;
  std::unique_ptr<Enforcer> enforcer;
};

// Response headers as HeaderPairs (views into `storage`), for ParseRateLimitHeaders.
template <class Headers>
std::vector<HeaderPair> Pairs(const Headers& headers) {
  std::vector<HeaderPair> out;
  for (const auto& [name, value] : headers) out.emplace_back(name, value);
  return out;
}

inline const RuleCounters* CountersFor(const std::vector<RuleCounters>& all,
                                       std::string_view rule) {
  for (const auto& c : all) {
    if (c.rule == rule) return &c;
  }
  return nullptr;
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_MIDDLEWARE_MIDDLEWARE_FIXTURE_H_
