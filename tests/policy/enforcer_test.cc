// The Enforcer on a LocalStore with a ManualClock: the seed examples verbatim,
// tiers and stacking, all-or-nothing, costs, shadow, rollout, rollback guard,
// missing keys, headers and bodies, store failures, explicit items, explain,
// reload semantics.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>

#include "policy/policy_impl.h"
#include "policy_test_util.h"
#include "testing/scoped_temp_dir.h"
#include "tollgate/policy_headers.h"

namespace tollgate {
namespace {

using nlohmann::json;
using testing::FindHeader;
using testing::Harness;
using testing::HasHeader;
using testing::kSeedGlobalRps;
using testing::kSeedTiered;
using testing::MintHs256;
using testing::TestRequest;

constexpr char kSecret[] = "tier-secret";

EnforcerOptions HsOptions() {
  EnforcerOptions o;
  o.jwt.hs256_secret = kSecret;
  return o;
}

std::string Bearer(const json& claims) { return "Bearer " + MintHs256(claims, kSecret); }

TEST(SeedGlobalRps, PerIpBucketOfTenRefillingAtFive) {
  Harness h(kSeedGlobalRps);
  TestRequest a;
  a.Peer("192.0.2.1");
  for (int i = 0; i < 10; ++i) {
    CheckOutcome o = h.Check(a);
    ASSERT_TRUE(o.allowed()) << i;
    ASSERT_EQ(o.rules.size(), 1u);
    EXPECT_EQ(o.rules[0].rule, "global-rps");
    EXPECT_EQ(o.rules[0].key, "192.0.2.1");
    EXPECT_EQ(o.rules[0].decision.remaining, 9 - i);
  }
  CheckOutcome rejected = h.Check(a);
  EXPECT_EQ(rejected.verdict, CheckOutcome::Verdict::kReject);
  EXPECT_EQ(rejected.http_status, 429);
  EXPECT_EQ(rejected.denied_rule, 0);
  // Another IP has its own bucket.
  TestRequest b;
  b.Peer("192.0.2.2");
  EXPECT_TRUE(h.Check(b).allowed());
  // One token refills every 200 ms.
  h.clock.Advance(std::chrono::milliseconds(199));
  EXPECT_FALSE(h.Check(a).allowed());
  h.clock.Advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(h.Check(a).allowed());
  EXPECT_FALSE(h.Check(a).allowed());
}

TEST(SeedGlobalRps, Draft11HeadersOnAllowAndReject) {
  Harness h(kSeedGlobalRps);
  TestRequest a;
  CheckOutcome first = h.Check(a);
  EXPECT_EQ(FindHeader(first, "RateLimit-Policy"), R"("global-rps";q=10;w=2)");
  EXPECT_EQ(FindHeader(first, "RateLimit"), R"("global-rps";r=9;t=1)");
  EXPECT_FALSE(HasHeader(first, "Retry-After"));
  EXPECT_TRUE(first.body.empty());
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(h.Check(a).allowed());
  CheckOutcome r = h.Check(a);
  ASSERT_EQ(r.http_status, 429);
  EXPECT_EQ(FindHeader(r, "RateLimit"), R"("global-rps";r=0;t=1)");
  const std::string retry = FindHeader(r, "Retry-After");
  ASSERT_FALSE(retry.empty());
  // The real wait is 200 ms; with up to 50% jitter it is still 1 s.
  EXPECT_EQ(retry, "1");
  EXPECT_EQ(r.retry_after_seconds, 1);
  EXPECT_EQ(FindHeader(r, "Cache-Control"), "no-store");
  EXPECT_EQ(FindHeader(r, "Content-Type"), "application/problem+json");
  EXPECT_EQ(FindHeader(r, "X-RateLimit-Reason"), R"(token_bucket_exceeded; policy="global-rps")");
  json body = json::parse(r.body);
  EXPECT_EQ(body["type"], "https://iana.org/assignments/http-problem-types#quota-exceeded");
  EXPECT_EQ(body["status"], 429);
  EXPECT_EQ(body["violated-policies"], json::array({"global-rps"}));
}

TEST(SeedTiered, EnterpriseKeysGetOnlyTheEnterpriseLimit) {
  Harness h(kSeedTiered, HsOptions());
  TestRequest ent;
  ent.Header("X-Api-Key", "ent-key").Header("Authorization", Bearer({{"plan", "enterprise"}}));
  for (int i = 0; i < 100; ++i) {
    CheckOutcome o = h.Check(ent);
    ASSERT_TRUE(o.allowed()) << i;
    ASSERT_EQ(o.rules.size(), 1u);
    ASSERT_EQ(o.rules[0].rule, "enterprise");
  }
  EXPECT_EQ(h.Check(ent).rules[0].decision.remaining, 2000 - 101);
}

TEST(SeedTiered, EveryoneElseGetsTheFreeLimit) {
  Harness h(kSeedTiered, HsOptions());
  auto run = [&](TestRequest& r, const char* what) {
    for (int i = 0; i < 20; ++i) {
      CheckOutcome o = h.Check(r);
      ASSERT_TRUE(o.allowed()) << what << " " << i;
      ASSERT_EQ(o.rules.size(), 1u) << what;
      ASSERT_EQ(o.rules[0].rule, "free") << what;
    }
    CheckOutcome o = h.Check(r);
    EXPECT_EQ(o.http_status, 429) << what;
    EXPECT_EQ(json::parse(o.body)["violated-policies"], json::array({"free"}));
  };
  TestRequest no_token;
  no_token.Header("x-api-key", "k-none");
  run(no_token, "no token");
  TestRequest pro;
  pro.Header("x-api-key", "k-pro").Header("Authorization", Bearer({{"plan", "pro"}}));
  run(pro, "other plan");
  TestRequest forged;
  forged.Header("x-api-key", "k-forged")
      .Header("Authorization", "Bearer " + MintHs256({{"plan", "enterprise"}}, "guessed"));
  run(forged, "bad signature");
  TestRequest expired;
  expired.Header("x-api-key", "k-expired")
      .Header("Authorization", Bearer({{"plan", "enterprise"}, {"exp", h.WallSeconds() - 3600}}));
  run(expired, "expired");
}

TEST(SeedTiered, UnverifiedClaimsNeverSelectTheEnterpriseTier) {
  Harness h(kSeedTiered);  // no JWT key configured
  TestRequest r;
  r.Header("x-api-key", "k")
      .Header("Authorization", "Bearer " + MintHs256({{"plan", "enterprise"}}, "anything"));
  CheckOutcome o = h.Check(r);
  ASSERT_EQ(o.rules.size(), 1u);
  EXPECT_EQ(o.rules[0].rule, "free");
  // Unless the operator says a gateway verified the token.
  EnforcerOptions upstream;
  upstream.jwt.verified_upstream = true;
  Harness trusted(kSeedTiered, upstream);
  EXPECT_EQ(trusted.Check(r).rules[0].rule, "enterprise");
}

TEST(SeedTiered, Rs256Tokens) {
  testing::RsaKey key;
  EnforcerOptions o;
  o.jwt.rs256_public_key_pem = key.PublicPem();
  Harness h(kSeedTiered, o);
  TestRequest r;
  r.Header("x-api-key", "k")
      .Header("Authorization", "Bearer " + key.Mint({{"plan", "enterprise"}}));
  EXPECT_EQ(h.Check(r).rules[0].rule, "enterprise");
}

constexpr std::string_view kStacked = R"({"rules": [
  {"name": "global-rps", "limit_keys": ["ip:address"], "algorithm": "token_bucket",
   "algorithm_config": {"rps": 5, "burst": 10}},
  {"name": "enterprise", "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
   "algorithm_config": { "rps": 1000, "burst": 2000 }, "match": { "jwt:plan": "enterprise" }},
  {"name": "free", "limit_keys": ["header:x-api-key"], "algorithm": "token_bucket",
   "algorithm_config": { "rps": 10, "burst": 20 }}]})";

TEST(Stacking, PerIpAndPerKeyRulesBothApply) {
  Harness h(kStacked, HsOptions());
  TestRequest r;
  r.Peer("192.0.2.1").Header("x-api-key", "k1");
  CheckOutcome o = h.Check(r);
  ASSERT_EQ(o.rules.size(), 2u);
  EXPECT_EQ(o.rules[0].rule, "global-rps");
  EXPECT_EQ(o.rules[1].rule, "free");
  EXPECT_EQ(FindHeader(o, "RateLimit-Policy"), R"("global-rps";q=10;w=2, "free";q=20;w=2)");
  EXPECT_EQ(FindHeader(o, "RateLimit"), R"("global-rps";r=9;t=1, "free";r=19;t=1)");
}

TEST(Stacking, RejectedRequestChargesNoBucket) {
  Harness h(kStacked, HsOptions());
  TestRequest r;
  r.Peer("192.0.2.1").Header("x-api-key", "k1");
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(h.Check(r).allowed());
  for (int i = 0; i < 5; ++i) {
    CheckOutcome o = h.Check(r);
    ASSERT_EQ(o.http_status, 429);
    ASSERT_EQ(o.denied_rule, 0);                                       // the per-IP rule
    EXPECT_EQ(FindHeader(o, "RateLimit"), R"("global-rps";r=0;t=1)");  // only the denying policy
  }
  // The key's free bucket was charged only by the 10 allowed requests.
  TestRequest other_ip;
  other_ip.Peer("192.0.2.2").Header("x-api-key", "k1");
  CheckOutcome o = h.Check(other_ip);
  ASSERT_TRUE(o.allowed());
  EXPECT_EQ(o.rules[1].rule, "free");
  EXPECT_EQ(o.rules[1].decision.remaining, 20 - 10 - 1);
}

TEST(Stacking, ExplicitGroupsOverrideTheDefault) {
  Harness h(R"({"rules": [
    {"name": "a", "limit_keys": ["header:k"], "algorithm_config": {"rps": 1, "burst": 5}},
    {"name": "b", "group": "other", "limit_keys": ["header:k"], "algorithm_config": {"rps": 1, "burst": 5}},
    {"name": "c", "group": "other", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 5}}]})");
  TestRequest r;
  r.Header("k", "v");
  CheckOutcome o = h.Check(r);
  ASSERT_EQ(o.rules.size(), 2u);
  EXPECT_EQ(o.rules[0].rule, "a");
  EXPECT_EQ(o.rules[1].rule, "b");
}

constexpr std::string_view kWeighted = R"({"rules": [
  {"name": "w", "limit_keys": ["header:x-api-key"],
   "algorithm_config": {"tokens_per_second": 100, "burst": 1000,
                        "cost_source": "header:x-request-weight", "default_cost": 2}},
  {"name": "q", "limit_keys": ["header:x-api-key"], "group": "q",
   "algorithm_config": {"rps": 100, "burst": 1000, "cost_source": "query:cost"}}]})";

int64_t CostFor(Harness& h, const std::string& header_value) {
  TestRequest r;
  r.Header("x-api-key", "k").Header("X-Request-Weight", header_value);
  CheckOutcome o = h.Check(r);
  return o.rules.at(0).cost;
}

TEST(Costs, FromHeaderWithHostileValues) {
  Harness h(kWeighted);
  EXPECT_EQ(CostFor(h, "5"), 5);
  EXPECT_EQ(CostFor(h, " 7 "), 7);
  EXPECT_EQ(CostFor(h, "2.5"), 3);
  for (const char* bad :
       {"-3", "NaN", "1e309", "", "abc", "0", "+5", "0x10", "inf", "-0", "1e-400"}) {
    EXPECT_EQ(CostFor(h, bad), 2) << bad;  // default_cost
  }
  TestRequest absent;
  absent.Header("x-api-key", "k");
  EXPECT_EQ(h.Check(absent).rules[0].cost, 2);
}

TEST(Costs, HugeCostIsRejectedForeverWithoutChargingOrRetryAfter) {
  Harness h(kWeighted);
  for (const char* huge : {"1e30", "99999999999999999999", "1001"}) {
    TestRequest r;
    r.Header("x-api-key", "k").Header("x-request-weight", huge);
    CheckOutcome o = h.Check(r);
    EXPECT_EQ(o.http_status, 429) << huge;
    EXPECT_FALSE(HasHeader(o, "Retry-After")) << huge;
    EXPECT_EQ(o.retry_after_seconds, 0);
    // No Retry-After (a retry can never succeed): the problem body says why,
    // naming the cost, the rule and its burst, and carries no retry-after.
    const json body = json::parse(o.body);
    const std::string detail = body["detail"].get<std::string>();
    EXPECT_NE(detail.find("can never be allowed"), std::string::npos) << detail;
    EXPECT_NE(detail.find("exceeds the capacity of policy 'w' (1000)"), std::string::npos)
        << detail;
    EXPECT_FALSE(body.contains("retry-after")) << o.body;
    EXPECT_EQ(body["violated-policies"], json::array({"w"})) << o.body;
  }
  {
    TestRequest r;
    r.Header("x-api-key", "k").Header("x-request-weight", "1001");
    const std::string detail = json::parse(h.Check(r).body)["detail"].get<std::string>();
    EXPECT_NE(detail.find("the cost of this request (1001)"), std::string::npos) << detail;
  }
  TestRequest one;
  one.Header("x-api-key", "k");
  EXPECT_EQ(h.Check(one).rules[0].decision.remaining, 1000 - 2);
}

TEST(Costs, FromQuery) {
  Harness h(kWeighted);
  TestRequest r;
  r.Header("x-api-key", "k").Query("a=1&cost=40&b");
  CheckOutcome o = h.Check(r);
  ASSERT_EQ(o.rules.size(), 2u);
  EXPECT_EQ(o.rules[1].rule, "q");
  EXPECT_EQ(o.rules[1].cost, 40);
  TestRequest bad;
  bad.Header("x-api-key", "k").Query("cost=-1");
  EXPECT_EQ(h.Check(bad).rules[1].cost, 1);
}

constexpr std::string_view kShadowed = R"({"rules": [
  {"name": "enforced", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 3}},
  {"name": "watch", "group": "w", "limit_keys": ["ip"], "mode": "shadow",
   "algorithm_config": {"rps": 1, "burst": 1}}]})";

TEST(Shadow, NeverRejectsButCounts) {
  Harness h(kShadowed);
  TestRequest r;
  CheckOutcome first = h.Check(r);
  ASSERT_TRUE(first.allowed());
  ASSERT_EQ(first.rules.size(), 2u);
  EXPECT_TRUE(first.rules[1].shadow);
  EXPECT_EQ(first.rules[1].shadow_reason, RuleOutcome::ShadowReason::kConfigured);
  // Shadow policies are not advertised.
  EXPECT_EQ(FindHeader(first, "RateLimit-Policy"), R"("enforced";q=3;w=3)");
  CheckOutcome second = h.Check(r);
  EXPECT_TRUE(second.allowed());
  EXPECT_FALSE(second.rules[1].decision.allowed);  // would have rejected
  EXPECT_FALSE(HasHeader(second, "Retry-After"));
  EXPECT_TRUE(second.body.empty());
  // The enforced rule was still charged on the second request.
  EXPECT_EQ(second.rules[0].decision.remaining, 1);
  EXPECT_TRUE(h.Check(r).allowed());
  EXPECT_EQ(h.Check(r).http_status, 429);
  std::map<std::string, RuleCounters> counters;
  for (auto& c : h.enforcer->Counters()) counters[c.rule] = c;
  EXPECT_EQ(counters["enforced"].allowed, 3u);
  EXPECT_EQ(counters["enforced"].rejected, 1u);
  EXPECT_GE(counters["watch"].shadow_rejected, 2u);
  EXPECT_EQ(counters["watch"].rejected, 0u);
}

TEST(Shadow, ShadowOnlyPolicyAllowsEverything) {
  Harness h(R"({"name": "s", "limit_keys": ["ip"], "mode": "shadow",
               "algorithm_config": {"rps": 1, "burst": 1}})");
  TestRequest r;
  for (int i = 0; i < 5; ++i) {
    CheckOutcome o = h.Check(r);
    EXPECT_TRUE(o.allowed());
    EXPECT_TRUE(o.headers.empty());
  }
  EXPECT_EQ(h.enforcer->Counters()[0].shadow_rejected, 4u);
}

TEST(Rollout, EnforcePercentIsDeterministicPerIdentity) {
  Harness h(R"({"name": "r", "limit_keys": ["header:k"], "enforce_percent": 30,
               "algorithm_config": {"rps": 1, "burst": 100}})");
  int enforced = 0;
  for (int i = 0; i < 2000; ++i) {
    TestRequest r;
    r.Header("k", "client-" + std::to_string(i));
    const auto reason = h.Check(r).rules[0].shadow_reason;
    EXPECT_EQ(h.Check(r).rules[0].shadow_reason, reason);  // same identity, same choice
    if (reason == RuleOutcome::ShadowReason::kNone) {
      ++enforced;
    } else {
      EXPECT_EQ(reason, RuleOutcome::ShadowReason::kRollout);
    }
  }
  EXPECT_GT(enforced, 2000 * 25 / 100);
  EXPECT_LT(enforced, 2000 * 35 / 100);
}

constexpr std::string_view kGuarded = R"({"name": "strict", "limit_keys": ["header:k"],
  "algorithm_config": {"rps": 1, "burst": 1},
  "rollback": {"max_reject_ratio": 0.5, "window_seconds": 60, "min_requests": 10}})";

TEST(Rollback, TripsToShadowLogsAndExports) {
  Harness h(kGuarded);
  TestRequest r;
  r.Header("k", "hot");
  int rejected = 0;
  for (int i = 0; i < 10; ++i) rejected += h.Check(r).http_status == 429;
  EXPECT_EQ(rejected, 9);  // 9/10 > 0.5 at the 10th decision: tripped now
  auto counters = h.enforcer->Counters();
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_TRUE(counters[0].rolled_back);
  EXPECT_NE(counters[0].rollback_reason.find("rejected 9 of 10"), std::string::npos);
  ASSERT_EQ(h.log.size(), 1u);
  EXPECT_NE(h.log[0].find("rollback guard tripped"), std::string::npos);
  CheckOutcome o = h.Check(r);
  EXPECT_TRUE(o.allowed());
  EXPECT_EQ(o.rules[0].shadow_reason, RuleOutcome::ShadowReason::kRollback);
  // An operator resets it.
  EXPECT_TRUE(h.enforcer->ResetRollback("strict"));
  EXPECT_FALSE(h.enforcer->ResetRollback("nope"));
  EXPECT_EQ(h.Check(r).http_status, 429);
}

TEST(Rollback, BelowMinRequestsOrRatioDoesNotTrip) {
  Harness h(kGuarded);
  for (int i = 0; i < 40; ++i) {
    TestRequest r;
    r.Header("k", "c" + std::to_string(i));
    ASSERT_TRUE(h.Check(r).allowed());
  }
  TestRequest hot;
  hot.Header("k", "hot");
  for (int i = 0; i < 20; ++i) (void)h.Check(hot);  // 19 rejections of 60: ratio < 0.5
  EXPECT_FALSE(h.enforcer->Counters()[0].rolled_back);
}

TEST(Rollback, ChangingTheRuleByReloadResetsTheGuard) {
  Harness h(kGuarded);
  TestRequest r;
  r.Header("k", "hot");
  for (int i = 0; i < 10; ++i) (void)h.Check(r);
  ASSERT_TRUE(h.enforcer->Counters()[0].rolled_back);
  // Unchanged reload: still tripped.
  ASSERT_TRUE(h.policies->ReloadFromText(kGuarded).empty());
  EXPECT_EQ(h.Check(r).rules[0].shadow_reason, RuleOutcome::ShadowReason::kRollback);
  ASSERT_TRUE(h.policies
                  ->ReloadFromText(R"({"name": "strict", "limit_keys": ["header:k"],
                     "algorithm_config": {"rps": 1, "burst": 2},
                     "rollback": {"max_reject_ratio": 0.5, "window_seconds": 60, "min_requests": 10}})")
                  .empty());
  EXPECT_EQ(h.Check(r).rules[0].shadow_reason, RuleOutcome::ShadowReason::kNone);
  EXPECT_FALSE(h.enforcer->Counters()[0].rolled_back);
}

// A store that takes `delay` (on the manual clock) to answer, from the next call on.
class SlowStore : public Store {
 public:
  SlowStore(Store* inner, ManualClock* clock) : inner_(inner), clock_(clock) {}
  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override {
    clock_->Advance(delay);
    return inner_->Acquire(items);
  }
  std::string Name() const override { return "slow"; }
  Nanos delay{0};

 private:
  Store* inner_;
  ManualClock* clock_;
};

TEST(Rollback, TripsWhenTheWindowsP99IsAboveTheMax) {
  Harness h(R"({"name": "lat", "limit_keys": ["header:k"],
    "algorithm_config": {"rps": 1000000, "burst": 1000000},
    "rollback": {"max_p99_ms": 50, "window_seconds": 3600, "min_requests": 100}})");
  SlowStore slow(h.store.get(), &h.clock);
  std::vector<std::string> log;
  EnforcerOptions o;
  o.log = [&](std::string_view m) { log.emplace_back(m); };
  auto enforcer = *Enforcer::Create(h.policies, &slow, &h.clock, o);
  TestRequest r;
  r.Header("k", "a");
  // 300 fast decisions, then 3 slow ones: 3 of 303 (under 1%) above 50 ms, so
  // the window's p99 is not above it yet.
  for (int i = 0; i < 303; ++i) {
    slow.delay = i >= 300 ? std::chrono::milliseconds(51) : Nanos(0);
    ASSERT_TRUE(enforcer->Check(r.View()).allowed());
    ASSERT_FALSE(enforcer->Counters()[0].rolled_back) << i;
  }
  // A decision of exactly 50 ms is not above it.
  slow.delay = std::chrono::milliseconds(50);
  (void)enforcer->Check(r.View());
  EXPECT_FALSE(enforcer->Counters()[0].rolled_back);
  // A fourth slow one: 4 of 305, above 1%, so p99 > 50 ms.
  slow.delay = std::chrono::milliseconds(51);
  (void)enforcer->Check(r.View());
  auto c = enforcer->Counters()[0];
  EXPECT_TRUE(c.rolled_back);
  EXPECT_EQ(c.rollback_trigger, RollbackTrigger::kLatencyP99);
  EXPECT_EQ(c.rollback_trips[size_t(RollbackTrigger::kLatencyP99)], 1u);
  EXPECT_NE(c.rollback_reason.find("4 of 305"), std::string::npos) << c.rollback_reason;
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("latency_p99"), std::string::npos) << log[0];
  EXPECT_EQ(enforcer->Check(r.View()).rules[0].shadow_reason, RuleOutcome::ShadowReason::kRollback);
}

TEST(Rollback, TripsWhenUpstreamErrorsRiseOverThePreviousWindow) {
  Harness h(R"({"rules": [{"name": "up", "limit_keys": ["header:k"],
    "algorithm_config": {"rps": 1000000, "burst": 1000000}}],
    "rollback": {"max_upstream_error_increase": 0.05, "window_seconds": 60, "min_requests": 50}})");
  TestRequest r;
  r.Header("k", "a");
  CheckOutcome allowed = h.Check(r);
  ASSERT_TRUE(allowed.allowed());
  ASSERT_EQ(allowed.rules.size(), 1u);
  EXPECT_TRUE(allowed.rules[0].watches_upstream);  // the policy-wide guard applies
  auto tripped = [&] { return h.enforcer->Counters()[0].rolled_back; };
  // Window 1: 100 answers, 4 of them 5xx. With no earlier window the baseline
  // is 0 and 4% is not 5 points up.
  // 4xx answers are the client's, not upstream errors (10 more would be 14%).
  for (int i = 0; i < 100; ++i) {
    h.enforcer->RecordUpstream(allowed, i % 25 == 24 ? 503 : (i % 10 == 5 ? 404 : 200));
    ASSERT_FALSE(tripped()) << i;
  }
  EXPECT_FALSE(tripped());
  // Window 2: baseline 4%; errors trip once the ratio is above 9%.
  h.clock.Advance(std::chrono::seconds(61));
  int answered = 0, errors = 0;
  for (int i = 0; i < 100 && !tripped(); ++i) {
    const bool error = i >= 40;  // 40 good answers, then only errors
    h.enforcer->RecordUpstream(allowed, error ? 500 : 204);
    ++answered;
    errors += error;
    const bool want = answered >= 50 && double(errors) / answered - 0.04 > 0.05;
    ASSERT_EQ(tripped(), want) << answered << " answers, " << errors << " errors";
  }
  ASSERT_TRUE(tripped());
  EXPECT_EQ(answered, 50);  // 10/50 = 20%: the first answer the window may judge
  auto c = h.enforcer->Counters()[0];
  EXPECT_EQ(c.rollback_trigger, RollbackTrigger::kUpstreamErrors);
  EXPECT_NE(c.rollback_reason.find("5xx to 10 of 50"), std::string::npos) << c.rollback_reason;
  // A tripped rule decides in shadow and no longer watches.
  EXPECT_FALSE(h.Check(r).rules[0].watches_upstream);
}

// Upstream latency (gateway, middleware): more than 1% of the timed answers
// over max_upstream_p99_ms trips; answers without a latency are not judged.
TEST(Rollback, TripsWhenTheUpstreamP99IsAboveTheMax) {
  Harness h(R"({"rules": [{"name": "up", "limit_keys": ["header:k"],
    "algorithm_config": {"rps": 1000000, "burst": 1000000},
    "rollback": {"max_upstream_p99_ms": 50, "window_seconds": 60, "min_requests": 100}}]})");
  TestRequest r;
  r.Header("k", "a");
  CheckOutcome allowed = h.Check(r);
  ASSERT_TRUE(allowed.allowed());
  ASSERT_TRUE(allowed.rules[0].watches_upstream);
  auto tripped = [&] { return h.enforcer->Counters()[0].rolled_back; };
  for (int i = 0; i < 500; ++i) h.enforcer->RecordUpstream(allowed, 200);  // latency unknown
  for (int i = 0; i < 200; ++i) {
    h.enforcer->RecordUpstream(
        allowed, 200, i < 2 ? std::chrono::milliseconds(51) : std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(tripped());  // 2 of 200 slow: exactly 1%, p99 at the max
  h.enforcer->RecordUpstream(allowed, 200, std::chrono::milliseconds(51));
  ASSERT_TRUE(tripped());  // 3 of 201
  auto c = h.enforcer->Counters()[0];
  EXPECT_EQ(c.rollback_trigger, RollbackTrigger::kUpstreamLatencyP99);
  EXPECT_EQ(c.rollback_trips[size_t(RollbackTrigger::kUpstreamLatencyP99)], 1u);
  EXPECT_NE(c.rollback_reason.find("3 of 201 upstream answers"), std::string::npos)
      << c.rollback_reason;
  EXPECT_EQ(RollbackTriggerName(c.rollback_trigger), "upstream_latency_p99");
}

TEST(Rollback, AnOperatorTripsAndClearsAndEachIsCounted) {
  Harness h(kGuarded);
  TestRequest r;
  r.Header("k", "hot");
  EXPECT_FALSE(h.enforcer->TripRollback("nope", "x"));
  EXPECT_TRUE(h.enforcer->TripRollback("strict", "deploy 42"));
  auto c = h.enforcer->Counters()[0];
  EXPECT_TRUE(c.rolled_back);
  EXPECT_EQ(c.rollback_trigger, RollbackTrigger::kAdmin);
  EXPECT_NE(c.rollback_reason.find("deploy 42"), std::string::npos);
  EXPECT_EQ(h.Check(r).rules[0].shadow_reason, RuleOutcome::ShadowReason::kRollback);
  EXPECT_TRUE(h.enforcer->ResetRollback("strict"));
  c = h.enforcer->Counters()[0];
  EXPECT_FALSE(c.rolled_back);
  EXPECT_EQ(c.rollback_trips[size_t(RollbackTrigger::kAdmin)], 1u);
  EXPECT_EQ(c.rollback_clears, 1u);
  EXPECT_TRUE(h.enforcer->ResetRollback("strict"));  // not tripped: nothing to count
  EXPECT_EQ(h.enforcer->Counters()[0].rollback_clears, 1u);
  EXPECT_EQ(RollbackTriggerName(RollbackTrigger::kUpstreamErrors), "upstream_errors");
}

// The fleet's view (tollgate/rollback_fleet.h): every change this Enforcer
// makes is reported to on_rollback, with the rule's fingerprint; adopted ones
// are not, and are counted apart.
TEST(Rollback, ReportsEveryOwnChangeToOnRollback) {
  std::vector<RollbackTransition> seen;
  EnforcerOptions options;
  options.on_rollback = [&](const RollbackTransition& t) { seen.push_back(t); };
  Harness h(kGuarded, std::move(options));
  TestRequest r;
  r.Header("k", "hot");
  for (int i = 0; i < 10; ++i) (void)h.Check(r);  // trips on the 10th (9 of 10 rejected)
  const uint64_t fp = h.enforcer->RollbackFingerprint("strict");
  ASSERT_NE(fp, 0u);
  EXPECT_EQ(h.enforcer->RollbackFingerprint("nope"), 0u);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].rule, "strict");
  EXPECT_TRUE(seen[0].tripped);
  EXPECT_EQ(seen[0].trigger, RollbackTrigger::kRejectRatio);
  EXPECT_EQ(seen[0].fingerprint, fp);
  EXPECT_FALSE(seen[0].by_operator);
  EXPECT_NE(seen[0].reason.find("rejected 9 of 10"), std::string::npos) << seen[0].reason;
  EXPECT_EQ(h.enforcer->Counters()[0].rollback_fingerprint, fp);

  ASSERT_TRUE(h.enforcer->ResetRollback("strict"));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FALSE(seen[1].tripped);
  EXPECT_TRUE(seen[1].by_operator);
  EXPECT_EQ(seen[1].fingerprint, fp);
  // A clear of a rule that is not tripped here is still reported: others may be.
  ASSERT_TRUE(h.enforcer->ResetRollback("strict"));
  EXPECT_EQ(seen.size(), 3u);
  ASSERT_TRUE(h.enforcer->TripRollback("strict", "INC-9"));
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_TRUE(seen[3].tripped && seen[3].by_operator);
  EXPECT_EQ(seen[3].trigger, RollbackTrigger::kAdmin);
  EXPECT_NE(seen[3].reason.find("INC-9"), std::string::npos);
  ASSERT_TRUE(h.enforcer->TripRollback("strict", "again"));  // tripped already: no change
  EXPECT_EQ(seen.size(), 4u);
}

TEST(Rollback, AdoptsAnotherInstancesTripOnlyForTheSameDefinition) {
  std::vector<RollbackTransition> seen;
  EnforcerOptions options;
  options.on_rollback = [&](const RollbackTransition& t) { seen.push_back(t); };
  Harness h(kGuarded, std::move(options));
  TestRequest r;
  r.Header("k", "hot");
  const uint64_t fp = h.enforcer->RollbackFingerprint("strict");
  RollbackTransition trip;
  trip.rule = "strict";
  trip.fingerprint = fp + 1;  // another definition of the rule
  trip.tripped = true;
  trip.trigger = RollbackTrigger::kUpstreamErrors;
  trip.reason = "upstream answered 5xx to 40 of 100";
  trip.origin = "host-b:7:0badcafe";
  EXPECT_FALSE(h.enforcer->AdoptRollback(trip));
  trip.rule = "nope";
  EXPECT_FALSE(h.enforcer->AdoptRollback(trip));
  trip.rule = "strict";
  trip.fingerprint = fp;
  // Adopted before this instance decided anything: the first decision keeps it.
  ASSERT_TRUE(h.enforcer->AdoptRollback(trip));
  EXPECT_FALSE(h.enforcer->AdoptRollback(trip));  // tripped already
  EXPECT_EQ(h.Check(r).rules[0].shadow_reason, RuleOutcome::ShadowReason::kRollback);
  auto c = h.enforcer->Counters()[0];
  EXPECT_TRUE(c.rolled_back);
  EXPECT_EQ(c.rollback_trigger, RollbackTrigger::kUpstreamErrors);
  EXPECT_EQ(c.rollback_origin, "host-b:7:0badcafe");
  EXPECT_EQ(c.rollback_reason, trip.reason);
  EXPECT_EQ(c.rollback_adopted_trips, 1u);
  EXPECT_EQ(c.rollback_trips[size_t(RollbackTrigger::kUpstreamErrors)], 0u);  // not ours
  // Shadow: nothing rejects while tripped.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(h.Check(r).http_status, 200) << i;

  RollbackTransition clear = trip;
  clear.tripped = false;
  clear.reason.clear();
  ASSERT_TRUE(h.enforcer->AdoptRollback(clear));
  EXPECT_FALSE(h.enforcer->AdoptRollback(clear));  // cleared already
  c = h.enforcer->Counters()[0];
  EXPECT_FALSE(c.rolled_back);
  EXPECT_EQ(c.rollback_origin, "");
  EXPECT_EQ(c.rollback_adopted_clears, 1u);
  EXPECT_EQ(c.rollback_clears, 0u);
  EXPECT_EQ(h.Check(r).http_status, 429);  // enforcing again
  EXPECT_TRUE(seen.empty());               // adoptions are never reported back
  int adoption_lines = 0;
  for (const std::string& line : h.log) {
    adoption_lines += line.find("on instance host-b:7:0badcafe") != std::string::npos;
  }
  EXPECT_EQ(adoption_lines, 2);  // the trip and the clear

  // A reload that changes the rule gives it a new fingerprint: the old one's
  // trips no longer apply.
  ASSERT_TRUE(h.policies
                  ->ReloadFromText(R"({"name": "strict", "limit_keys": ["header:k"],
                     "algorithm_config": {"rps": 1, "burst": 3},
                     "rollback": {"max_reject_ratio": 0.5, "window_seconds": 60, "min_requests": 10}})")
                  .empty());
  EXPECT_NE(h.enforcer->RollbackFingerprint("strict"), fp);
  EXPECT_FALSE(h.enforcer->AdoptRollback(trip));
  EXPECT_EQ(RollbackTriggerFromName("upstream_errors"), RollbackTrigger::kUpstreamErrors);
  EXPECT_EQ(RollbackTriggerFromName("bogus"), RollbackTrigger::kNone);
  EXPECT_EQ(RollbackTriggerFromName("none"), RollbackTrigger::kNone);
}

TEST(MissingKey, SkipOrShared) {
  Harness h(R"({"rules": [
    {"name": "skip", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 1, "burst": 2}},
    {"name": "shared", "group": "s", "limit_keys": ["header:x-api-key", "ip"], "missing_key": "shared",
     "algorithm_config": {"rps": 1, "burst": 3}}]})");
  TestRequest a;
  a.Peer("192.0.2.1");
  CheckOutcome o = h.Check(a);
  ASSERT_EQ(o.rules.size(), 1u);
  EXPECT_EQ(o.rules[0].rule, "shared");
  EXPECT_EQ(o.rules[0].key, "\\missing|192.0.2.1");
  // An attacker naming the marker gets an escaped, different key.
  TestRequest spoof;
  spoof.Peer("192.0.2.1").Header("x-api-key", "\\missing");
  CheckOutcome s = h.Check(spoof);
  ASSERT_EQ(s.rules.size(), 2u);
  EXPECT_EQ(s.rules[1].key, "\\\\missing|192.0.2.1");
  EXPECT_GE(h.enforcer->Counters()[1].missing_key, 1u);
  // An empty value counts as missing.
  TestRequest empty;
  empty.Peer("192.0.2.1").Header("x-api-key", "  ");
  EXPECT_EQ(h.Check(empty).rules.size(), 1u);
}

TEST(Match, Operators) {
  Harness h(R"({"rules": [
    {"name": "api", "limit_keys": ["const:a"], "match": {"path": {"prefix": "/api/"}, "method": ["GET", "HEAD"]},
     "algorithm_config": {"rps": 1, "burst": 100}},
    {"name": "re", "group": "re", "limit_keys": ["const:a"], "match": {"path": {"regex": "^/items/[0-9]+$"}},
     "algorithm_config": {"rps": 1, "burst": 100}},
    {"name": "nobot", "group": "nb", "limit_keys": ["const:a"],
     "match": {"header:user-agent": {"suffix": "bot"}, "query:debug": {"absent": true}},
     "algorithm_config": {"rps": 1, "burst": 100}},
    {"name": "present", "group": "p", "limit_keys": ["const:a"], "match": {"header:x-test": {"present": true}},
     "algorithm_config": {"rps": 1, "burst": 100}}]})");
  auto names = [&](TestRequest& r) {
    std::set<std::string> out;
    for (auto& ro : h.Check(r).rules) out.insert(ro.rule);
    return out;
  };
  TestRequest get;
  get.Method("get").Path("/api/x");
  EXPECT_EQ(names(get), (std::set<std::string>{"api"}));
  TestRequest post;
  post.Method("POST").Path("/api/x");
  EXPECT_TRUE(names(post).empty());
  TestRequest item;
  item.Path("/items/42");
  EXPECT_EQ(names(item), (std::set<std::string>{"re"}));
  TestRequest item_bad;
  item_bad.Path("/items/42/x");
  EXPECT_TRUE(names(item_bad).empty());
  TestRequest bot;
  bot.Path("/").Header("User-Agent", "crawlbot");
  EXPECT_EQ(names(bot), (std::set<std::string>{"nobot"}));
  bot.Query("debug=1");
  EXPECT_TRUE(names(bot).empty());
  TestRequest p;
  p.Path("/").Header("X-Test", "1");
  EXPECT_EQ(names(p), (std::set<std::string>{"present"}));
}

TEST(Keys, LongAndHostileValuesAreBounded) {
  Harness h(
      R"({"name": "k", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 1, "burst": 1}})");
  TestRequest a;
  a.Header("x-api-key", std::string(100000, 'a'));
  CheckOutcome o = h.Check(a);
  ASSERT_EQ(o.rules.size(), 1u);
  EXPECT_LE(o.rules[0].key.size(), kMaxKeyValueLength);
  EXPECT_EQ(o.rules[0].key[0], '~');
  TestRequest b;
  b.Header("x-api-key", std::string(99999, 'a') + "b");
  EXPECT_TRUE(h.Check(b).allowed());  // a different bucket
  EXPECT_FALSE(h.Check(a).allowed());
  TestRequest ctl;
  ctl.Header("x-api-key", "a\r\nb\x1f");
  EXPECT_EQ(h.Check(ctl).rules[0].key, "a\\x0d\\x0ab\\x1f");
}

TEST(Keys, Ipv6ClientsGroupedByPrefix) {
  Harness h(
      R"({"name": "v6", "limit_keys": ["ip:address/64"], "algorithm_config": {"rps": 1, "burst": 2}})");
  TestRequest a;
  a.Peer("2001:db8:1:2:aaaa::1");
  TestRequest b;
  b.Peer("2001:db8:1:2:bbbb::2");
  TestRequest other;
  other.Peer("2001:db8:1:3::1");
  TestRequest v4;
  v4.Peer("192.0.2.1");
  CheckOutcome first = h.Check(a);
  EXPECT_EQ(first.rules[0].key, "2001:db8:1:2::/64");
  EXPECT_TRUE(h.Check(b).allowed());
  EXPECT_EQ(h.Check(a).http_status, 429);  // same /64: one bucket
  EXPECT_TRUE(h.Check(other).allowed());
  EXPECT_EQ(h.Check(v4).rules[0].key, "192.0.2.1");
}

// A store that fails or answers without state, to check the failure mapping.
class FakeStore : public Store {
 public:
  std::optional<Status> error;
  bool fail_open_allowed = true;
  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override {
    ++calls;
    if (error) return *error;
    BatchDecision d;
    d.enforced = false;
    d.allowed = fail_open_allowed;
    d.decisions.resize(items.size());
    return d;
  }
  std::string Name() const override { return "fake"; }
  Nanos UnavailableFor() const override { return unavailable_for; }
  int calls = 0;
  Nanos unavailable_for{0};
};

// The failure-mode tags of the last batch a store saw, and of every lease
// call (granted, so that a request goes on to the batch).
class TagRecordingStore : public Store {
 public:
  std::vector<std::pair<std::string, std::optional<FailureMode>>> seen;
  std::vector<std::pair<std::string, std::optional<FailureMode>>> lease_tags;
  bool SupportsLeases() const override { return true; }
  Result<LeaseDecision> AcquireLease(std::string_view key, const LeaseLimit& limit) override {
    lease_tags.emplace_back(std::string(key), limit.failure_mode());
    LeaseDecision d;
    d.allowed = true;
    d.limit = limit.max_in_flight();
    d.remaining = d.limit - 1;
    d.expires_in = Nanos(limit.lease_ns());
    d.lease_id = std::to_string(lease_tags.size());
    return d;
  }
  Result<bool> ReleaseLease(std::string_view, std::string_view) override { return true; }
  Result<BatchDecision> Acquire(std::span<const AcquireItem> items) override {
    seen.clear();
    BatchDecision d;
    d.allowed = true;
    for (const AcquireItem& it : items) {
      seen.emplace_back(std::string(it.key), it.failure_mode);
      Decision one;
      one.allowed = true;
      one.limit = one.remaining = 5;
      d.decisions.push_back(one);
    }
    return d;
  }
  std::string Name() const override { return "tags"; }
};

// A rule's failure_mode travels to the store as each item's tag (the
// resilient store reads nothing from keys); a rule without one leaves it
// empty (the store's default). Explicit items get their rule's tag too.
TEST(StoreFailure, ItemsCarryTheRuleFailureModeAsATag) {
  TagRecordingStore store;
  ManualClock clock;
  auto policies = *PolicyStore::FromText(R"({"rules": [
      {"name": "payments", "limit_keys": ["ip:address"], "group": "pay", "failure_mode": "closed",
       "algorithm_config": {"rps": 1, "burst": 5}},
      {"name": "public", "limit_keys": ["ip:address"], "group": "pub",
       "algorithm_config": {"rps": 1, "burst": 5}}]})");
  auto enforcer = *Enforcer::Create(policies, &store, &clock, {});
  TestRequest r;
  ASSERT_TRUE(enforcer->Check(r.View()).allowed());
  ASSERT_EQ(store.seen.size(), 2u);
  EXPECT_TRUE(store.seen[0].first.starts_with("payments"));
  EXPECT_EQ(store.seen[0].second, FailureMode::kClosed);
  EXPECT_EQ(store.seen[1].second, std::nullopt);
  const ExplicitItem item{.rule = "payments", .key = "k"};
  ASSERT_TRUE(enforcer->CheckItems(std::span(&item, 1)).ok());
  ASSERT_EQ(store.seen.size(), 1u);
  EXPECT_EQ(store.seen[0].second, FailureMode::kClosed);
}

// A concurrency rule's failure_mode travels with its lease calls the same way
// (LeaseLimit::failure_mode), sync, async and for explicit items, so that
// ResilientStore answers an outage with the rule's mode.
TEST(StoreFailure, LeaseCallsCarryTheRuleFailureModeAsATag) {
  TagRecordingStore store;
  ManualClock clock;
  auto policies = *PolicyStore::FromText(R"({"rules": [
      {"name": "exports", "limit_keys": ["ip:address"], "group": "ex", "failure_mode": "degrade",
       "algorithm": "concurrency", "algorithm_config": {"max_in_flight": 5, "lease": "30s"}},
      {"name": "streams", "limit_keys": ["ip:address"], "group": "st",
       "algorithm": "concurrency", "algorithm_config": {"max_in_flight": 5, "lease": "30s"}}]})");
  EnforcerOptions o;
  o.releases_leases = true;
  auto enforcer = *Enforcer::Create(policies, &store, &clock, std::move(o));
  TestRequest r;
  ASSERT_TRUE(enforcer->Check(r.View()).allowed());
  ASSERT_EQ(store.lease_tags.size(), 2u);
  EXPECT_TRUE(store.lease_tags[0].first.starts_with("exports"));
  EXPECT_EQ(store.lease_tags[0].second, FailureMode::kDegrade);
  EXPECT_EQ(store.lease_tags[1].second, std::nullopt);
  store.lease_tags.clear();
  std::optional<CheckOutcome> async;
  enforcer->CheckAsync(r.View(), [&](CheckOutcome out) { async = std::move(out); });
  ASSERT_TRUE(async && async->allowed());  // the default async calls run inline
  ASSERT_EQ(store.lease_tags.size(), 2u);
  EXPECT_EQ(store.lease_tags[0].second, FailureMode::kDegrade);
  EXPECT_EQ(store.lease_tags[1].second, std::nullopt);
  store.lease_tags.clear();
  const ExplicitItem item{.rule = "exports", .key = "k"};
  ASSERT_TRUE(enforcer->CheckItems(std::span(&item, 1)).ok());
  ASSERT_EQ(store.lease_tags.size(), 1u);
  EXPECT_EQ(store.lease_tags[0].second, FailureMode::kDegrade);
}

TEST(StoreFailure, UnavailableIsA503NeverA429) {
  FakeStore store;
  store.error = UnavailableError("breaker open");
  ManualClock clock;
  auto enforcer = *Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), &store, &clock, {});
  TestRequest r;
  CheckOutcome o = enforcer->Check(r.View());
  EXPECT_EQ(o.verdict, CheckOutcome::Verdict::kUnavailable);
  EXPECT_EQ(o.http_status, 503);
  EXPECT_EQ(o.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(json::parse(o.body)["type"],
            "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity");
  EXPECT_EQ(FindHeader(o, "Cache-Control"), "no-store");
  // Nothing says when the store is back: 1 s, plus up to 50% jitter.
  EXPECT_GE(o.retry_after_seconds, 1);
  EXPECT_LE(o.retry_after_seconds, 2);
  EXPECT_EQ(FindHeader(o, "Retry-After"), std::to_string(o.retry_after_seconds));
  EXPECT_EQ(json::parse(o.body)["retry-after"], o.retry_after_seconds);
  EXPECT_EQ(enforcer->Counters()[0].unavailable, 1u);
}

TEST(StoreFailure, UnavailableRetryAfterIsTheBreakersNextProbe) {
  FakeStore store;
  store.error = UnavailableError("breaker open");
  store.unavailable_for = std::chrono::milliseconds(7'300);
  ManualClock clock;
  EnforcerOptions no_jitter;
  no_jitter.retry_after_jitter = 0;
  auto plain = *Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), &store, &clock, no_jitter);
  TestRequest r;
  EXPECT_EQ(FindHeader(plain->Check(r.View()), "Retry-After"), "8");  // 7.3 s rounded up
  // With jitter: never earlier than the probe, at most 1 + jitter times later,
  // and the same for the same client.
  EnforcerOptions jitter;
  jitter.retry_after_jitter = 1.0;
  auto spread = *Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), &store, &clock, jitter);
  const int64_t first = spread->Check(r.View()).retry_after_seconds;
  EXPECT_GE(first, 8);
  EXPECT_LE(first, 15);
  EXPECT_EQ(spread->Check(r.View()).retry_after_seconds, first);
}

TEST(StoreFailure, FailOpenAnswerIsAllowedAndUnenforced) {
  FakeStore store;
  ManualClock clock;
  auto enforcer = *Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), &store, &clock, {});
  TestRequest r;
  CheckOutcome o = enforcer->Check(r.View());
  EXPECT_TRUE(o.allowed());
  EXPECT_FALSE(o.enforced);
  // Only the marker: no RateLimit headers for a decision that was not made.
  ASSERT_EQ(o.headers.size(), 1u);
  EXPECT_EQ(FindHeader(o, "Tollgate-Unenforced"), "store-unavailable");
  EXPECT_EQ(enforcer->Counters()[0].unenforced, 1u);
  store.fail_open_allowed = false;  // fail-closed without state
  CheckOutcome closed = enforcer->Check(r.View());
  EXPECT_EQ(closed.http_status, 503);
  EXPECT_FALSE(closed.enforced);
}

TEST(StoreFailure, UnenforcedMarkerCanBeRenamedOrTurnedOff) {
  FakeStore store;
  ManualClock clock;
  EnforcerOptions off;
  off.unenforced_header = "";
  auto quiet = *Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), &store, &clock, off);
  TestRequest r;
  EXPECT_TRUE(quiet->Check(r.View()).headers.empty());
  EnforcerOptions renamed;
  renamed.unenforced_header = "X-Not-Limited";
  auto loud = *Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), &store, &clock, renamed);
  EXPECT_EQ(FindHeader(loud->Check(r.View()), "X-Not-Limited"), "store-unavailable");
  EnforcerOptions bad;
  bad.unenforced_header = "Not A Header";
  EXPECT_FALSE(Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), &store, &clock, bad).ok());
}

TEST(StoreFailure, NoRuleAppliesMeansNoStoreCall) {
  FakeStore store;
  store.error = UnavailableError("down");
  ManualClock clock;
  auto enforcer =
      *Enforcer::Create(*PolicyStore::FromText(R"({"name": "k", "limit_keys": ["header:x-api-key"],
                                 "algorithm_config": {"rps": 1, "burst": 1}})"),
                        &store, &clock, {});
  TestRequest r;
  EXPECT_TRUE(enforcer->Check(r.View()).allowed());
  EXPECT_EQ(store.calls, 0);
}

TEST(ExplicitItems, ShareBucketsWithRequests) {
  Harness h(kSeedTiered, HsOptions());
  const ExplicitItem item{.rule = "free", .key = "k1", .cost = 5};
  auto o = h.enforcer->CheckItems(std::span(&item, 1));
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->allowed());
  EXPECT_EQ(o->rules[0].decision.remaining, 15);
  TestRequest r;
  r.Header("x-api-key", "k1");
  EXPECT_EQ(h.Check(r).rules[0].decision.remaining, 14);
}

TEST(ExplicitItems, ErrorsAndOverrides) {
  Harness h(kSeedTiered);
  const ExplicitItem unknown{.rule = "gold", .key = "k"};
  EXPECT_EQ(h.enforcer->CheckItems(std::span(&unknown, 1)).status().code(),
            StatusCode::kInvalidArgument);
  const ExplicitItem no_rule{.key = "k"};
  EXPECT_FALSE(h.enforcer->CheckItems(std::span(&no_rule, 1)).ok());
  const ExplicitItem negative{.rule = "free", .key = "k", .cost = -1};
  EXPECT_FALSE(h.enforcer->CheckItems(std::span(&negative, 1)).ok());
  ExplicitItem bad_limit{.key = "k"};
  bad_limit.limit_override = LimitSpec{.rate = 0, .burst = 1};
  EXPECT_FALSE(h.enforcer->CheckItems(std::span(&bad_limit, 1)).ok());
  ExplicitItem adhoc{.key = "k", .cost = 1, .override_name = "envoy_rps"};
  adhoc.limit_override = LimitSpec{.rate = 1, .burst = 2};
  std::vector<ExplicitItem> items = {adhoc, {.rule = "free", .key = "k", .cost = 1}};
  auto o = h.enforcer->CheckItems(items);
  ASSERT_TRUE(o.ok());
  ASSERT_EQ(o->rules.size(), 2u);
  EXPECT_EQ(o->rules[0].rule, "envoy_rps");
  (void)h.enforcer->CheckItems(items);
  auto third = h.enforcer->CheckItems(items);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->http_status, 429);
  EXPECT_EQ(third->rules[third->denied_rule].rule, "envoy_rps");
  // All-or-nothing: "free" was charged twice, not three times.
  EXPECT_EQ(third->rules[1].decision.remaining, 18);
  // A single-rule policy accepts items without a rule name.
  Harness single(kSeedGlobalRps);
  const ExplicitItem implicit{.key = "1.2.3.4"};
  auto s = single.enforcer->CheckItems(std::span(&implicit, 1));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rules[0].rule, "global-rps");
}

// A handle found once (HandleFor) names the same counters as the rule's name:
// items with it and items looked up by name count together.
TEST(ExplicitItems, AHandleCountsUnderItsRule) {
  Harness h(R"({"rules": []})");
  const Limit limit = *Limit::Create(LimitSpec{.rate = 1, .burst = 5});
  const RuleHandle handle = h.enforcer->HandleFor("d.rule");
  ASSERT_TRUE(handle.valid());
  EXPECT_EQ(h.enforcer->HandleFor("d.rule").state(), handle.state());
  ExplicitItem by_handle{.key = "k", .cost = 1, .override_name = "d.rule"};
  by_handle.limit = &limit;
  by_handle.handle = handle;
  ExplicitItem by_name = by_handle;
  by_name.handle = RuleHandle();
  ASSERT_TRUE(h.enforcer->CheckItems(std::span(&by_handle, 1)).ok());
  ASSERT_TRUE(h.enforcer->CheckItems(std::span(&by_name, 1)).ok());
  uint64_t allowed = 0;
  for (const RuleCounters& c : h.enforcer->Counters()) {
    if (c.rule == "d.rule") allowed = c.allowed;
  }
  EXPECT_EQ(allowed, 2u);
}

// A call an enforced deny-all item rejects is only peeked: each store rule
// reports whether its cost would fit now and, if not, when (the Envoy
// adapter's shadow and quota rules answer from it).
TEST(ExplicitItems, PeekedRulesReportWhenTheirCostWouldFit) {
  Harness h(R"({"rules": []})");
  const Limit two = *Limit::Create({.rate = 1, .burst = 2});  // 1/s, bucket of 2
  ExplicitItem store_item{.key = "k", .cost = 1, .override_name = "d.tb"};
  store_item.limit = &two;
  ExplicitItem deny{.key = "k", .cost = 1, .override_name = "d.never"};
  deny.storeless = ExplicitItem::Storeless::kDenyAll;
  Result<CheckOutcome> charged = h.enforcer->CheckItems(std::span(&store_item, 1));
  ASSERT_TRUE(charged.ok());
  EXPECT_FALSE(charged->rules[0].peek.has_value());  // charged, not peeked

  auto peek = [&](int64_t cost) {
    ExplicitItem item = store_item;
    item.cost = cost;
    const ExplicitItem items[] = {item, deny};
    Result<CheckOutcome> o = h.enforcer->CheckItems(items);
    EXPECT_TRUE(o.ok());
    EXPECT_EQ(o->verdict, CheckOutcome::Verdict::kReject);
    EXPECT_EQ(o->rules[0].decision.remaining, 1);  // one token left, nothing charged
    EXPECT_TRUE(o->rules[0].peek.has_value());
    return o->rules[0].peek.value_or(RuleOutcome::Peek{});
  };
  EXPECT_TRUE(peek(1).fits);
  EXPECT_EQ(peek(1).wait, Nanos(0));
  EXPECT_FALSE(peek(2).fits);
  EXPECT_EQ(peek(2).wait, std::chrono::seconds(1));  // the second token refills in 1 s
  EXPECT_FALSE(peek(3).fits);
  EXPECT_EQ(peek(3).wait, Decision::kNever);  // above the burst
}

// The fields a front end with its own rule table uses (the Envoy adapter):
// a compiled limit, shadow, a verbatim bucket key, storeless items, the name
// in headers, and the async entry point.
TEST(ExplicitItems, AdHocRulesOfAFrontEnd) {
  Harness h(R"({"rules": []})");
  const Limit two = *Limit::Create({.rate = 1, .burst = 2});
  ExplicitItem store_item{.key = "k", .cost = 1, .override_name = "d.fw"};
  store_item.limit = &two;
  store_item.bucket_key = "rls|tb|d|fw=k";
  store_item.report_name = "two_a_second";
  auto check = [&](std::vector<ExplicitItem> items) {
    std::optional<Result<CheckOutcome>> got;
    h.enforcer->CheckItemsAsync(items, [&](Result<CheckOutcome> r) { got = std::move(r); });
    EXPECT_TRUE(got.has_value());  // the local store answers inline
    EXPECT_TRUE(got->ok()) << got->status().ToString();
    return std::move(**got);
  };
  CheckOutcome o = check({store_item});
  EXPECT_TRUE(o.allowed());
  EXPECT_EQ(o.rules[0].rule, "d.fw");
  EXPECT_EQ(o.rules[0].decision.remaining, 1);
  EXPECT_EQ(FindHeader(o, "RateLimit-Policy"), "\"two_a_second\";q=2;w=2");
  // The bucket is the verbatim key: a peek at it through the store sees the charge.
  const AcquireItem peek{"rls|tb|d|fw=k", &two, 0};
  EXPECT_EQ(h.store->Acquire(std::span(&peek, 1))->decisions[0].remaining, 1);

  // Deny-all: rejects without the store and only peeks the other items.
  ExplicitItem deny{.key = "k", .cost = 1, .override_name = "d.never"};
  deny.storeless = ExplicitItem::Storeless::kDenyAll;
  o = check({store_item, deny});
  EXPECT_EQ(o.verdict, CheckOutcome::Verdict::kReject);
  EXPECT_EQ(o.rules[o.denied_rule].rule, "d.never");
  EXPECT_EQ(o.rules[0].decision.remaining, 1);  // peeked, not charged
  EXPECT_EQ(h.store->Acquire(std::span(&peek, 1))->decisions[0].remaining, 1);
  deny.cost = 0;  // a check-only call fits
  EXPECT_TRUE(check({deny}).allowed());

  // Unlimited always fits; shadow never rejects.
  ExplicitItem unlimited{.key = "k", .cost = 5, .override_name = "d.free"};
  unlimited.storeless = ExplicitItem::Storeless::kUnlimited;
  ExplicitItem shadow = store_item;
  shadow.shadow = true;
  shadow.cost = 2;  // one token is left
  o = check({unlimited, shadow});
  EXPECT_TRUE(o.allowed());
  EXPECT_TRUE(o.rules[1].shadow);
  EXPECT_EQ(o.rules[0].decision.remaining, INT64_MAX);

  std::map<std::string, RuleCounters> counters;
  for (const RuleCounters& c : h.enforcer->Counters()) counters[c.rule] = c;
  EXPECT_EQ(counters["d.fw"].allowed, 1u);
  EXPECT_EQ(counters["d.fw"].shadow_rejected, 1u);
  EXPECT_EQ(counters["d.fw"].rejected, 0u);  // peeked in the rejected call: not the denier
  EXPECT_EQ(counters["d.never"].rejected, 1u);
  EXPECT_EQ(counters["d.never"].allowed, 1u);
  EXPECT_EQ(counters["d.free"].allowed, 1u);

  // Invalid items fail inline.
  ExplicitItem negative = store_item;
  negative.cost = -1;
  bool failed = false;
  h.enforcer->CheckItemsAsync(std::span(&negative, 1),
                              [&](Result<CheckOutcome> r) { failed = !r.ok(); });
  EXPECT_TRUE(failed);
}

TEST(Async, SameOutcomeAsCheck) {
  Harness h(kStacked);
  TestRequest r;
  r.Header("x-api-key", "k");
  int calls = 0;
  CheckOutcome got;
  h.enforcer->CheckAsync(r.View(), [&](CheckOutcome o) {
    ++calls;
    got = std::move(o);
  });
  ASSERT_EQ(calls, 1);
  EXPECT_TRUE(got.allowed());
  EXPECT_EQ(got.rules.size(), 2u);
  EXPECT_EQ(got.rules[1].decision.remaining, 19);
  // Shadow-only denial goes through the second async round.
  Harness s(kShadowed);
  TestRequest sr;
  for (int i = 0; i < 2; ++i) {
    s.enforcer->CheckAsync(sr.View(), [&](CheckOutcome o) {
      ++calls;
      got = std::move(o);
    });
  }
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(got.allowed());
  EXPECT_EQ(got.rules[0].decision.remaining, 1);
}

TEST(Explain, ShowsRulesKeysAndStateWithoutCharging) {
  Harness h(kStacked, HsOptions());
  TestRequest r;
  r.Peer("192.0.2.1").Header("x-api-key", "k1");
  (void)h.Check(r);
  CheckOutcome e = h.enforcer->Explain(r.View());
  EXPECT_TRUE(e.allowed());
  ASSERT_EQ(e.rules.size(), 2u);
  EXPECT_EQ(e.rules[0].decision.remaining, 9);
  EXPECT_EQ(e.rules[1].decision.remaining, 19);
  std::string trace;
  for (auto& t : e.trace) trace += t + "\n";
  EXPECT_NE(trace.find("global-rps: applies, key 192.0.2.1, cost 1"), std::string::npos) << trace;
  EXPECT_NE(trace.find("enterprise: no match (jwt:plan equals enterprise failed); jwt claims "
                       "unusable: no token"),
            std::string::npos)
      << trace;
  EXPECT_NE(trace.find("free: applies, key k1"), std::string::npos) << trace;
  // Nothing was charged.
  EXPECT_EQ(h.enforcer->Explain(r.View()).rules[0].decision.remaining, 9);
  EXPECT_EQ(h.Check(r).rules[0].decision.remaining, 8);
  for (const auto& c : h.enforcer->Counters()) {
    if (c.rule == "global-rps") {
      EXPECT_EQ(c.allowed, 2u);
    }
  }
}

TEST(Shaping, LeakyBucketDelay) {
  Harness h(R"({"name": "shape", "limit_keys": ["const:x"], "algorithm": "leaky_bucket",
               "algorithm_config": {"rps": 10, "burst": 10, "max_delay_ms": 1000}})");
  TestRequest r;
  Nanos last{0};
  for (int i = 0; i < 5; ++i) {
    CheckOutcome o = h.Check(r);
    ASSERT_TRUE(o.allowed());
    EXPECT_GE(o.delay, last);
    last = o.delay;
  }
  EXPECT_GT(last, Nanos(0));
}

TEST(HeaderStyles, ConfiguredPerEnforcer) {
  EnforcerOptions o;
  o.header_styles = {HeaderStyle::kXRateLimitEpoch};
  o.reason_header = "";
  Harness h(kSeedGlobalRps, o);
  TestRequest r;
  CheckOutcome first = h.Check(r);
  EXPECT_EQ(FindHeader(first, "X-RateLimit-Limit"), "10");
  EXPECT_EQ(FindHeader(first, "X-RateLimit-Remaining"), "9");
  EXPECT_EQ(FindHeader(first, "X-RateLimit-Reset"), std::to_string(h.WallSeconds() + 1));
  EXPECT_FALSE(HasHeader(first, "RateLimit"));
  for (int i = 0; i < 9; ++i) (void)h.Check(r);
  CheckOutcome rej = h.Check(r);
  EXPECT_EQ(rej.http_status, 429);
  EXPECT_FALSE(HasHeader(rej, "X-RateLimit-Reason"));
  EXPECT_TRUE(HasHeader(rej, "Retry-After"));
}

TEST(HeaderStyles, SeveralAtOnceEachOnceAndConsistent) {
  EnforcerOptions o;
  o.header_styles = {HeaderStyle::kDraft11, HeaderStyle::kDraft03, HeaderStyle::kXRateLimit};
  o.retry_after_jitter = 5;  // far from the raw wait, so a reset left unjittered would show
  Harness h(kSeedGlobalRps, o);
  TestRequest r;
  auto count = [](const CheckOutcome& c, std::string_view name) {
    int n = 0;
    for (const auto& f : c.headers) n += f.name == name;
    return n;
  };
  CheckOutcome first = h.Check(r);
  for (std::string_view name :
       {"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining",
        "RateLimit-Reset", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}) {
    EXPECT_EQ(count(first, name), 1) << name;
  }
  EXPECT_EQ(FindHeader(first, "RateLimit"), R"("global-rps";r=9;t=1)");
  EXPECT_EQ(FindHeader(first, "RateLimit-Remaining"), "9");
  EXPECT_EQ(FindHeader(first, "X-RateLimit-Remaining"), "9");
  EXPECT_EQ(FindHeader(first, "RateLimit-Limit"), "10");
  EXPECT_EQ(FindHeader(first, "X-RateLimit-Limit"), "10");
  for (int i = 0; i < 9; ++i) (void)h.Check(r);
  CheckOutcome rej = h.Check(r);
  ASSERT_EQ(rej.http_status, 429);
  EXPECT_EQ(count(rej, "Retry-After"), 1);
  const std::string retry = FindHeader(rej, "Retry-After");
  ASSERT_FALSE(retry.empty());
  EXPECT_EQ(std::to_string(rej.retry_after_seconds), retry);
  EXPECT_EQ(FindHeader(rej, "RateLimit"), R"("global-rps";r=0;t=)" + retry);
  EXPECT_EQ(FindHeader(rej, "RateLimit-Reset"), retry);
  EXPECT_EQ(FindHeader(rej, "X-RateLimit-Reset"), retry);
  EXPECT_EQ(FindHeader(rej, "RateLimit-Remaining"), "0");
}

// A rule's "headers" overrides the server-wide styles for its own report;
// rules without one keep the server's. On an allow each style is rendered
// from the rules that use it; on a 429 the denying rule's styles alone.
TEST(HeaderStyles, ARulesOwnStylesOverrideTheServerDefault) {
  EnforcerOptions o;
  o.header_styles = {HeaderStyle::kDraft11};
  o.retry_after_jitter = 0;
  Harness h(R"({"rules": [
    {"name": "plain", "group": "plain", "limit_keys": ["header:k"], "algorithm_config": {"rps": 100, "burst": 100}},
    {"name": "legacy", "group": "legacy", "limit_keys": ["header:k"], "headers": ["x-ratelimit", "draft03"],
     "algorithm_config": {"rps": 1, "burst": 2}},
    {"name": "quiet", "group": "quiet", "limit_keys": ["header:k"], "headers": "none",
     "algorithm_config": {"rps": 10, "burst": 50}}]})",
            o);
  TestRequest r;
  r.Header("k", "a");
  CheckOutcome first = h.Check(r);
  ASSERT_TRUE(first.allowed());
  // draft11 carries the rules that inherit it (plain), not legacy nor quiet.
  EXPECT_EQ(FindHeader(first, "RateLimit"), R"("plain";r=99;t=1)");
  EXPECT_EQ(FindHeader(first, "RateLimit-Policy").find("legacy"), std::string::npos);
  EXPECT_EQ(FindHeader(first, "RateLimit-Policy").find("quiet"), std::string::npos);
  // legacy's own styles, its numbers.
  EXPECT_EQ(FindHeader(first, "X-RateLimit-Limit"), "2");
  EXPECT_EQ(FindHeader(first, "X-RateLimit-Remaining"), "1");
  EXPECT_EQ(FindHeader(first, "RateLimit-Limit"), "2");
  EXPECT_EQ(FindHeader(first, "RateLimit-Remaining"), "1");
  (void)h.Check(r);
  CheckOutcome rej = h.Check(r);
  ASSERT_EQ(rej.http_status, 429);
  // The denying rule's styles only: no draft11 fields on legacy's 429.
  EXPECT_FALSE(HasHeader(rej, "RateLimit"));
  EXPECT_FALSE(HasHeader(rej, "RateLimit-Policy"));
  EXPECT_EQ(FindHeader(rej, "X-RateLimit-Remaining"), "0");
  EXPECT_EQ(FindHeader(rej, "X-RateLimit-Reset"), FindHeader(rej, "Retry-After"));
  EXPECT_EQ(FindHeader(rej, "RateLimit-Reset"), FindHeader(rej, "Retry-After"));
}

// Two rules whose styles both send X-RateLimit-Reset: the field is sent once.
TEST(HeaderStyles, RuleStylesSendingTheSameFieldSendItOnce) {
  Harness h(R"({"rules": [
    {"name": "a", "group": "a", "limit_keys": ["header:k"], "headers": "x-ratelimit-epoch",
     "algorithm_config": {"rps": 1, "burst": 5}},
    {"name": "b", "group": "b", "limit_keys": ["header:k"], "headers": "x-ratelimit",
     "algorithm_config": {"rps": 1, "burst": 9}}]})");
  TestRequest r;
  r.Header("k", "a");
  CheckOutcome out = h.Check(r);
  int resets = 0;
  for (const auto& f : out.headers) resets += f.name == "X-RateLimit-Reset";
  EXPECT_EQ(resets, 1);
}

TEST(HeaderStyles, ConflictingListsAreRefused) {
  ManualClock clock;
  auto store = *LocalStore::Create({.clock = &clock});
  EnforcerOptions o;
  o.header_styles = {HeaderStyle::kXRateLimit, HeaderStyle::kXRateLimitEpoch};
  auto e = Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), store.get(), &clock, o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("X-RateLimit-Reset"), std::string::npos);
  o.header_styles = {HeaderStyle::kDraft11, HeaderStyle::kDraft11};
  EXPECT_FALSE(
      Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), store.get(), &clock, o).ok());
  o.header_styles = {};
  EXPECT_TRUE(
      Enforcer::Create(*PolicyStore::FromText(kSeedGlobalRps), store.get(), &clock, o).ok());
}

TEST(RetryAfterJitter, NeverBelowTheWaitAndStablePerClient) {
  EnforcerOptions o;
  o.retry_after_jitter = 1.0;
  Harness h(R"({"name": "slow", "limit_keys": ["header:k"],
               "algorithm_config": {"tokens_per_second": 0.1, "burst": 1}})",
            o);
  std::set<int64_t> seen;
  for (int i = 0; i < 100; ++i) {
    TestRequest r;
    r.Header("k", "client" + std::to_string(i));
    ASSERT_TRUE(h.Check(r).allowed());
    CheckOutcome a = h.Check(r);
    CheckOutcome b = h.Check(r);
    ASSERT_EQ(a.http_status, 429);
    EXPECT_GE(a.retry_after_seconds, 10);  // the real wait
    EXPECT_LE(a.retry_after_seconds, 20);
    EXPECT_EQ(a.retry_after_seconds, b.retry_after_seconds);
    seen.insert(a.retry_after_seconds);
  }
  EXPECT_GE(seen.size(), 5u);
}

TEST(Reload, UnchangedRulesKeepStateChangedLimitsKeepKeys) {
  Harness h(R"({"rules": [
    {"name": "a", "limit_keys": ["const:x"], "algorithm_config": {"rps": 1, "burst": 5}},
    {"name": "b", "group": "b", "limit_keys": ["const:x"], "algorithm_config": {"rps": 1, "burst": 5}}]})");
  TestRequest r;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Check(r).allowed());
  EXPECT_EQ(h.policies->generation(), 1u);
  // a unchanged, b's burst raised to 10, c new.
  ASSERT_TRUE(h.policies
                  ->ReloadFromText(R"({"rules": [
    {"name": "a", "limit_keys": ["const:x"], "algorithm_config": {"rps": 1, "burst": 5}},
    {"name": "b", "group": "b", "limit_keys": ["const:x"], "algorithm_config": {"rps": 1, "burst": 10}},
    {"name": "c", "group": "c", "limit_keys": ["const:x"], "algorithm_config": {"rps": 1, "burst": 5}}]})")
                  .empty());
  EXPECT_EQ(h.policies->generation(), 2u);
  CheckOutcome o = h.Check(r);
  ASSERT_EQ(o.rules.size(), 3u);
  EXPECT_EQ(o.rules[0].decision.remaining, 1);  // 5 - 4
  EXPECT_EQ(o.rules[1].decision.remaining, 6);  // same key, new burst: 10 - 4
  EXPECT_EQ(o.rules[2].decision.remaining, 4);  // fresh
  EXPECT_EQ(o.policy_generation, 2u);
}

TEST(Reload, BadPolicyKeepsTheOldOneAndReportsEveryError) {
  Harness h(kSeedGlobalRps);
  auto before = h.policies->Current();
  auto errors = h.policies->ReloadFromText(
      R"({"rules": [{"name": "x y", "limit_keys": [], "algorithm_config": {"rps": 0, "burst": 1}}]})");
  EXPECT_GE(errors.size(), 3u);
  EXPECT_EQ(h.policies->Current(), before);
  EXPECT_EQ(h.policies->generation(), 1u);
  EXPECT_EQ(h.policies->reload_failures(), 1u);
  auto last = h.policies->last_reload();
  EXPECT_FALSE(last.ok);
  EXPECT_EQ(last.errors.size(), errors.size());
  TestRequest r;
  EXPECT_EQ(h.Check(r).rules[0].rule, "global-rps");
}

TEST(Reload, FromFile) {
  const testing::ScopedTempDir dir;
  const std::string path = dir.File("policy.json");
  { std::ofstream(path) << kSeedGlobalRps; }
  auto store = PolicyStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->path(), path);
  { std::ofstream(path) << kSeedTiered; }
  EXPECT_TRUE((*store)->Reload().empty());
  EXPECT_EQ(SummarizePolicy(*(*store)->Current()).size(), 2u);
  { std::ofstream(path) << "{broken"; }
  EXPECT_FALSE((*store)->Reload().empty());
  EXPECT_EQ(SummarizePolicy(*(*store)->Current()).size(), 2u);
  EXPECT_FALSE(PolicyStore::Open("/nonexistent.json").ok());
  EXPECT_FALSE(PolicyStore::FromPolicy((*store)->Current())->Reload().empty());
}

TEST(Summary, DescribesRules) {
  auto store = *PolicyStore::FromText(kSeedTiered);
  auto s = SummarizePolicy(*store->Current());
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "enterprise");
  EXPECT_EQ(s[0].limit_keys, std::vector<std::string>{"header:x-api-key"});
  EXPECT_EQ(s[0].limit.burst(), 2000);
  EXPECT_NE(s[0].description.find("match=jwt:plan equals enterprise"), std::string::npos);
}

TEST(EnforcerOptionsValidation, BadOptionsAreRefused) {
  ManualClock clock;
  FakeStore store;
  auto policies = *PolicyStore::FromText(kSeedGlobalRps);
  EnforcerOptions jitter;
  jitter.retry_after_jitter = -1;
  EXPECT_FALSE(Enforcer::Create(policies, &store, &clock, jitter).ok());
  EnforcerOptions cidr;
  cidr.trusted_proxies = {"10.0.0.0/99"};
  EXPECT_FALSE(Enforcer::Create(policies, &store, &clock, cidr).ok());
  EnforcerOptions header;
  header.reason_header = "X Bad";
  EXPECT_FALSE(Enforcer::Create(policies, &store, &clock, header).ok());
  EXPECT_FALSE(Enforcer::Create(nullptr, &store, &clock, {}).ok());
  EXPECT_FALSE(Enforcer::Create(policies, nullptr, &clock, {}).ok());
}

TEST(VerdictName, EveryVerdictHasItsOwnName) {
  EXPECT_EQ(VerdictName(CheckOutcome::Verdict::kAllow), "allow");
  EXPECT_EQ(VerdictName(CheckOutcome::Verdict::kReject), "reject");
  EXPECT_EQ(VerdictName(CheckOutcome::Verdict::kUnavailable), "unavailable");
}

}  // namespace
}  // namespace tollgate
