// RlsConfig: YAML import, validation paths, and envoyproxy/ratelimit matching.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "rls/rls_config.h"
#include "rls/rls_counters.h"
#include "rls/rls_key.h"
#include "rls/rls_wildcard.h"
#include "rls/rls_yaml.h"

namespace tollgate::rls {
namespace {

std::string ExamplesDir() {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  return std::string(src ? src : ".") + "/examples/envoy/ratelimit";
}

std::shared_ptr<const RlsConfig> Load(const std::string& yaml, RlsCompileOptions o = {}) {
  ParsedRlsConfig p = LoadRlsConfigYaml(yaml, o);
  for (const auto& e : p.errors) ADD_FAILURE() << e.ToString();
  return p.config;
}

std::vector<std::string> Errors(const std::string& yaml) {
  ParsedRlsConfig p = LoadRlsConfigYaml(yaml);
  EXPECT_EQ(p.config, nullptr);
  std::vector<std::string> out;
  for (const auto& e : p.errors) out.push_back(e.ToString());
  return out;
}

bool AnyContains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v) {
    if (s.find(needle) != std::string::npos) return true;
  }
  return false;
}

const RlsRule* M(const RlsConfig& c, const std::string& domain,
                 std::vector<std::pair<std::string, std::string>> entries) {
  static thread_local std::vector<std::pair<std::string, std::string>> keep;
  keep = std::move(entries);
  std::vector<RlsEntry> e;
  for (const auto& [k, v] : keep) e.push_back({k, v});
  return c.Match(domain, e);
}

TEST(RlsUnitTest, SecondsAndNames) {
  EXPECT_EQ(UnitSeconds(RlsUnit::kSecond), 1);
  EXPECT_EQ(UnitSeconds(RlsUnit::kMinute), 60);
  EXPECT_EQ(UnitSeconds(RlsUnit::kHour), 3600);
  EXPECT_EQ(UnitSeconds(RlsUnit::kDay), 86400);
  EXPECT_EQ(UnitSeconds(RlsUnit::kWeek), 604800);
  EXPECT_EQ(UnitSeconds(RlsUnit::kMonth), 2592000);
  EXPECT_EQ(UnitSeconds(RlsUnit::kYear), 31536000);
  EXPECT_EQ(UnitSeconds(RlsUnit::kUnknown), 0);
  RlsUnit u;
  ASSERT_TRUE(ParseUnit("MINUTE", &u));
  EXPECT_EQ(u, RlsUnit::kMinute);
  EXPECT_FALSE(ParseUnit("fortnight", &u));
  EXPECT_FALSE(ParseUnit("unknown", &u));
}

TEST(RlsUnitTest, UnitMapping) {
  auto tb = LimitForUnit(RlsUnit::kMinute, 120, Algorithm::kTokenBucket, 0);
  ASSERT_TRUE(tb.ok());
  EXPECT_EQ(tb->burst(), 120);
  EXPECT_EQ(tb->rate_micro(), 2'000'000);  // 120 / 60 s
  auto tb_burst = LimitForUnit(RlsUnit::kSecond, 10, Algorithm::kTokenBucket, 25);
  ASSERT_TRUE(tb_burst.ok());
  EXPECT_EQ(tb_burst->burst(), 25);
  auto fw = LimitForUnit(RlsUnit::kHour, 100, Algorithm::kFixedWindow, 0);
  ASSERT_TRUE(fw.ok());
  EXPECT_EQ(fw->burst(), 100);
  EXPECT_EQ(fw->window_ns(), 3600LL * 1'000'000'000);
  EXPECT_EQ(LimitShape(*fw), "fw3600");
  EXPECT_EQ(LimitShape(*tb), "tb");
}

TEST(RlsYamlTest, ImportsEveryExampleFile) {
  ParsedRlsConfig p = LoadRlsConfigFiles({ExamplesDir()});
  for (const auto& e : p.errors) ADD_FAILURE() << e.ToString();
  ASSERT_NE(p.config, nullptr);
  EXPECT_EQ(p.config->domain_count(), 4u);
  EXPECT_TRUE(p.config->HasDomain("sms"));
  EXPECT_TRUE(p.config->HasDomain("edge"));
  EXPECT_TRUE(p.config->HasDomain("api"));
  EXPECT_TRUE(p.config->HasDomain("db_qps"));
  const std::string dump = p.config->Dump();
  EXPECT_NE(dump.find("sms.message_kind_marketing.to_number: 4/day"), std::string::npos) << dump;
  EXPECT_NE(dump.find("api.plan_enterprise.api_key: 100/second token_bucket"), std::string::npos)
      << dump;
}

// The fuzz seeds shaped like envoyproxy/ratelimit's own example files and
// README (fuzz/corpus/rls_yaml/seed-upstream-*.yaml) load without an error.
TEST(RlsYamlTest, UpstreamShapedFilesLoad) {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/fuzz/corpus/rls_yaml/";
  size_t files = 0;
  for (const char* name : {"seed-upstream-nested-shadow.yaml", "seed-upstream-quota-mode.yaml",
                           "seed-upstream-newer-keys.yaml", "seed-upstream-mongo.yaml"}) {
    ParsedRlsConfig p = LoadRlsConfigFiles({dir + name});
    for (const auto& e : p.errors) ADD_FAILURE() << e.ToString();
    files += p.config != nullptr;
  }
  EXPECT_EQ(files, 4u);
}

TEST(RlsYamlTest, ReadsAllFields) {
  auto c = Load(R"(
domain: d
descriptors:
  - key: k
    value: v
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      name: lim
      unit: Hour
      requests_per_unit: 7
      replaces:
        - name: other
)");
  ASSERT_NE(c, nullptr);
  const RlsRule* r = M(*c, "d", {{"k", "v"}});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->full_key, "d.k_v");
  EXPECT_EQ(r->name, "lim");
  EXPECT_EQ(r->unit, RlsUnit::kHour);
  EXPECT_EQ(r->requests_per_unit, 7u);
  EXPECT_TRUE(r->shadow_mode);
  EXPECT_FALSE(r->unlimited);
  ASSERT_EQ(r->replaces.size(), 1u);
  EXPECT_EQ(r->replaces[0], "other");
  ASSERT_TRUE(r->limit.has_value());
  EXPECT_EQ(r->limit->algorithm(), Algorithm::kTokenBucket);  // tollgate's default
  EXPECT_EQ(r->limit->burst(), 7);
  EXPECT_NE(r->counters, nullptr);
}

TEST(RlsYamlTest, DefaultAlgorithmIsAnOption) {
  RlsCompileOptions o;
  o.default_algorithm = Algorithm::kTokenBucket;
  auto c = Load(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
      "requests_per_unit: 5}\n",
      o);
  ASSERT_NE(c, nullptr);
  const RlsRule* r = M(*c, "d", {{"k", "x"}});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->limit->algorithm(), Algorithm::kTokenBucket);
  EXPECT_EQ(r->limit->burst(), 5);
}

TEST(RlsYamlTest, ErrorsCarryPaths) {
  auto e = Errors(R"(
domain: d
descriptors:
  - key: a
    rate_limit:
      unit: fortnight
      requests_per_unit: 5
  - key: b
    rate_limit:
      unit: second
      requests_per_unit: -1
  - key: c
    colour: red
  - key: d
    rate_limit:
      unit: second
      requests_per_unit: 5
      algorithm: magic
)");
  EXPECT_TRUE(AnyContains(e, "descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'"))
      << ::testing::PrintToString(e);
  EXPECT_TRUE(AnyContains(e, "descriptors[1].rate_limit.requests_per_unit: must be an integer"))
      << ::testing::PrintToString(e);
  EXPECT_TRUE(AnyContains(e, "descriptors[2].colour: config error, unknown key 'colour'"))
      << ::testing::PrintToString(e);
  EXPECT_TRUE(AnyContains(e, "descriptors[3].rate_limit.algorithm: unknown algorithm 'magic'"))
      << ::testing::PrintToString(e);
  EXPECT_TRUE(AnyContains(e, "(line 6)")) << ::testing::PrintToString(e);
}

// Upstream's TestNonStringKey (test/config/non_string_key.yaml): "config
// error, key is not of type string: 0.25", with the file's name; here also
// the path and line. A key that yaml.v2 reads as a number, boolean or null is
// not a string; quoted, the same text is.
TEST(RlsYamlTest, NonStringKeysNamedAsUpstream) {
  const RlsYamlResult r = ParseRlsYaml(R"(0.25: test-domain
descriptors:
  - key: key1
    value: value1
    rate_limit:
      unit: day
      requests_per_unit: 5
)",
                                       "non_string_key.yaml");
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors[0].ToString(),
            "non_string_key.yaml: config error, key is not of type string: 0.25 (line 1)");
  const auto e = Errors(R"(domain: d
descriptors:
  - key: k
    7: a
    yes: b
    ~: c
    0x1F: d
    [a, b]: e
    "8": f
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  for (const char* want :
       {"descriptors[0]: config error, key is not of type string: 7 (line 4)",
        "descriptors[0]: config error, key is not of type string: true (line 5)",
        "descriptors[0]: config error, key is not of type string: <nil> (line 6)",
        "descriptors[0]: config error, key is not of type string: 0x1F (line 7)",
        "descriptors[0]: config error, key is not of type string: a sequence (2 items) (line 8)",
        "descriptors[0].8: config error, unknown key '8' (line 9)"}) {
    EXPECT_TRUE(AnyContains(e, want)) << want << "\n" << ::testing::PrintToString(e);
  }
  EXPECT_EQ(e.size(), 6u) << ::testing::PrintToString(e);
}

// Issue 15: a small file of anchors, each used ten times by the next, is a
// billion descriptors to the walker (--check was busy for minutes). It is
// refused before the walk; aliases used a few times still work.
TEST(RlsYamlTest, AliasBombsAreRefusedAndAliasesStillWork) {
  std::string bomb =
      "domain: bomb\ndescriptors:\n"
      "  - &d0 {key: a, value: b, rate_limit: {unit: second, requests_per_unit: 1}}\n";
  for (int i = 1; i < 10; ++i) {
    std::string refs;
    for (int r = 0; r < 10; ++r) refs += (r ? ", *d" : "*d") + std::to_string(i - 1);
    bomb += "  - &d" + std::to_string(i) + " {key: k" + std::to_string(i) + ", descriptors: [" +
            refs + "]}\n";
  }
  ASSERT_LT(bomb.size(), 2048u);
  RlsYamlResult r = ParseRlsYaml(bomb, "bomb.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].ToString(),
            "bomb.yaml: expands to more than 65536 nodes or nests deeper than 256 levels (YAML "
            "aliases used many times over?)");
  EXPECT_TRUE(r.domains.empty());

  RlsYamlResult shared = ParseRlsYaml(R"(
domain: d
descriptors:
  - key: a
    rate_limit: &rl {unit: second, requests_per_unit: 5}
  - key: b
    rate_limit: *rl
)",
                                      "");
  ASSERT_TRUE(shared.errors.empty()) << ::testing::PrintToString(shared.errors);
  ASSERT_EQ(shared.domains.size(), 1u);
  ASSERT_EQ(shared.domains[0].descriptors.size(), 2u);
  EXPECT_EQ(shared.domains[0].descriptors[1].rate_limit->requests_per_unit, 5u);
}

TEST(RlsYamlTest, SemanticErrorsAsUpstream) {
  EXPECT_TRUE(AnyContains(Errors("descriptors: []\n"), "domain: config file cannot have empty"));
  EXPECT_TRUE(AnyContains(Errors("domain: d\ndescriptors:\n  - value: v\n"),
                          "descriptors[0].key: descriptor has empty key"));
  EXPECT_TRUE(
      AnyContains(Errors("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
                         "requests_per_unit: 1}\n  - key: k\n    rate_limit: {unit: second, "
                         "requests_per_unit: 2}\n"),
                  "descriptors[1]: duplicate descriptor composite key 'd.k'"));
  EXPECT_TRUE(AnyContains(
      Errors("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: "
             "second}\n"),
      "descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited"));
  EXPECT_TRUE(AnyContains(
      Errors("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 3}\n"),
      "descriptors[0].rate_limit.unit: required"));
  EXPECT_TRUE(AnyContains(
      Errors("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: a, unit: second, "
             "requests_per_unit: 3, replaces: [{name: a}]}\n"),
      "replaces should not contain name of same descriptor"));
  EXPECT_TRUE(AnyContains(
      Errors("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
             "requests_per_unit: 3, replaces: [{name: ''}]}\n"),
      "descriptors[0].rate_limit.replaces[0].name: should not have an empty replaces entry"));
  EXPECT_TRUE(AnyContains(
      Errors("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
             "requests_per_unit: 3, burst: 9, algorithm: fixed_window}\n"),
      "descriptors[0].rate_limit.burst: applies to token_bucket and leaky_bucket only"));
  // A fixed window counts up to 2^40 per window: any uint32 requests_per_unit loads.
  EXPECT_NE(Load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, "
                 "requests_per_unit: 4000000000, algorithm: fixed_window}\n"),
            nullptr);
  EXPECT_TRUE(AnyContains(Errors("domain: [1, 2\n"), "error loading config file"));
  // A count per unit is exact at any rate (issue 17): 1/year is a token bucket
  // refilling one token every 365 days, no longer refused as too slow.
  const auto yearly = Load(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, "
      "requests_per_unit: 1}\n");
  ASSERT_NE(yearly, nullptr);
  const RlsRule* rule = M(*yearly, "d", {{"k", "v"}});
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->limit->interval_ns(), 365LL * 86400 * 1'000'000'000);
  // Nested errors carry the nested path.
  EXPECT_TRUE(AnyContains(
      Errors("domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        "
             "rate_limit: {unit: year}\n        descriptors:\n          - key: ''\n"),
      "descriptors[0].descriptors[0].descriptors[0].key"));
}

TEST(RlsYamlTest, UnsupportedAlgorithmsAreConfigErrors) {
  RlsCompileOptions o;
  o.supported_algorithms = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket};
  o.store_name = "the redis store";
  RlsYamlResult r = ParseRlsYaml(
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: "
      "1}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: "
      "sliding_window}\n  - key: c\n    rate_limit: {unlimited: true}\n",
      "");
  ASSERT_TRUE(r.errors.empty());
  ParsedRlsConfig p = CompileRlsConfig(r.domains, o);
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].ToString(),
            "descriptors[1].rate_limit.algorithm: sliding_window is not supported by the redis "
            "store");
  o.default_algorithm = Algorithm::kFixedWindow;
  p = CompileRlsConfig(r.domains, o);
  ASSERT_EQ(p.errors.size(), 2u);
  EXPECT_NE(p.errors[0].message.find("default algorithm"), std::string::npos);
}

TEST(RlsYamlTest, DuplicateDomainsRejectedOrMerged) {
  RlsYamlResult a = ParseRlsYaml(
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: "
      "second, requests_per_unit: 1}\n",
      "a.yaml");
  RlsYamlResult b = ParseRlsYaml(
      "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: "
      "second, requests_per_unit: 2}\n",
      "b.yaml");
  std::vector<RlsDomainSpec> both = {a.domains[0], b.domains[0]};
  ParsedRlsConfig rejected = CompileRlsConfig(both);
  ASSERT_EQ(rejected.errors.size(), 1u);
  EXPECT_EQ(rejected.errors[0].ToString(), "b.yaml: domain: duplicate domain 'd' in config file");
  RlsCompileOptions merge;
  merge.merge_domains = true;
  ParsedRlsConfig merged = CompileRlsConfig(both, merge);
  ASSERT_NE(merged.config, nullptr);
  EXPECT_NE(M(*merged.config, "d", {{"a", "1"}}), nullptr);
  EXPECT_NE(M(*merged.config, "d", {{"b", "1"}}), nullptr);
}

TEST(RlsMatchTest, LevelByLevelMostSpecificWins) {
  ParsedRlsConfig p = LoadRlsConfigFiles({ExamplesDir()});
  ASSERT_NE(p.config, nullptr);
  const RlsConfig& c = *p.config;
  // key+value beats key-only.
  const RlsRule* noisy = M(c, "edge", {{"remote_address", "198.51.100.7"}});
  ASSERT_NE(noisy, nullptr);
  EXPECT_EQ(noisy->requests_per_unit, 2u);
  const RlsRule* other = M(c, "edge", {{"remote_address", "203.0.113.9"}});
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->requests_per_unit, 20u);
  EXPECT_EQ(other->full_key, "edge.remote_address");
  // Nested: both entries, in order.
  const RlsRule* marketing =
      M(c, "sms", {{"message_kind", "marketing"}, {"to_number", "+15550100"}});
  ASSERT_NE(marketing, nullptr);
  EXPECT_EQ(marketing->requests_per_unit, 4u);
  EXPECT_EQ(M(c, "sms", {{"to_number", "+15550100"}})->requests_per_unit, 80u);
  // A parent without a rate_limit matches nothing on its own.
  EXPECT_EQ(M(c, "sms", {{"message_kind", "marketing"}}), nullptr);
  // More request entries than the config has levels: no rule (as upstream).
  EXPECT_EQ(M(c, "sms", {{"to_number", "1"}, {"extra", "x"}}), nullptr);
  // Unknown values of a key-with-value-only node: no rule.
  EXPECT_EQ(M(c, "sms", {{"message_kind", "transactional"}, {"to_number", "1"}}), nullptr);
  EXPECT_EQ(M(c, "db_qps", {{"database", "scratch"}}), nullptr);
  // Wildcard value.
  const RlsRule* batch = M(c, "api", {{"client", "batch-nightly"}});
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->limit->algorithm(), Algorithm::kTokenBucket);
  EXPECT_EQ(M(c, "api", {{"client", "interactive"}}), nullptr);
  // Unknown domain.
  EXPECT_FALSE(c.HasDomain("nope"));
  EXPECT_EQ(M(c, "nope", {{"remote_address", "1"}}), nullptr);
}

TEST(RlsMatchTest, ExactBeatsWildcardBeatsKeyOnly) {
  auto c = Load(R"(
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: ab*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: abc
    rate_limit: {unit: second, requests_per_unit: 3}
)");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(M(*c, "d", {{"k", "abc"}})->requests_per_unit, 3u);
  EXPECT_EQ(M(*c, "d", {{"k", "abd"}})->requests_per_unit, 2u);
  EXPECT_EQ(M(*c, "d", {{"k", "x"}})->requests_per_unit, 1u);
  EXPECT_EQ(M(*c, "d", {{"k", ""}})->requests_per_unit, 1u);
}

TEST(RlsWildcardTest, StarMatchesAnyRunAnywhere) {
  struct Case {
    const char* pattern;
    const char* value;
    bool match;
  } cases[] = {
      {"pre*", "pre", true},
      {"pre*", "prefix", true},
      {"pre*", "pr", false},
      {"*", "", true},
      {"*", "anything", true},
      {"**", "", true},
      {"*.example.com", "a.example.com", true},
      {"*.example.com", "example.com", false},
      {"/api/*/action", "/api/v1/action", true},
      {"/api/*/action", "/api//action", true},
      {"/api/*/action", "/api/v1/actions", false},
      {"/api/*/action", "/api/action", false},
      {"foo*bar*baz", "foobarbaz", true},
      {"foo*bar*baz", "foo-bar-x-bar-baz", true},
      {"foo*bar*baz", "foobaz", false},
      {"foo*bar*baz", "foo-baz-bar", false},
      {"a*a", "a", false},
      {"a*a", "aa", true},
      {"ab*ba", "aba", false},
      {"exact", "exact", true},
      {"exact", "exactly", false},
      {"*a*b*c*", "xxaxxbxxcxx", true},
      {"*a*b*c*", "cba", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(WildcardMatch(c.pattern, c.value), c.match) << c.pattern << " ~ " << c.value;
  }
  EXPECT_TRUE(IsWildcard("a*b"));
  EXPECT_FALSE(IsWildcard("ab"));
}

TEST(RlsYamlTest, UpstreamsNewerDescriptorKeysLoad) {
  auto c = Load(R"(
domain: newer
descriptors:
  - key: service
    value: svc_*
    quota_mode: true
    share_threshold: true
    value_to_metric: true
    detailed_metric: true
    metadata: {backend: b1, nested: {n: 1, list: [x, 2.5, null, true]}}
    rate_limit: {unit: minute, requests_per_unit: 5}
)");
  ASSERT_NE(c, nullptr);
  const RlsRule* r = M(*c, "newer", {{"service", "svc_a"}});
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->quota_mode);
  ASSERT_NE(r->metadata, nullptr);
  EXPECT_NE(c->Dump().find("quota_mode"), std::string::npos) << c->Dump();
  // share_threshold: every value of the pattern has the pattern's key entries.
  std::vector<RlsEntry> e = {{"service", "svc_a"}};
  const RlsMatch m = c->MatchForKey("newer", e);
  ASSERT_EQ(m.key_entries.size(), 1u);
  EXPECT_EQ(m.key_entries[0].value, "svc_*");
  EXPECT_TRUE(m.shared);
  EXPECT_TRUE(AnyContains(Errors("domain: d\ndescriptors:\n  - key: k\n    metadata: [1]\n"),
                          "descriptors[0].metadata: must be a mapping"));
  EXPECT_TRUE(AnyContains(Errors("domain: d\ndescriptors:\n  - key: k\n    quota_mode: maybe\n"),
                          "descriptors[0].quota_mode: must be true or false"));
  EXPECT_TRUE(AnyContains(Errors("domain: d\ndescriptors:\n  - key: k\n    metadata: {[1]: 2}\n"),
                          "metadata keys must be strings"));
}

TEST(RlsCountersTest, SurviveRecompilation) {
  auto counters = std::make_shared<RlsCounters>();
  const std::string yaml =
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  ParsedRlsConfig a = LoadRlsConfigYaml(yaml, {}, counters);
  ParsedRlsConfig b = LoadRlsConfigYaml(yaml, {}, counters);
  ASSERT_NE(a.config, nullptr);
  ASSERT_NE(b.config, nullptr);
  EXPECT_EQ(M(*a.config, "d", {{"k", "1"}})->counters, M(*b.config, "d", {{"k", "1"}})->counters);
  M(*b.config, "d", {{"k", "1"}})->counters->over_limit += 3;
  std::string text;
  counters->AppendPrometheus(&text);
  EXPECT_NE(text.find("tollgate_rls_rule_over_limit_total{rule=\"d.k\"} 3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE tollgate_rls_requests_total counter\n"), std::string::npos);
}

TEST(RlsKeyTest, ValuesAreEscapedAndBounded) {
  std::vector<RlsEntry> e = {{"user", "a|b=c{x}"}, {"k", "sp ace\n%"}};
  const std::string key = BucketKey("tb", "dom", e);
  EXPECT_EQ(key, "rls|tb|dom|user=a%7cb%3dc%7bx%7d|k=sp%20ace%0a%25");
  // Values that would forge separators give different keys.
  std::vector<RlsEntry> forged = {{"user", "a"}, {"b", "c"}};
  std::vector<RlsEntry> plain = {{"user", "a|b=c"}};
  EXPECT_NE(BucketKey("tb", "dom", forged), BucketKey("tb", "dom", plain));
  const std::string long_value(5000, 'z');
  std::vector<RlsEntry> l1 = {{"k", long_value}};
  const std::string other = long_value + "y";
  std::vector<RlsEntry> l2 = {{"k", other}};
  const std::string k1 = BucketKey("tb", "dom", l1), k2 = BucketKey("tb", "dom", l2);
  EXPECT_LE(k1.size(), kMaxRlsKeyBytes);
  EXPECT_NE(k1, k2);
  EXPECT_NE(k1.find('#'), std::string::npos);
}

}  // namespace
}  // namespace tollgate::rls
