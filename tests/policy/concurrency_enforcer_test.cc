// The Enforcer with concurrency rules ("algorithm": "concurrency") on a
// LocalStore and a ManualClock: leases held by allowed outcomes, given back by
// Release or at expiry; a denial charges no bucket; a rejected request keeps
// no lease; front ends that do not release get 503, never a silent limit.
#include <gtest/gtest.h>

#include <future>

#include "policy_test_util.h"

namespace tollgate {
namespace {

using testing::FindHeader;
using testing::Harness;
using testing::TestRequest;

constexpr char kPolicy[] = R"({"rules": [
  {"name": "inflight", "group": "inflight", "limit_keys": ["header:x-tenant"],
   "algorithm": "concurrency",
   "algorithm_config": {"max_in_flight": 2, "lease": "30s"}},
  {"name": "rate", "group": "rate", "limit_keys": ["header:x-tenant"],
   "algorithm_config": {"rps": 0.001, "burst": 3}}]})";

EnforcerOptions Releasing() {
  EnforcerOptions o;
  o.releases_leases = true;
  o.retry_after_jitter = 0;
  return o;
}

TestRequest Tenant(const std::string& t) {
  TestRequest r;
  r.Header("x-tenant", t);
  return r;
}

TEST(ConcurrencyRule, AtMostMaxInFlightAndADenialChargesNoBucket) {
  Harness h(kPolicy, Releasing());
  TestRequest a = Tenant("acme");
  CheckOutcome first = h.Check(a), second = h.Check(a);
  ASSERT_TRUE(first.allowed() && second.allowed());
  ASSERT_EQ(first.leases.size(), 1u);
  EXPECT_EQ(first.leases[0].rule, "inflight");
  EXPECT_NE(first.leases[0].id, second.leases[0].id);
  CheckOutcome third = h.Check(a);
  EXPECT_EQ(third.http_status, 429);
  EXPECT_TRUE(third.leases.empty());
  EXPECT_EQ(third.rules[static_cast<size_t>(third.denied_rule)].rule, "inflight");
  EXPECT_EQ(FindHeader(third, "X-RateLimit-Reason"), "concurrency_exceeded; policy=\"inflight\"");
  EXPECT_EQ(FindHeader(third, "Retry-After"), "1") << "a slot frees when a request ends";
  EXPECT_NE(third.body.find("concurrency limit of policy 'inflight' reached (2 in flight)"),
            std::string::npos)
      << third.body;
  // The rate bucket (burst 3) was charged twice, not three times.
  ASSERT_TRUE(h.enforcer->Release(first.leases).ok());
  CheckOutcome fourth = h.Check(a);
  ASSERT_TRUE(fourth.allowed());
  ASSERT_EQ(fourth.rules.size(), 2u);
  EXPECT_EQ(fourth.rules[1].decision.remaining, 0);
  // Another tenant has its own slots.
  TestRequest b = Tenant("globex");
  EXPECT_TRUE(h.Check(b).allowed());
}

TEST(ConcurrencyRule, ARequestRejectedByAnotherRuleKeepsNoLease) {
  Harness h(kPolicy, Releasing());
  TestRequest a = Tenant("acme");
  for (int i = 0; i < 3; ++i) {
    CheckOutcome o = h.Check(a);
    ASSERT_TRUE(o.allowed()) << i;
    ASSERT_TRUE(h.enforcer->Release(o.leases).ok());
  }
  EXPECT_EQ(h.store->Stats().lease_keys, 0u);
  CheckOutcome rejected = h.Check(a);  // the rate bucket is empty
  EXPECT_EQ(rejected.http_status, 429);
  EXPECT_EQ(rejected.rules[static_cast<size_t>(rejected.denied_rule)].rule, "rate");
  EXPECT_TRUE(rejected.leases.empty());
  EXPECT_EQ(h.store->Stats().lease_keys, 0u) << "the lease it took was given back";
}

TEST(ConcurrencyRule, LeasesNeverReleasedComeBackAtExpiry) {
  Harness h(R"({"name": "inflight", "limit_keys": ["header:x-tenant"],
                "algorithm": "concurrency",
                "algorithm_config": {"max_in_flight": 1, "lease": "30s"}})",
            Releasing());
  TestRequest a = Tenant("acme");
  ASSERT_TRUE(h.Check(a).allowed());  // its holder never releases
  EXPECT_EQ(h.Check(a).http_status, 429);
  h.clock.Advance(std::chrono::seconds(30) - std::chrono::nanoseconds(1));
  EXPECT_EQ(h.Check(a).http_status, 429);
  h.clock.Advance(std::chrono::nanoseconds(1));
  EXPECT_TRUE(h.Check(a).allowed());
}

TEST(ConcurrencyRule, ExplicitItemsTakeLeasesToo) {
  Harness h(kPolicy, Releasing());
  ExplicitItem item{.rule = "inflight", .key = "acme"};
  auto first = h.enforcer->CheckItems({&item, 1});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->allowed());
  ASSERT_EQ(first->leases.size(), 1u);
  // The same slots as requests with that tenant.
  TestRequest a = Tenant("acme");
  ASSERT_TRUE(h.Check(a).allowed());
  EXPECT_EQ(h.Check(a).http_status, 429);
  ASSERT_TRUE(h.enforcer->Release(first->leases).ok());
  EXPECT_TRUE(h.Check(a).allowed());
}

TEST(ConcurrencyRule, FrontEndsThatDoNotReleaseGet503) {
  Harness h(kPolicy);  // releases_leases: false
  TestRequest a = Tenant("acme");
  CheckOutcome o = h.Check(a);
  EXPECT_EQ(o.http_status, 503);
  EXPECT_NE(o.status.message().find("does not release leases"), std::string::npos);
  EXPECT_EQ(h.store->Stats().lease_keys, 0u);
  // Requests the concurrency rule does not apply to are unaffected.
  TestRequest other;
  EXPECT_TRUE(h.Check(other).allowed());
}

CheckOutcome CheckAsync(Harness& h, TestRequest& r) {
  std::promise<CheckOutcome> p;
  h.enforcer->CheckAsync(r.View(), [&](CheckOutcome o) { p.set_value(std::move(o)); });
  return p.get_future().get();
}

TEST(ConcurrencyRule, AsyncChecksTakeLeasesAndReleaseAsyncGivesThemBack) {
  Harness h(kPolicy, Releasing());
  TestRequest a = Tenant("acme");
  CheckOutcome first = CheckAsync(h, a), second = CheckAsync(h, a);
  ASSERT_TRUE(first.allowed() && second.allowed()) << first.status.ToString();
  ASSERT_EQ(first.leases.size(), 1u);
  CheckOutcome third = CheckAsync(h, a);
  EXPECT_EQ(third.http_status, 429);
  EXPECT_TRUE(third.leases.empty());
  std::promise<int64_t> released;
  h.enforcer->ReleaseAsync(first.leases, [&](int64_t n) { released.set_value(n); });
  EXPECT_EQ(released.get_future().get(), 1);
  // Twice: harmless, and reported as not live.
  std::promise<int64_t> again;
  h.enforcer->ReleaseAsync(first.leases, [&](int64_t n) { again.set_value(n); });
  EXPECT_EQ(again.get_future().get(), 0);
  EXPECT_TRUE(CheckAsync(h, a).allowed());
  std::vector<RuleCounters> counters = h.enforcer->Counters();
  for (const auto& c : counters) {
    if (c.rule != "inflight") continue;
    EXPECT_EQ(c.leases_acquired, 3u);
    EXPECT_EQ(c.leases_released, 1u);
    EXPECT_EQ(c.leases_expired, 1u);
  }
}

TEST(ConcurrencyRule, LeaseReleaseGivesLeasesBackWhenItGoesOutOfScope) {
  Harness h(kPolicy, Releasing());
  TestRequest a = Tenant("acme");
  {
    LeaseRelease one(*h.enforcer, h.Check(a).leases);
    LeaseRelease two(*h.enforcer, h.Check(a).leases);
    EXPECT_EQ(h.Check(a).http_status, 429);
    LeaseRelease moved = std::move(two);  // the move keeps one release
    EXPECT_TRUE(two.leases().empty());
  }
  // Both given back (the rate rule's burst of 3 allows one more request):
  // this one holds the only live lease, one slot is free.
  CheckOutcome after = h.Check(a);
  ASSERT_TRUE(after.allowed());
  ASSERT_EQ(after.rules[0].rule, "inflight");
  EXPECT_EQ(after.rules[0].decision.remaining, 1);
}

TEST(ConcurrencyRule, AllowedOutcomesDescribeTheConcurrencyLimitInHeaders) {
  Harness h(kPolicy, Releasing());
  TestRequest a = Tenant("acme");
  CheckOutcome o = h.Check(a);
  ASSERT_TRUE(o.allowed());
  const std::string rl = FindHeader(o, "RateLimit");
  // limit 2 in flight, one taken: one free slot.
  EXPECT_NE(rl.find("\"inflight\";r=1"), std::string::npos) << rl;
  EXPECT_NE(FindHeader(o, "RateLimit-Policy").find("\"inflight\";q=2"), std::string::npos)
      << FindHeader(o, "RateLimit-Policy");
}

TEST(ConcurrencyRule, LeaseTokensRoundTripAndRefuseWhatIsNotALeaseSet) {
  Harness h(kPolicy, Releasing());
  TestRequest a = Tenant("acme");
  CheckOutcome o = h.Check(a);
  ASSERT_EQ(o.leases.size(), 1u);
  const std::string token = Enforcer::LeaseToken(o.leases[0]);
  auto back = h.enforcer->ParseLeaseToken(token);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->rule, "inflight");
  EXPECT_EQ(back->key, o.leases[0].key);
  EXPECT_EQ(back->id, o.leases[0].id);
  // A rate rule's bucket key, bad hex, no id, an overlong token: refused.
  HeldLease bucket{"rate",
                   "rate\x1ftoken_bucket\x1f"
                   "acme",
                   o.leases[0].id};
  EXPECT_FALSE(h.enforcer->ParseLeaseToken(Enforcer::LeaseToken(bucket)).ok());
  EXPECT_FALSE(h.enforcer->ParseLeaseToken(o.leases[0].id + ".0g").ok());
  EXPECT_FALSE(h.enforcer->ParseLeaseToken("." + token.substr(token.find('.') + 1)).ok());
  EXPECT_FALSE(h.enforcer->ParseLeaseToken(std::string(5000, 'a')).ok());
  EXPECT_FALSE(h.enforcer->ParseLeaseToken("").ok());
}

// A token names its rule through its key; only a concurrency rule of the
// policy in force may be released (issue 29): not another rule's name put in
// a lease-set key, not an unknown rule, not a rule a reload removed or turned
// into a rate rule.
TEST(ConcurrencyRule, LeaseTokensOnlyNameConcurrencyRulesOfTheCurrentPolicy) {
  Harness h(kPolicy, Releasing());
  TestRequest a = Tenant("acme");
  CheckOutcome o = h.Check(a);
  ASSERT_EQ(o.leases.size(), 1u);
  const std::string id = o.leases[0].id;
  auto token_for = [&](const std::string& rule) {
    return Enforcer::LeaseToken(HeldLease{rule,
                                          rule + "\x1f"
                                                 "concurrency"
                                                 "\x1f"
                                                 "acme",
                                          id});
  };
  ASSERT_TRUE(h.enforcer->ParseLeaseToken(token_for("inflight")).ok());
  for (const std::string rule : {"rate", "ghost"}) {
    auto refused = h.enforcer->ParseLeaseToken(token_for(rule));
    ASSERT_FALSE(refused.ok()) << rule;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("not a concurrency rule of the current policy"),
              std::string::npos)
        << refused.status().message();
  }
  // The rule turns into a rate rule, then goes away: its old token is refused.
  const std::string token = Enforcer::LeaseToken(o.leases[0]);
  ASSERT_TRUE(h.policies
                  ->ReloadFromText(R"({"rules": [
    {"name": "inflight", "limit_keys": ["header:x-tenant"],
     "algorithm_config": {"rps": 1, "burst": 3}}]})")
                  .empty());
  EXPECT_FALSE(h.enforcer->ParseLeaseToken(token).ok()) << "a rate rule now";
  ASSERT_TRUE(h.policies
                  ->ReloadFromText(R"({"rules": [
    {"name": "rate", "limit_keys": ["header:x-tenant"],
     "algorithm_config": {"rps": 1, "burst": 3}}]})")
                  .empty());
  EXPECT_FALSE(h.enforcer->ParseLeaseToken(token).ok()) << "a removed rule";
}

}  // namespace
}  // namespace tollgate
