// PolicyWarnings: rules a valid policy holds that can never apply (two rules
// on the same limit_keys without a match on the first, a rule after an
// allow-everything or deny-everything rule), and none for the example
// policies an operator starts from.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "policy_test_util.h"

namespace tollgate {
namespace {

std::vector<ConfigError> WarningsOf(std::string_view text) {
  ParsedPolicy p = ParsePolicy(text);
  EXPECT_TRUE(p.policy) << (p.errors.empty() ? "" : p.errors[0].ToString());
  return p.policy ? PolicyWarnings(*p.policy) : std::vector<ConfigError>{};
}

TEST(PolicyWarnings, ASecondRuleOnTheSameKeysBehindACatchAllNeverApplies) {
  auto w = WarningsOf(R"({"rules": [
    {"name": "per-key", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "per-key-daily", "limit_keys": ["header:x-api-key"],
     "algorithm_config": {"count": 1000, "period": "1d"}}]})");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].path, "rules[1]");
  EXPECT_NE(w[0].message.find("never applies: rules[0] (\"per-key\") has the same limit_keys"),
            std::string::npos)
      << w[0].message;
  EXPECT_NE(w[0].message.find("give \"per-key-daily\" a \"group\""), std::string::npos);
}

TEST(PolicyWarnings, TiersWithAMatchOrRulesInGroupsOfTheirOwnAreFine) {
  EXPECT_TRUE(WarningsOf(R"({"rules": [
    {"name": "gold", "limit_keys": ["header:x-api-key"], "match": {"header:x-plan": {"equals": "gold"}},
     "algorithm_config": {"rps": 50, "burst": 100}},
    {"name": "free", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "daily", "limit_keys": ["header:x-api-key"], "group": "daily",
     "algorithm_config": {"count": 1000, "period": "1d"}},
    {"name": "per-ip", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 20, "burst": 40}}]})")
                  .empty());
}

TEST(PolicyWarnings, AnExplicitGroupIsNamedInTheWarning) {
  auto w = WarningsOf(R"({"rules": [
    {"name": "a", "limit_keys": ["ip:address"], "group": "g", "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "b", "limit_keys": ["header:k"], "group": "g", "algorithm_config": {"rps": 5, "burst": 10}}]})");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].message.find("the same \"group\" (\"g\")"), std::string::npos) << w[0].message;
}

TEST(PolicyWarnings, NothingAfterAnAllowOrAnEnforcedDenyOfEveryRequest) {
  auto w = WarningsOf(R"({"rules": [
    {"name": "limited", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "everyone", "action": "allow"},
    {"name": "after-1", "limit_keys": ["header:k"], "algorithm_config": {"rps": 5, "burst": 10}},
    {"name": "after-2", "action": "deny", "match": {"header:x-bad": {"present": true}}}]})");
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].path, "rules[2]");
  EXPECT_EQ(w[1].path, "rules[3]");
  EXPECT_NE(w[0].message.find("rules[1] (\"everyone\") allows every request"), std::string::npos)
      << w[0].message;
  // A deny of everything in shadow mode stops nothing: only logged.
  EXPECT_TRUE(WarningsOf(R"({"rules": [
    {"name": "trial-ban", "action": "deny", "mode": "shadow"},
    {"name": "later", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 5, "burst": 10}}]})")
                  .empty());
  auto deny = WarningsOf(R"({"rules": [
    {"name": "closed", "action": "deny"},
    {"name": "later", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 5, "burst": 10}}]})");
  ASSERT_EQ(deny.size(), 1u);
  EXPECT_NE(deny[0].message.find("denies every request"), std::string::npos);
}

// Every policy in examples/ is one an operator copies: none has a dead rule.
TEST(PolicyWarnings, NoExamplePolicyHasARuleThatNeverApplies) {
  int checked = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(testing::SourcePath("examples"))) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".json" || path.find("tollgated") != std::string::npos ||
        path.find("/envoy/") != std::string::npos) {
      continue;
    }
    ParsedPolicy p = ParsePolicyFile(path);
    if (!p.policy) continue;  // not a policy (server configs, dashboards)
    ++checked;
    for (const ConfigError& w : PolicyWarnings(*p.policy))
      ADD_FAILURE() << path << ": " << w.ToString();
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
}  // namespace tollgate
