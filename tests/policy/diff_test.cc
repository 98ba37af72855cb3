// DiffPolicies: what the admin API's dry run and `tollgate policy diff` report.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "tollgate/policy.h"

namespace tollgate {
namespace {

std::shared_ptr<const Policy> Parse(const std::string& rules) {
  ParsedPolicy p = ParsePolicy(R"({"rules": [)" + rules + "]}");
  EXPECT_TRUE(p.errors.empty()) << (p.errors.empty() ? "" : p.errors.front().ToString());
  return p.policy;
}

std::string Bucket(const std::string& name, int rps, int burst, const std::string& extra = "") {
  return R"({"name": ")" + name +
         R"(", "limit_keys": ["ip:address"], "algorithm_config": {"rps": )" + std::to_string(rps) +
         R"(, "burst": )" + std::to_string(burst) + "}" + extra + "}";
}

TEST(DiffPolicies, IdenticalPoliciesHaveNoChanges) {
  auto a = Parse(Bucket("a", 5, 10));
  auto b = Parse(Bucket("a", 5, 10));
  EXPECT_TRUE(DiffPolicies(*a, *b).empty());
  EXPECT_EQ(FormatPolicyDiff({}), "no changes\n");
}

TEST(DiffPolicies, AddedAndRemovedRulesByName) {
  auto a = Parse(Bucket("keep", 5, 10) + "," + Bucket("gone", 1, 1));
  auto b = Parse(Bucket("keep", 5, 10) + "," + Bucket("new", 2, 2));
  std::vector<RuleChange> d = DiffPolicies(*a, *b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, RuleChange::Kind::kAdded);
  EXPECT_EQ(d[0].rule, "new");
  EXPECT_EQ(d[0].before, "");
  EXPECT_EQ(d[1].kind, RuleChange::Kind::kRemoved);
  EXPECT_EQ(d[1].rule, "gone");
  EXPECT_EQ(d[1].after, "");
}

TEST(DiffPolicies, RaisedLoweredAndMixedLimits) {
  auto a =
      Parse(Bucket("rate", 5, 10) + "," + Bucket("burst", 5, 10) + "," + Bucket("mixed", 5, 10));
  auto b =
      Parse(Bucket("rate", 10, 10) + "," + Bucket("burst", 5, 6) + "," + Bucket("mixed", 4, 11));
  std::vector<RuleChange> d = DiffPolicies(*a, *b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].kind, RuleChange::Kind::kRaised) << d[0].before << " -> " << d[0].after;
  EXPECT_EQ(d[1].kind, RuleChange::Kind::kLowered);
  EXPECT_EQ(d[2].kind, RuleChange::Kind::kChanged);
  EXPECT_NE(d[0].before, d[0].after);
}

TEST(DiffPolicies, SameLimitOtherKeysOrModeIsChanged) {
  auto a = Parse(Bucket("a", 5, 10) + "," + Bucket("b", 5, 10));
  auto b = Parse(
      Bucket("a", 50, 100, R"(, "mode": "shadow")") + "," +
      R"({"name": "b", "limit_keys": ["header:x-api-key"], "algorithm_config": {"rps": 5, "burst": 10}})");
  std::vector<RuleChange> d = DiffPolicies(*a, *b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, RuleChange::Kind::kChanged);  // raised, but now shadow: not comparable
  EXPECT_EQ(d[1].kind, RuleChange::Kind::kChanged);
}

TEST(DiffPolicies, FormatIsOneLineAChange) {
  auto a = Parse(Bucket("a", 5, 10));
  auto b = Parse(Bucket("a", 10, 10) + "," + Bucket("c", 1, 1));
  std::vector<RuleChange> d = DiffPolicies(*a, *b);
  std::string text = FormatPolicyDiff(d);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  EXPECT_EQ(text.rfind("raised  a: ", 0), 0u) << text;
  EXPECT_NE(text.find(" -> "), std::string::npos) << text;
  EXPECT_NE(text.find("added   c: "), std::string::npos) << text;
}

}  // namespace
}  // namespace tollgate
