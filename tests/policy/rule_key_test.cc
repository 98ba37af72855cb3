// KeyForRule (tollgate/policy.h) names the bucket the Enforcer decides a
// request on: for hostile values (spaces, '|', control bytes, a leading '~',
// long values), several limit_keys, an absent source and a const source,
// charging a request and peeking KeyForRule's key see the same bucket.
#include <gtest/gtest.h>

#include "policy_test_util.h"
#include "tollgate/local_store.h"

namespace tollgate {
namespace {

constexpr char kPolicy[] = R"({"rules": [
  {"name": "pair", "limit_keys": ["header:x-api-key", "ip:address", "const:eu"],
   "algorithm_config": {"rps": 0.001, "burst": 5}},
  {"name": "vip", "limit_keys": ["header:x-api-key"], "action": "allow",
   "match": {"header:x-api-key": {"equals": "vip"}}},
  {"name": "inflight", "limit_keys": ["header:x-api-key"], "group": "conc",
   "match": {"path": {"prefix": "/never"}},
   "algorithm": "concurrency", "algorithm_config": {"max_in_flight": 20, "lease": "2m"}},
  {"name": "shared", "limit_keys": ["header:x-tenant"], "missing_key": "shared",
   "algorithm": "fixed_window", "algorithm_config": {"window": "1h", "burst": 100}}]})";

class RuleKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalStoreOptions o;
    o.clock = &clock_;
    store_ = *LocalStore::Create(o);
    policies_ = *PolicyStore::FromText(kPolicy);
    enforcer_ = *Enforcer::Create(policies_, store_.get(), &clock_, {});
  }
  // The bucket KeyForRule names, peeked: its remaining tokens.
  int64_t Remaining(std::string_view rule, std::vector<std::optional<std::string>> values) {
    RuleKeyResult r = KeyForRule(*policies_->Current(), rule, values);
    EXPECT_TRUE(r.rule_found);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    if (!r.key) return -1;
    return store_->Acquire(r.key->bucket_key, r.key->limit, 0).remaining;
  }

  ManualClock clock_;
  std::unique_ptr<LocalStore> store_;
  std::shared_ptr<PolicyStore> policies_;
  std::unique_ptr<Enforcer> enforcer_;
};

TEST_F(RuleKeyTest, NamesTheBucketARequestIsDecidedOn) {
  const std::vector<std::string> hostile = {"plain",
                                            " padded\t",
                                            "a|b",
                                            "back\\slash",
                                            "ctl\x01\x7f",
                                            "~tilde",
                                            std::string(1000, 'L'),
                                            "caf\xc3\xa9"};
  for (const std::string& v : hostile) {
    SCOPED_TRACE(v.substr(0, 40));
    testing::TestRequest r;
    r.Header("x-api-key", v).Header("x-tenant", "t").Peer("198.51.100.4");
    ASSERT_TRUE(enforcer_->Check(r.View()).allowed());
    EXPECT_EQ(Remaining("pair", {v, "198.51.100.4", std::nullopt}), 4);
    EXPECT_EQ(Remaining("pair", {v, "198.51.100.4", "eu"}), 4);          // the constant itself
    EXPECT_EQ(Remaining("pair", {v, "198.51.100.5", std::nullopt}), 5);  // another bucket
  }
  // An absent source: the shared bucket of the missing marker.
  testing::TestRequest no_tenant;
  no_tenant.Header("x-api-key", "x");
  ASSERT_TRUE(enforcer_->Check(no_tenant.View()).allowed());
  EXPECT_EQ(Remaining("shared", {std::nullopt}), 99);
  EXPECT_EQ(Remaining("shared", {"\\missing"}), 100);  // a literal value is escaped apart
}

TEST_F(RuleKeyTest, RefusesWhatNamesNoBucket) {
  const Policy& p = *policies_->Current();
  std::vector<std::optional<std::string>> one = {"k"};
  RuleKeyResult unknown = KeyForRule(p, "nope", one);
  EXPECT_FALSE(unknown.rule_found);
  EXPECT_FALSE(unknown.key);
  RuleKeyResult count = KeyForRule(p, "pair", one);
  EXPECT_TRUE(count.rule_found);
  EXPECT_EQ(count.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(count.status.message().find("keys on 3 value(s), got 1"), std::string::npos)
      << count.status.message();
  std::vector<std::optional<std::string>> wrong_const = {"k", "1.2.3.4", "us"};
  RuleKeyResult c = KeyForRule(p, "pair", wrong_const);
  EXPECT_EQ(c.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status.message().find("values[2]: const:eu is always 'eu'"), std::string::npos)
      << c.status.message();
  RuleKeyResult storeless = KeyForRule(p, "vip", one);
  EXPECT_TRUE(storeless.rule_found);
  EXPECT_EQ(storeless.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(storeless.status.message().find("keeps no state"), std::string::npos)
      << storeless.status.message();
  RuleKeyResult leases = KeyForRule(p, "inflight", one);
  EXPECT_EQ(leases.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(leases.status.message().find("concurrency rule"), std::string::npos)
      << leases.status.message();
  RuleKeyResult ok =
      KeyForRule(p, "pair", std::vector<std::optional<std::string>>{"k", "1.2.3.4", std::nullopt});
  ASSERT_TRUE(ok.key);
  EXPECT_EQ(ok.key->identity, "k|1.2.3.4|eu");
  EXPECT_EQ(ok.key->limit_keys,
            (std::vector<std::string>{"header:x-api-key", "ip:address", "const:eu"}));
}

// ExplicitItem::values (/v1/decide's "values"): an item names the bucket of
// a request on a rule with several limit_keys, hostile values included, and
// the request's identity: rollout (enforce_percent hashes it) and the lease
// set of a concurrency rule agree with the request's.
TEST_F(RuleKeyTest, ItemValuesShareTheRequestsBucket) {
  for (const std::string& v :
       {std::string("plain"), std::string("a|b"), std::string("~t\x01"), std::string(1000, 'L')}) {
    SCOPED_TRACE(v.substr(0, 40));
    testing::TestRequest r;
    r.Header("x-api-key", v).Peer("198.51.100.4");
    ASSERT_TRUE(enforcer_->Check(r.View()).allowed());  // 4 left
    const std::vector<std::optional<std::string>> values = {v, "198.51.100.4", std::nullopt};
    ExplicitItem item;
    item.rule = "pair";
    item.values = values;
    Result<CheckOutcome> out = enforcer_->CheckItems({&item, 1});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ASSERT_EQ(out->rules.size(), 1u);
    EXPECT_EQ(out->rules[0].decision.remaining, 3);
    EXPECT_EQ(Remaining("pair", values), 3);
    EXPECT_EQ(out->rules[0].key, KeyForRule(*policies_->Current(), "pair", values).key->identity);
  }
}

TEST_F(RuleKeyTest, ItemValuesAreCheckedAgainstTheRule) {
  auto refusal = [&](ExplicitItem item) {
    Result<CheckOutcome> out = enforcer_->CheckItems({&item, 1});
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    return out.ok() ? std::string() : out.status().message();
  };
  const std::vector<std::optional<std::string>> one = {"k"};
  const std::vector<std::optional<std::string>> wrong_const = {"k", "1.2.3.4", "us"};
  EXPECT_EQ(refusal({.rule = "pair", .values = one}),
            "items[0]: values: rule 'pair' keys on 3 value(s), got 1");
  EXPECT_EQ(refusal({.rule = "pair", .values = wrong_const}),
            "items[0]: values[2]: const:eu is always 'eu'");
  EXPECT_EQ(refusal({.rule = "shared", .key = "k", .values = one}),
            "items[0]: key or values, not both");
  EXPECT_EQ(refusal({.rule = "", .values = one, .limit_override = LimitSpec{}}),
            "items[0]: values need a rule name (they are its limit_keys values)");
  // One string names no bucket of a rule with several limit_keys.
  EXPECT_EQ(refusal({.rule = "pair", .key = "k|1.2.3.4|eu"}),
            "items[0]: key: rule 'pair' keys on 3 values (header:x-api-key, ip:address, "
            "const:eu): name them with values");
  // Nothing was charged by a refused call.
  EXPECT_EQ(Remaining("shared", {"k"}), 100);
}

TEST(RuleKeyRolloutTest, ItemValuesGetTheRequestsRolloutShare) {
  ManualClock clock;
  LocalStoreOptions o;
  o.clock = &clock;
  std::unique_ptr<LocalStore> store = *LocalStore::Create(o);
  std::shared_ptr<PolicyStore> policies = *PolicyStore::FromText(R"({"rules": [
    {"name": "half", "limit_keys": ["header:x-user", "header:x-route"], "enforce_percent": 50,
     "algorithm_config": {"rps": 1, "burst": 1}}]})");
  std::unique_ptr<Enforcer> enforcer = *Enforcer::Create(policies, store.get(), &clock, {});
  int shadowed = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string user = "u" + std::to_string(i), route = "/r|" + std::to_string(i % 7);
    testing::TestRequest r;
    r.Header("x-user", user).Header("x-route", route);
    const CheckOutcome request = enforcer->Explain(r.View());
    ASSERT_EQ(request.rules.size(), 1u);
    const std::vector<std::optional<std::string>> values = {user, route};
    ExplicitItem item{.rule = "half", .cost = 0};
    item.values = values;
    Result<CheckOutcome> out = enforcer->CheckItems({&item, 1});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->rules[0].shadow_reason, request.rules[0].shadow_reason) << user << route;
    shadowed += request.rules[0].shadow ? 1 : 0;
  }
  // Both shares occur, so the comparison above saw both answers.
  EXPECT_GT(shadowed, 40);
  EXPECT_LT(shadowed, 160);
}

}  // namespace
}  // namespace tollgate
