// Policy parsing and validation: the seed examples verbatim, every validation
// error path, and fuzzed input.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "policy/policy_impl.h"
#include "policy_test_util.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

using testing::kSeedGlobalRps;
using testing::kSeedTiered;

std::vector<std::string> Errors(std::string_view text) {
  ParsedPolicy p = ParsePolicy(text);
  std::vector<std::string> out;
  for (const auto& e : p.errors) out.push_back(e.ToString());
  EXPECT_EQ(p.policy == nullptr, !p.errors.empty()) << text;
  return out;
}

// A rule with `algorithm_config` and extra fields spliced in.
std::string RuleWith(const std::string& config, const std::string& extra = "") {
  return R"({"rules": [{"name": "r", "limit_keys": ["ip:address"], "algorithm_config": )" + config +
         extra + "}]}";
}

TEST(ParsePolicy, SeedGlobalRpsVerbatimIsASingleRulePolicy) {
  ParsedPolicy p = ParsePolicy(kSeedGlobalRps);
  ASSERT_TRUE(p.errors.empty()) << p.errors.front().ToString();
  ASSERT_EQ(p.policy->rules.size(), 1u);
  const Rule& r = p.policy->rules[0];
  EXPECT_EQ(r.name, "global-rps");
  EXPECT_EQ(r.keys.size(), 1u);
  EXPECT_EQ(r.keys[0].kind, Source::Kind::kIp);
  EXPECT_EQ(r.limit.algorithm(), Algorithm::kTokenBucket);
  EXPECT_EQ(r.limit.burst(), 10);
  EXPECT_EQ(r.limit.rate_micro(), 5'000'000);
  EXPECT_EQ(r.fixed_cost, 1);
  EXPECT_EQ(r.default_cost, 1);
  EXPECT_FALSE(r.shadow);
}

TEST(ParsePolicy, SeedTieredVerbatim) {
  ParsedPolicy p = ParsePolicy(kSeedTiered);
  ASSERT_TRUE(p.errors.empty()) << p.errors.front().ToString();
  ASSERT_EQ(p.policy->rules.size(), 2u);
  EXPECT_EQ(p.policy->rules[0].name, "enterprise");
  EXPECT_EQ(p.policy->rules[0].limit.burst(), 2000);
  ASSERT_EQ(p.policy->rules[0].match.size(), 1u);
  EXPECT_EQ(p.policy->rules[0].match[0].source.kind, Source::Kind::kJwt);
  EXPECT_EQ(p.policy->rules[1].name, "free");
  // Same limit_keys: one tier group.
  EXPECT_EQ(p.policy->group_count, 1);
  EXPECT_EQ(p.policy->group_of[0], p.policy->group_of[1]);
}

TEST(ParsePolicy, SeedConfigurationSnippetsAsRules) {
  // The seed's algorithm_config examples, wrapped in a minimal rule.
  EXPECT_TRUE(Errors(RuleWith(R"({
"tokens_per_second": 100,
"burst": 200,
"cost_source": "fixed",
"fixed_cost": 1,
"default_cost": 1
})"))
                  .empty());
  ParsedPolicy p = ParsePolicy(RuleWith(R"({
"tokens_per_second": 100,
"burst": 1000,
"cost_source": "header:x-request-weight",
"default_cost": 1
})"));
  ASSERT_TRUE(p.policy);
  EXPECT_EQ(p.policy->rules[0].cost_kind, Rule::CostKind::kHeader);
  EXPECT_EQ(p.policy->rules[0].cost_arg, "x-request-weight");
}

TEST(ParsePolicy, ThreeDocumentShapes) {
  EXPECT_TRUE(Errors(kSeedGlobalRps).empty());
  EXPECT_TRUE(Errors(std::string("[") + std::string(kSeedGlobalRps) + "]").empty());
  EXPECT_TRUE(Errors(std::string(R"({"rules": [)") + std::string(kSeedGlobalRps) + "]}").empty());
  EXPECT_TRUE(Errors(R"({"rules": []})").empty());
}

TEST(ParsePolicy, IssueExampleMessage) {
  auto errors = Errors(R"({"rules": [)" + std::string(kSeedGlobalRps) + R"(,
    {"name": "b", "limit_keys": ["ip:address"],
     "algorithm_config": {"tokens_per_second": 100, "burst": 50}}]})");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "rules[1].algorithm_config.burst: must be >= tokens_per_second (100)");
}

TEST(ParsePolicy, ReportsEveryErrorNotJustTheFirst) {
  auto errors = Errors(R"({"rules": [
    {"name": "a b", "limit_keys": ["nope"], "algorithm_config": {"rps": -1, "burst": 0.5}},
    {"limit_keys": [], "mode": "loud", "algorithm_config": {"rps": 1, "burst": 1}}]})");
  EXPECT_GE(errors.size(), 6u);
  auto has = [&](std::string_view s) {
    for (const auto& e : errors) {
      if (e.find(s) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(has("rules[0].name:"));
  EXPECT_TRUE(has("rules[0].limit_keys[0]:"));
  EXPECT_TRUE(has("rules[0].algorithm_config.rps: must be > 0"));
  EXPECT_TRUE(has("rules[0].algorithm_config.burst: must be a whole number"));
  EXPECT_TRUE(has("rules[1].name: is required"));
  EXPECT_TRUE(has("rules[1].limit_keys:"));
  EXPECT_TRUE(has("rules[1].mode:"));
}

TEST(ParsePolicy, SingleRulePathsHaveNoRulesPrefix) {
  auto errors = Errors(
      R"({"name": "x", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 10, "burst": 5}})");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "algorithm_config.burst: must be >= rps (10)");
}

struct ErrorCase {
  std::string json;
  std::string expected;  // a substring of one error (path: message)
};

class ValidationErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ValidationErrors, ReportsPathAndReason) {
  auto errors = Errors(GetParam().json);
  ASSERT_FALSE(errors.empty()) << GetParam().json;
  bool found = false;
  std::string all;
  for (const auto& e : errors) {
    found = found || e.find(GetParam().expected) != std::string::npos;
    all += e + "\n";
  }
  EXPECT_TRUE(found) << "expected '" << GetParam().expected << "' in:\n" << all;
}

const std::string kOk = R"({"rps": 1, "burst": 1})";

INSTANTIATE_TEST_SUITE_P(
    AllPaths, ValidationErrors,
    ::testing::Values(
        ErrorCase{"not json", "invalid JSON"}, ErrorCase{"", "invalid JSON"},
        ErrorCase{"42", "a policy must be"}, ErrorCase{"null", "a policy must be"},
        ErrorCase{R"({"rules": 5})", "rules: must be an array"},
        ErrorCase{R"({"rules": [], "extra": 1})", "extra: unknown field"},
        ErrorCase{R"({"rules": [], "version": 2})", "version: must be 1"},
        ErrorCase{R"({"rules": [], "rollback": {"window_seconds": 5}})",
                  "rollback: needs at least one trigger"},
        ErrorCase{R"({"rules": [], "description": 3})", "description: must be a string"},
        ErrorCase{R"({"rules": [5]})", "rules[0]: a rule must be an object"},
        ErrorCase{R"([{"limit_keys": ["ip"], "algorithm_config": {"rps":1,"burst":1}}])",
                  "rules[0].name: is required"},
        ErrorCase{R"({"rules": [{"name": 7}]})", "rules[0].name: must be a string"},
        ErrorCase{R"({"rules": [{"name": "a b"}]})", "rules[0].name: must be 1 to 64"},
        ErrorCase{R"({"rules": [{"name": ""}]})", "rules[0].name: must be 1 to 64"},
        ErrorCase{
            R"({"rules": [{"name": "a", "limit_keys": ["ip"], "algorithm_config": {"rps":1,"burst":1}},
                               {"name": "a", "limit_keys": ["ip"], "algorithm_config": {"rps":1,"burst":1}}]})",
            "rules[1].name: duplicate rule name \"a\" (also rules[0])"},
        ErrorCase{R"({"rules": [{"name": "a", "algorithm_config": {"rps":1,"burst":1}}]})",
                  "rules[0].limit_keys: is required"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": []}]})",
                  "rules[0].limit_keys: must be an array of 1 to 8"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": "ip"}]})",
                  "rules[0].limit_keys: must be an array"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": [5]}]})",
                  "rules[0].limit_keys[0]: must be a string"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["form:x"]}]})",
                  "rules[0].limit_keys[0]: unknown source kind 'form'"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["cookie:a b"]}]})",
                  "rules[0].limit_keys[0]: cookie:<name> needs a cookie name"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["ip:port"]}]})", "unknown ip source"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["ip:address/0"]}]})",
                  "unknown ip source"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["ip:address/129"]}]})",
                  "unknown ip source"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["ip:address/x"]}]})",
                  "unknown ip source"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["user"]}]})",
                  "rules[0].limit_keys[0]: unknown source 'user'"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["header:bad name"]}]})",
                  "is not a valid field name"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["header:"]}]})",
                  "header:<name> needs a name"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["const:"]}]})",
                  "const:<text> needs 1 to 128"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["query:a b"]}]})",
                  "query name must be printable"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["ip"]}]})",
                  "rules[0].algorithm_config: is required"},
        ErrorCase{R"({"rules": [{"name": "a", "limit_keys": ["ip"], "algorithm_config": 5}]})",
                  "rules[0].algorithm_config: must be an object"},
        ErrorCase{RuleWith(kOk, R"(, "algorithm": "bucket")"),
                  "rules[0].algorithm: unknown algorithm \"bucket\""},
        ErrorCase{RuleWith(kOk, R"(, "algorithm": 3)"), "rules[0].algorithm: must be a string"},
        ErrorCase{RuleWith(R"({"burst": 1})"),
                  "rules[0].algorithm_config.tokens_per_second: is required (or its alias rps)"},
        ErrorCase{RuleWith(R"({"rps": 1, "tokens_per_second": 1, "burst": 1})"),
                  "rules[0].algorithm_config.rps: is an alias"},
        ErrorCase{RuleWith(R"({"rps": 0, "burst": 1})"), "algorithm_config.rps: must be > 0"},
        ErrorCase{RuleWith(R"({"rps": "5", "burst": 1})"),
                  "algorithm_config.rps: must be a number (got a string)"},
        ErrorCase{RuleWith(R"({"rps": true, "burst": 1})"),
                  "algorithm_config.rps: must be a number (got a boolean)"},
        ErrorCase{RuleWith(R"({"rps": 1})"), "algorithm_config.burst: is required"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1.5})"),
                  "algorithm_config.burst: must be a whole number"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": -1})"), "algorithm_config.burst: must be > 0"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1e300})"),
                  "algorithm_config.burst: must be at most"},
        ErrorCase{RuleWith(R"({"rps": 1e10, "burst": 1e10})"),
                  "algorithm_config.rps: must be a number between"},
        ErrorCase{RuleWith(R"({"rps": 0.000001, "burst": 1099511627776})"),
                  "algorithm_config.burst: refilling"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "brust": 2})"),
                  "algorithm_config.brust: unknown field"},
        ErrorCase{RuleWith(R"({"burst": 10})", R"(, "algorithm": "fixed_window")"),
                  "algorithm_config.window_seconds: is required by fixed_window"},
        ErrorCase{RuleWith(R"({"burst": 10, "window_seconds": 1, "rps": 10})",
                           R"(, "algorithm": "fixed_window")"),
                  "algorithm_config.rps: is not used by fixed_window"},
        ErrorCase{
            RuleWith(R"({"burst": 10, "window": "5x"})", R"(, "algorithm": "sliding_window")"),
            "algorithm_config.window: must be a duration"},
        ErrorCase{RuleWith(R"({"burst": 10, "window": [1]})", R"(, "algorithm": "sliding_window")"),
                  "algorithm_config.window: must be a number of seconds or a duration"},
        ErrorCase{
            RuleWith(R"({"burst": 10, "window_seconds": 0})", R"(, "algorithm": "sliding_log")"),
            "algorithm_config.window_seconds: must be > 0"},
        ErrorCase{RuleWith(R"({"burst": 10, "window_seconds": 1, "window": "1s"})",
                           R"(, "algorithm": "fixed_window")"),
                  "algorithm_config.window: set window or window_seconds, not both"},
        ErrorCase{RuleWith(R"({"burst": 2000000, "window_seconds": 60})",
                           R"(, "algorithm": "sliding_window")"),
                  "algorithm_config.burst: must be at most 1048575 for sliding_window"},
        ErrorCase{
            RuleWith(R"({"burst": 10, "window": "0.0001s"})", R"(, "algorithm": "fixed_window")"),
            "algorithm_config.window: must be between 1ms"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "window_seconds": 1})"),
                  "algorithm_config.window_seconds: is only used by the window algorithms"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "max_delay_ms": 5})"),
                  "algorithm_config.max_delay_ms: is only used by leaky_bucket"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "max_delay_ms": -5})",
                           R"(, "algorithm": "leaky_bucket")"),
                  "algorithm_config.max_delay_ms: must be between 0 and 366 days"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "cost_source": "cookie:w"})"),
                  "algorithm_config.cost_source: must be \"fixed\""},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "cost_source": "jwt:w"})"),
                  "algorithm_config.cost_source: must be \"fixed\""},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "fixed_cost": 0})"),
                  "algorithm_config.fixed_cost: must be > 0"},
        ErrorCase{RuleWith(R"({"rps": 1, "burst": 1, "default_cost": 2.5})"),
                  "algorithm_config.default_cost: must be a whole number"},
        ErrorCase{RuleWith(R"({"lease": "30s"})", R"(, "algorithm": "concurrency")"),
                  "rules[0].algorithm_config.max_in_flight: is required"},
        ErrorCase{RuleWith(R"({"max_in_flight": 5})", R"(, "algorithm": "concurrency")"),
                  "rules[0].algorithm_config.lease: is required"},
        ErrorCase{
            RuleWith(R"({"max_in_flight": 0, "lease": "30s"})", R"(, "algorithm": "concurrency")"),
            "rules[0].algorithm_config.max_in_flight: must be > 0"},
        ErrorCase{RuleWith(R"({"max_in_flight": 2.5, "lease": "30s"})",
                           R"(, "algorithm": "concurrency")"),
                  "rules[0].algorithm_config.max_in_flight: must be a whole number"},
        ErrorCase{RuleWith(R"({"max_in_flight": 65537, "lease": "30s"})",
                           R"(, "algorithm": "concurrency")"),
                  "rules[0].algorithm_config.max_in_flight: must be at most 65536"},
        ErrorCase{
            RuleWith(R"({"max_in_flight": 5, "lease": "30x"})", R"(, "algorithm": "concurrency")"),
            "rules[0].algorithm_config.lease: at byte"},
        ErrorCase{
            RuleWith(R"({"max_in_flight": 5, "lease": "8d"})", R"(, "algorithm": "concurrency")"),
            "rules[0].algorithm_config.lease: lease_time: must be between 1ms and 7d"},
        ErrorCase{RuleWith(R"({"max_in_flight": 5, "lease": "30s", "rps": 1})",
                           R"(, "algorithm": "concurrency")"),
                  "rules[0].algorithm_config.rps: unknown field"},
        ErrorCase{RuleWith(R"([5])", R"(, "algorithm": "concurrency")"),
                  "rules[0].algorithm_config: must be an object"},
        ErrorCase{RuleWith(R"({"max_in_flight": 5, "lease": "30s"})",
                           R"(, "algorithm": "concurrency", "refund_on": ["5xx"])"),
                  "rules[0].refund_on: is not used by a concurrency rule"},
        ErrorCase{RuleWith(R"({"max_in_flight": 5, "lease": "30s"})",
                           R"(, "algorithm": "concurrency", "tenants": "no-such-file.csv")"),
                  "rules[0].tenants: is not used by a concurrency rule"},
        ErrorCase{RuleWith(kOk, R"(, "mode": "dry")"), "rules[0].mode: must be \"enforce\""},
        ErrorCase{RuleWith(kOk, R"(, "enforce_percent": 150)"),
                  "rules[0].enforce_percent: must be between 0 and 100"},
        ErrorCase{RuleWith(kOk, R"(, "missing_key": "drop")"),
                  "rules[0].missing_key: must be \"skip\" or \"shared\""},
        ErrorCase{RuleWith(kOk, R"(, "failure_mode": "fail-open")"),
                  "rules[0].failure_mode: must be one of open, closed, degrade"},
        ErrorCase{RuleWith(kOk, R"(, "failure_mode": 1)"),
                  "rules[0].failure_mode: must be a string"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": 1)"), "rules[0].rollback: must be an object"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {})"),
                  "rules[0].rollback: needs at least one trigger"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {"max_p99_ms": 0})"),
                  "rules[0].rollback.max_p99_ms: must be > 0"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {"max_upstream_error_increase": 5})"),
                  "rules[0].rollback.max_upstream_error_increase: must be > 0 and < 1"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {"max_upstream_p99_ms": -2})"),
                  "rules[0].rollback.max_upstream_p99_ms: must be > 0 and <= 3600000"},
        ErrorCase{RuleWith(kOk, R"(, "headers": "draft11,x-ratelimit,x-ratelimit-epoch")"),
                  "rules[0].headers: x-ratelimit and x-ratelimit-epoch both send"},
        ErrorCase{RuleWith(kOk, R"(, "headers": ["draft11", 3])"),
                  "rules[0].headers[1]: must be a string"},
        ErrorCase{RuleWith(kOk, R"(, "headers": {"draft11": true})"),
                  "rules[0].headers: must be a style list"},
        ErrorCase{RuleWith(kOk, R"(, "headers": "draft12")"),
                  "rules[0].headers: unknown style \"draft12\""},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {"max_reject_ratio": 1.5})"),
                  "rules[0].rollback.max_reject_ratio: must be > 0 and < 1"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {"max_reject_ratio": 0.5, "min_requests": 0})"),
                  "rules[0].rollback.min_requests: must be > 0"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {"max_reject_ratio": 0.5, "window_seconds": -1})"),
                  "rules[0].rollback.window_seconds: must be > 0"},
        ErrorCase{RuleWith(kOk, R"(, "rollback": {"max_reject_ratio": 0.5, "after": 1})"),
                  "rules[0].rollback.after: unknown field"},
        ErrorCase{RuleWith(kOk, R"(, "group": "a b")"), "rules[0].group: must be 1 to 64"},
        ErrorCase{RuleWith(kOk, R"(, "limits": {})"), "rules[0].limits: unknown field"},
        ErrorCase{RuleWith(kOk, R"(, "match": [])"), "rules[0].match: must be an object"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"body": "x"})"),
                  "rules[0].match.body: unknown source 'body'"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"path": {"glob": "x"}})"),
                  "rules[0].match.path.glob: unknown operator"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"path": {}})"),
                  "rules[0].match.path: needs at least one operator"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"path": {"regex": "("}})"),
                  "rules[0].match.path.regex: invalid regular expression"},
        ErrorCase{
            RuleWith(kOk, R"(, "match": {"path": {"regex": ")" + std::string(600, 'a') + R"("}})"),
            "rules[0].match.path.regex: must be 1 to 512 characters"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"path": {"regex": 5}})"),
                  "rules[0].match.path.regex: must be a string"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"method": []})"),
                  "rules[0].match.method.one_of: must be an array of 1 to"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"method": ["GET", {}]})"),
                  "rules[0].match.method.one_of[1]: must be a string"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"header:x": {"present": "yes"}})"),
                  "rules[0].match.header:x.present: must be true or false"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"header:x": {"equals": {}}})"),
                  "rules[0].match.header:x.equals: must be a string"},
        ErrorCase{RuleWith(kOk, R"(, "match": {"header:x": null})"),
                  "rules[0].match.header:x: must be a string, an array"},
        ErrorCase{std::string(40, '[') + std::string(40, ']'), "nested deeper than 32"},
        ErrorCase{
            R"({"rules": [{"name": "a", "limit_keys": ["ip"], "algorithm_config": {"rps": 1e400, "burst": 1}}]})",
            "invalid JSON"}));

TEST(ParsePolicy, ErrorsQuotingUserTextStayOnOneLine) {
  auto errors = Errors(
      R"({"rules": [{"name": "a", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
                          "evil\nfield\r": 1, "match": {"header:a\nb": "x"}}]})");
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) {
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(e.find('\r'), std::string::npos) << e;
  }
}

TEST(ParsePolicy, RejectsHugeInput) {
  std::string big = R"({"rules": [], "description": ")" + std::string(5 << 20, 'x') + "\"}";
  auto errors = Errors(big);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("larger than 4 MiB"), std::string::npos);
}

TEST(ParsePolicy, AcceptsEveryFeature) {
  auto errors = Errors(R"({"version": 1, "description": "all features", "rules": [
    {"name": "a", "description": "d", "limit_keys": ["ip:address", "header:X-Api-Key", "query:k",
       "jwt:org.id", "path", "method", "const:all"],
     "match": {"path": {"prefix": "/api/", "regex": "^/api/v[0-9]+/"}, "method": ["GET", "POST"],
               "header:x-test": {"present": false}, "jwt:plan": "pro", "query:debug": {"absent": true},
               "header:user-agent": {"suffix": "bot"}},
     "algorithm": "leaky_bucket",
     "algorithm_config": {"tokens_per_second": 2.5, "burst": 5, "max_delay_ms": 500,
                          "cost_source": "query:weight", "default_cost": 2},
     "mode": "shadow", "enforce_percent": 25, "missing_key": "shared", "group": "g1",
     "failure_mode": "degrade",
     "rollback": {"max_reject_ratio": 0.3, "window_seconds": "5m", "min_requests": 50}},
    {"name": "b", "limit_keys": ["ip"], "algorithm": "fixed_window",
     "algorithm_config": {"burst": 100, "window": "1m", "fixed_cost": 2}},
    {"name": "c", "limit_keys": ["ip"], "algorithm": "sliding_window",
     "algorithm_config": {"burst": 100, "window_seconds": 3600}},
    {"name": "d", "limit_keys": ["ip"], "algorithm": "sliding_log",
     "algorithm_config": {"burst": 10, "window": "500ms"}},
    {"name": "e", "limit_keys": ["ip"], "algorithm": "leaky_bucket",
     "algorithm_config": {"rps": 10, "burst": 10, "max_delay_ms": -1}}]})");
  EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0]);
}

TEST(ParsePolicy, ConcurrencyRule) {
  ParsedPolicy p = ParsePolicy(R"({"rules": [
    {"name": "llm", "limit_keys": ["header:x-tenant"], "algorithm": "concurrency",
     "algorithm_config": {"max_in_flight": 20, "lease": "2m"}}]})");
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  auto s = SummarizePolicy(*p.policy);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_TRUE(s[0].lease.has_value());
  EXPECT_EQ(s[0].lease->max_in_flight(), 20);
  EXPECT_EQ(s[0].lease->lease_ns(), 120'000'000'000);
  EXPECT_EQ(s[0].description, "concurrency max_in_flight=20 lease=2m keys=header:x-tenant");
  // For headers: max_in_flight per lease time.
  EXPECT_EQ(s[0].limit.burst(), 20);
  EXPECT_EQ(s[0].limit.window_ns(), 120'000'000'000);
}

TEST(ParsePolicy, FailureModePerRule) {
  ParsedPolicy p = ParsePolicy(R"({"rules": [
    {"name": "a", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
     "failure_mode": "open"},
    {"name": "b", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
     "failure_mode": "closed"},
    {"name": "c", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
     "failure_mode": "degrade"},
    {"name": "d", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1}}]})");
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  auto s = SummarizePolicy(*p.policy);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].failure_mode, "open");
  EXPECT_EQ(s[1].failure_mode, "closed");
  EXPECT_EQ(s[2].failure_mode, "degrade");
  EXPECT_EQ(s[3].failure_mode, "");  // the store's global mode
  // The third rule's error names its index.
  auto errors = Errors(R"({"rules": [
    {"name": "a", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1}},
    {"name": "b", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1}},
    {"name": "c", "limit_keys": ["ip"], "algorithm_config": {"rps": 1, "burst": 1},
     "failure_mode": "half"}]})");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "rules[2].failure_mode: must be one of open, closed, degrade");
}

TEST(ParsePolicy, ExampleFilesAreValid) {
  namespace fs = std::filesystem;
  std::vector<std::string> files = {testing::SourcePath("examples/policy.json")};
  const fs::path dir = testing::SourcePath("examples/policies");
  if (fs::exists(dir)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".json") files.push_back(e.path().string());
    }
  }
  ASSERT_GE(files.size(), 2u);
  for (const auto& f : files) {
    ParsedPolicy p = ParsePolicyFile(f);
    EXPECT_TRUE(p.errors.empty()) << f << ": " << (p.errors.empty() ? "" : p.errors[0].ToString());
  }
}

TEST(ParsePolicy, MissingFile) {
  ParsedPolicy p = ParsePolicyFile("/nonexistent/policy.json");
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_NE(p.errors[0].message.find("cannot read"), std::string::npos);
}

// Fuzzing: byte mutations of valid policies and random structures must parse
// to either a policy or errors, never crash (ASan/UBSan run this too).
TEST(ParsePolicyFuzz, MutatedValidDocuments) {
  std::mt19937_64 rng(12345);
  const std::string seeds[] = {std::string(kSeedGlobalRps), std::string(kSeedTiered),
                               RuleWith(R"({"rps": 1, "burst": 1, "cost_source": "header:w"})",
                                        R"(, "match": {"path": {"regex": "^/a(b|c)*$"}})")};
  const std::string alphabet = "{}[]\":,0123456789.eE-+ \\ntfalsenul/ab\x01\xff";
  int parsed = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string s = seeds[rng() % 3];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s.erase(pos, 1 + rng() % 4);
          break;
        case 2:
          s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        default: {
          const size_t len = std::min<size_t>(s.size() - pos, 1 + rng() % 16);
          s.insert(rng() % s.size(), s.substr(pos, len));
        }
      }
    }
    ParsedPolicy p = ParsePolicy(s);
    ASSERT_EQ(p.policy == nullptr, !p.errors.empty());
    parsed += p.policy != nullptr;
  }
  // Some mutations (whitespace, digits) stay valid: the fuzzer reaches past the JSON layer.
  EXPECT_GT(parsed, 0);
}

nlohmann::json RandomValue(std::mt19937_64& rng, int depth) {
  static const char* const kFields[] = {"name",
                                        "limit_keys",
                                        "match",
                                        "algorithm",
                                        "algorithm_config",
                                        "mode",
                                        "rps",
                                        "burst",
                                        "window",
                                        "tokens_per_second",
                                        "cost_source",
                                        "fixed_cost",
                                        "regex",
                                        "one_of",
                                        "prefix",
                                        "present",
                                        "rollback",
                                        "max_reject_ratio",
                                        "header:x",
                                        "jwt:plan",
                                        "path",
                                        "enforce_percent",
                                        "missing_key",
                                        "rules"};
  static const char* const kStrings[] = {"ip:address", "token_bucket", "fixed_window", "shadow",
                                         "enforce",    "1m",           "header:x",     "(",
                                         "",           "query:q",      "shared",       "const:c"};
  switch (depth > 4 ? rng() % 4 : rng() % 7) {
    case 0:
      return static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 4;
    case 1:
      return kStrings[rng() % std::size(kStrings)];
    case 2:
      return (rng() & 1) != 0;
    case 3:
      return nullptr;
    case 4:
    case 5: {
      nlohmann::json o = nlohmann::json::object();
      const int n = static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i)
        o[kFields[rng() % std::size(kFields)]] = RandomValue(rng, depth + 1);
      return o;
    }
    default: {
      nlohmann::json a = nlohmann::json::array();
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
  }
}

TEST(ParsePolicyFuzz, RandomStructures) {
  std::mt19937_64 rng(777);
  for (int iter = 0; iter < 3000; ++iter) {
    nlohmann::json doc = RandomValue(rng, 0);
    if (rng() % 2) doc = {{"rules", nlohmann::json::array({doc, RandomValue(rng, 1)})}};
    ParsedPolicy p = ParsePolicy(doc.dump());
    ASSERT_EQ(p.policy == nullptr, !p.errors.empty()) << doc.dump();
    for (const auto& e : p.errors) ASSERT_FALSE(e.message.empty());
  }
}

TEST(ParseCost, HostileValues) {
  int64_t c = 0;
  EXPECT_TRUE(ParseCost("5", &c));
  EXPECT_EQ(c, 5);
  EXPECT_TRUE(ParseCost(" 7 ", &c));
  EXPECT_EQ(c, 7);
  EXPECT_TRUE(ParseCost("2.5", &c));
  EXPECT_EQ(c, 3);  // rounded up: never under-charge
  EXPECT_TRUE(ParseCost("1e3", &c));
  EXPECT_EQ(c, 1000);
  EXPECT_TRUE(ParseCost("1e30", &c));
  EXPECT_EQ(c, kMaxCost);  // huge: clamped, and so never allowed
  EXPECT_TRUE(ParseCost(std::string(40, '9'), &c));
  EXPECT_EQ(c, kMaxCost);
  for (const char* bad :
       {"",       " ",  "-3",   "-0",   "0",   "0.0", "NaN", "nan", "inf", "Infinity", "1e309",
        "1e-400", "+5", "0x10", "5abc", "abc", "5 5", ".",   "e5",  "1e",  "--1",      "\x00"}) {
    EXPECT_FALSE(ParseCost(bad, &c)) << "'" << bad << "'";
  }
  EXPECT_FALSE(ParseCost(std::string(100, '1'), &c));  // longer than 64 characters
}

TEST(KeyValues, NormalisedAndBounded) {
  EXPECT_EQ(NormalizeKeyValue("  k1 "), "k1");
  EXPECT_EQ(NormalizeKeyValue("a|b"), "a\\|b");
  EXPECT_EQ(NormalizeKeyValue("a\\b"), "a\\\\b");
  EXPECT_EQ(NormalizeKeyValue("a\nb\x1f"), "a\\x0ab\\x1f");
  EXPECT_EQ(NormalizeKeyValue("caf\xc3\xa9"), "caf\\xc3\\xa9");
  const std::string long1(10000, 'a');
  std::string long2 = long1;
  long2.back() = 'b';
  const std::string n1 = NormalizeKeyValue(long1);
  const std::string n2 = NormalizeKeyValue(long2);
  EXPECT_EQ(n1.size(), 33u);
  EXPECT_EQ(n1[0], '~');
  EXPECT_NE(n1, n2);
  EXPECT_EQ(NormalizeKeyValue(std::string(kMaxKeyValueLength, 'x')).size(), kMaxKeyValueLength);
  // Joined identities stay unambiguous: ("a|b") vs ("a", "b").
  EXPECT_NE(JoinIdentity({NormalizeKeyValue("a|b")}),
            JoinIdentity({NormalizeKeyValue("a"), NormalizeKeyValue("b")}));
}

// The hashed form of a long value and literal values are disjoint: a client
// sending a long value's "~<hash>" text as its key gets a bucket of its own.
TEST(KeyValues, HashedFormCannotBeSentLiterally) {
  const std::string hashed = NormalizeKeyValue(std::string(1000, 'a'));
  ASSERT_EQ(hashed[0], '~');
  EXPECT_NE(NormalizeKeyValue(hashed), hashed);
  EXPECT_EQ(NormalizeKeyValue(hashed), "\\x7e" + hashed.substr(1));
  EXPECT_EQ(NormalizeKeyValue("~"), "\\x7e");
  EXPECT_EQ(NormalizeKeyValue(" ~x"), "\\x7ex");  // trimmed first
  EXPECT_EQ(NormalizeKeyValue("a~b"), "a~b");     // only a leading '~' is escaped
  // The escape is itself unambiguous: a literal "\x7e" escapes its backslash.
  EXPECT_EQ(NormalizeKeyValue("\\x7e"), "\\\\x7e");
}

TEST(KeyValues, BucketKeyLayout) {
  EXPECT_EQ(BucketKey("free", Algorithm::kTokenBucket, "k1"), std::string("free\x1ftb\x1fk1"));
  EXPECT_EQ(BucketKey("q", Algorithm::kFixedWindow, "a|b"), std::string("q\x1f"
                                                                        "fw\x1f"
                                                                        "a|b"));
}

}  // namespace
}  // namespace tollgate
