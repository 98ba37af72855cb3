// Issue 18, policy half: CIDR sets, not / any / all, value files, the allow,
// deny and unlimited actions (with their evaluation order and explain
// traces), and tenant tables (parsing, line-numbered errors, lookups, reload).
#include <gtest/gtest.h>

#include <fstream>

#include "policy/client_ip.h"
#include "policy/policy_impl.h"
#include "policy/value_sets.h"
#include "policy_test_util.h"
#include "testing/scoped_temp_dir.h"

namespace tollgate {
namespace {

using testing::FindHeader;
using testing::Harness;
using testing::ScopedTempDir;
using testing::TestRequest;

void WriteFile(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string FirstError(const ParsedPolicy& p) {
  return p.errors.empty() ? std::string("(no error)")
                          : p.errors[0].path + ": " + p.errors[0].message;
}

bool Contains(const std::vector<std::string>& lines, std::string_view needle) {
  for (const std::string& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// CidrSet

TEST(CidrSet, MergesRangesAndMatchesBothFamilies) {
  std::vector<size_t> bad;
  auto set = CidrSet::Build({"10.0.0.0/8", "10.1.0.0/16", "192.168.1.7", "11.0.0.0/8",
                             "2001:db8::/32", "::1/128", "fe80::/10", "nonsense", "1.2.3.4/33"},
                            [&](size_t i, const std::string&) { bad.push_back(i); });
  EXPECT_EQ(bad, (std::vector<size_t>{7, 8}));
  EXPECT_EQ(set->v4_ranges(), 2u);  // 10/8 + 11/8 adjacent -> one; 192.168.1.7
  EXPECT_TRUE(set->Contains("10.200.3.4"));
  EXPECT_TRUE(set->Contains("11.255.255.255"));
  EXPECT_FALSE(set->Contains("12.0.0.0"));
  EXPECT_FALSE(set->Contains("9.255.255.255"));
  EXPECT_TRUE(set->Contains("192.168.1.7"));
  EXPECT_FALSE(set->Contains("192.168.1.8"));
  EXPECT_TRUE(set->Contains("2001:db8:ffff::1"));
  EXPECT_FALSE(set->Contains("2001:db9::1"));
  EXPECT_TRUE(set->Contains("::1"));
  EXPECT_FALSE(set->Contains("::2"));
  EXPECT_TRUE(set->Contains("fe80::1234"));
  EXPECT_TRUE(set->Contains("::ffff:10.9.9.9"));  // IPv4-mapped is IPv4
  EXPECT_FALSE(set->Contains("not an ip"));
  EXPECT_FALSE(set->Contains(""));
}

TEST(CidrSet, ZeroPrefixAndHostBitsSet) {
  auto all = CidrSet::Build({"0.0.0.0/0", "::/0"}, [](size_t, const std::string&) {});
  EXPECT_TRUE(all->Contains("255.255.255.255"));
  EXPECT_TRUE(all->Contains("0.0.0.0"));
  EXPECT_TRUE(all->Contains("ffff::1"));
  auto host = CidrSet::Build({"10.1.2.3/24"}, [](size_t, const std::string&) {});
  EXPECT_TRUE(host->Contains("10.1.2.200"));
  EXPECT_FALSE(host->Contains("10.1.3.0"));
}

// ---------------------------------------------------------------------------
// Match conditions

constexpr char kLimitTail[] =
    R"("limit_keys": ["ip:address"], "algorithm_config": {"rps": 1, "burst": 2}})";

std::string RuleWithMatch(std::string_view match) {
  return std::string(R"({"rules": [{"name": "r", "match": )") + std::string(match) + ", " +
         kLimitTail + "]}";
}

TEST(Match, CidrOnTheClientAddressHonoursTrustedProxies) {
  EnforcerOptions o;
  o.trusted_proxies = {"127.0.0.1"};
  Harness h(RuleWithMatch(R"({"cidr": ["198.51.100.0/24", "2001:db8::/32"]})"), o);
  TestRequest inside;
  inside.Peer("198.51.100.7");
  EXPECT_EQ(h.Check(inside).rules.size(), 1u);
  TestRequest outside;
  outside.Peer("203.0.113.1");
  EXPECT_EQ(h.Check(outside).rules.size(), 0u);
  TestRequest v6;
  v6.Peer("2001:db8::5");
  EXPECT_EQ(h.Check(v6).rules.size(), 1u);
  // Through the trusted proxy, the forwarded address is the one matched.
  TestRequest proxied;
  proxied.Peer("127.0.0.1").Header("X-Forwarded-For", "198.51.100.9");
  EXPECT_EQ(h.Check(proxied).rules.size(), 1u);
  // An untrusted peer cannot claim an address inside the set.
  TestRequest spoofed;
  spoofed.Peer("203.0.113.1").Header("X-Forwarded-For", "198.51.100.9");
  EXPECT_EQ(h.Check(spoofed).rules.size(), 0u);
}

TEST(Match, NotAnyAllCompose) {
  Harness h(RuleWithMatch(R"({
      "any": [{"header:x-tier": "gold"}, {"all": [{"method": "POST"}, {"path": {"prefix": "/w"}}]}],
      "not": {"ip:address": {"cidr": ["10.0.0.0/8"]}}})"));
  auto applies = [&](TestRequest r) { return h.Check(r).rules.size() == 1; };
  EXPECT_TRUE(applies(TestRequest().Header("x-tier", "gold")));
  EXPECT_FALSE(applies(TestRequest().Header("x-tier", "gold").Peer("10.2.3.4")));
  EXPECT_TRUE(applies(TestRequest().Method("POST").Path("/write")));
  EXPECT_FALSE(applies(TestRequest().Method("GET").Path("/write")));
  EXPECT_FALSE(applies(TestRequest().Method("POST").Path("/read")));
  EXPECT_FALSE(applies(TestRequest()));
}

TEST(Match, ValueFilesAreReadBesideThePolicy) {
  ScopedTempDir dir;
  WriteFile(dir.File("keys.txt"), "# partners\nk1\n  k2  \n\nk3\n");
  WriteFile(dir.File("nets.txt"), "10.0.0.0/8\n# office\n2001:db8::/32\n");
  WriteFile(dir.File("policy.json"), RuleWithMatch(R"({
      "header:x-api-key": {"one_of": {"file": "keys.txt"}},
      "cidr": {"file": "nets.txt"}})"));
  ParsedPolicy p = ParsePolicyFile(dir.File("policy.json"));
  ASSERT_TRUE(p.errors.empty()) << FirstError(p);
  auto store = PolicyStore::FromPolicy(p.policy);
  ManualClock clock;
  auto local = LocalStore::Create({.max_keys = 1 << 12, .shards = 4, .clock = &clock});
  ASSERT_TRUE(local.ok());
  auto e = Enforcer::Create(store, local->get(), &clock);
  ASSERT_TRUE(e.ok());
  auto applies = [&](TestRequest r) { return (*e)->Check(r.View()).rules.size() == 1; };
  EXPECT_TRUE(applies(TestRequest().Peer("10.1.1.1").Header("x-api-key", "k2")));
  EXPECT_TRUE(applies(TestRequest().Peer("2001:db8::1").Header("x-api-key", "k3")));
  EXPECT_FALSE(applies(TestRequest().Peer("10.1.1.1").Header("x-api-key", "k4")));
  EXPECT_FALSE(applies(TestRequest().Peer("192.0.2.1").Header("x-api-key", "k1")));
  EXPECT_FALSE(applies(TestRequest().Peer("10.1.1.1")));
}

TEST(Match, ErrorsNameThePathAndTheLine) {
  ScopedTempDir dir;
  WriteFile(dir.File("bad.txt"), "10.0.0.0/8\n\n# comment\nnot-a-cidr\n");
  PolicyParseOptions o{.base_dir = dir.path()};
  struct Case {
    std::string match;
    std::string error;
  } cases[] = {
      {R"({"any": [{"path": "/a"}, {"cidr": {"file": "bad.txt"}}]})",
       "rules[0].match.any[1].cidr: bad.txt line 4: not a CIDR or IP address"},
      {R"({"cidr": {"file": "missing.txt"}})", "rules[0].match.cidr.file: cannot read"},
      {R"({"cidr": ["10.0.0.0/8", "1.2.3.4/40"]})",
       "rules[0].match.cidr[1]: not a CIDR or IP address"},
      {R"({"cidr": []})", "rules[0].match.cidr: must be an array of 1 to 1024 CIDRs"},
      {R"({"cidr": {"path": "x"}})",
       "rules[0].match.cidr: must be a CIDR, an array of CIDRs or {\"file\""},
      {R"({"cidr": {"file": "bad.txt", "x": 1}})", "rules[0].match.cidr.x: unknown field"},
      {R"({"cidr": {"file": 7}})", "rules[0].match.cidr.file: must be a string (got a number)"},
      {R"({"header:x": {"one_of": {"file": ""}}})",
       "rules[0].match.header:x.one_of.file: must be a path of 1 to 4096"},
      {R"({"any": []})", "rules[0].match.any: must be an array of 1 to 16"},
      {R"({"any": [{}]})", "rules[0].match.any[0]: needs at least one condition"},
      {R"({"not": [1]})", "rules[0].match.not: must be an object"},
      {R"({"header:x": {"cidr": 5}})",
       "rules[0].match.header:x.cidr: must be a CIDR, an array of CIDRs"},
      {R"({"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"path": "/"}}}}}}}}}})",
       "nested deeper than 8 levels"},
  };
  for (const Case& c : cases) {
    ParsedPolicy p = ParsePolicy(RuleWithMatch(c.match), o);
    ASSERT_FALSE(p.errors.empty()) << c.match;
    EXPECT_NE(FirstError(p).find(c.error), std::string::npos) << c.match << " -> " << FirstError(p);
  }
}

TEST(Match, TotalSizeIsBounded) {
  // 9 any-branches of 15 conditions: each object is within bounds, the total is not.
  std::string branch = "{";
  for (int i = 0; i < 15; ++i)
    branch += std::string(i ? "," : "") + "\"header:h" + std::to_string(i) + "\": \"v\"";
  branch += "}";
  std::string any = R"({"any": [)";
  for (int i = 0; i < 9; ++i) any += (i ? "," : "") + branch;
  any += "]}";
  ParsedPolicy p = ParsePolicy(RuleWithMatch(any));
  ASSERT_FALSE(p.errors.empty());
  EXPECT_NE(FirstError(p).find("more than 128 conditions in all"), std::string::npos)
      << FirstError(p);
}

TEST(Match, FilesRefusedWhenTheCallerSaysSo) {
  ParsedPolicy p = ParsePolicy(RuleWithMatch(R"({"cidr": {"file": "/etc/hostname"}})"),
                               PolicyParseOptions{.base_dir = "", .files = false});
  EXPECT_NE(FirstError(p).find("rules[0].match.cidr.file: files are not read here"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// Actions and the evaluation order

constexpr char kActions[] = R"({"rules": [
  {"name": "global", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 1, "burst": 3}},
  {"name": "blocked", "action": "deny", "match": {"cidr": ["192.0.2.0/24"]}},
  {"name": "internal", "action": "allow", "match": {"cidr": ["10.0.0.0/8", "fd00::/8"]}},
  {"name": "batch", "action": "unlimited", "group": "plan", "limit_keys": ["header:x-service"],
   "match": {"header:x-service": "batch"}},
  {"name": "per-key", "group": "plan", "limit_keys": ["header:x-service"],
   "algorithm_config": {"rps": 1, "burst": 1}}
]})";

TEST(Actions, AllowExemptsFromLaterRulesOnly) {
  Harness h(kActions);
  TestRequest r;
  r.Peer("10.0.0.5").Header("x-service", "web");
  for (int i = 0; i < 3; ++i) {
    CheckOutcome o = h.Check(r);
    ASSERT_TRUE(o.allowed()) << i;
    ASSERT_EQ(o.rules.size(), 2u);  // global (above the allow rule) and internal
    EXPECT_EQ(o.rules[0].rule, "global");
    EXPECT_EQ(o.rules[0].action, "limit");
    EXPECT_EQ(o.rules[1].rule, "internal");
    EXPECT_EQ(o.rules[1].action, "allow");  // its limit is only a placeholder
  }
  // The rule above the allow rule still limits; per-key below it never applied.
  EXPECT_FALSE(h.Check(r).allowed());
}

TEST(Actions, DenyRefusesWith403AndChargesNothing) {
  Harness h(kActions);
  TestRequest r;
  r.Peer("192.0.2.44");
  for (int i = 0; i < 5; ++i) {
    CheckOutcome o = h.Check(r);
    EXPECT_EQ(o.verdict, CheckOutcome::Verdict::kReject);
    EXPECT_EQ(o.http_status, 403);
    ASSERT_GE(o.denied_rule, 0);
    EXPECT_EQ(o.rules[static_cast<size_t>(o.denied_rule)].rule, "blocked");
    EXPECT_EQ(o.rules[static_cast<size_t>(o.denied_rule)].action, "deny");
    EXPECT_EQ(FindHeader(o, "Retry-After"), "");
    EXPECT_EQ(FindHeader(o, "X-RateLimit-Reason"), "denied; policy=\"blocked\"");
    auto body = nlohmann::json::parse(o.body);
    EXPECT_EQ(body["status"], 403);
    EXPECT_EQ(body["type"], "about:blank");
    EXPECT_EQ(body["violated-policies"][0], "blocked");
  }
  // "global" was only peeked: the address still has its 3 tokens.
  h.enforcer->policies().ReloadFromText(
      R"({"rules": [{"name": "global", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 1, "burst": 3}}]})");
  CheckOutcome o = h.Check(r);
  ASSERT_TRUE(o.allowed());
  EXPECT_EQ(o.rules[0].decision.remaining, 2);
  for (const RuleCounters& c : h.enforcer->Counters()) {
    if (c.rule == "blocked") {
      EXPECT_EQ(c.rejected, 5u);
    }
  }
}

TEST(Actions, ShadowDenyOnlyCounts) {
  Harness h(R"({"rules": [
    {"name": "blocked", "action": "deny", "mode": "shadow", "match": {"cidr": ["192.0.2.0/24"]}},
    {"name": "global", "limit_keys": ["ip:address"], "algorithm_config": {"rps": 1, "burst": 3}}]})");
  TestRequest r;
  r.Peer("192.0.2.44");
  CheckOutcome o = h.Check(r);
  EXPECT_TRUE(o.allowed());
  ASSERT_EQ(o.rules.size(), 2u);
  EXPECT_EQ(o.rules[1].decision.remaining, 2);  // evaluation went on to global
  for (const RuleCounters& c : h.enforcer->Counters()) {
    if (c.rule == "blocked") {
      EXPECT_EQ(c.shadow_rejected, 1u);
    }
  }
}

TEST(Actions, UnlimitedTakesItsTierAndEvaluationGoesOn) {
  Harness h(kActions);
  TestRequest batch;
  batch.Peer("203.0.113.2").Header("x-service", "batch");
  for (int i = 0; i < 3; ++i) {
    CheckOutcome o = h.Check(batch);
    ASSERT_TRUE(o.allowed());
    ASSERT_EQ(o.rules.size(), 2u);  // global + batch; per-key (same group) not applied
    EXPECT_EQ(o.rules[1].rule, "batch");
    EXPECT_EQ(o.rules[1].decision.remaining, INT64_MAX);
  }
  TestRequest web;
  web.Peer("203.0.113.3").Header("x-service", "web");
  EXPECT_TRUE(h.Check(web).allowed());
  CheckOutcome o = h.Check(web);  // per-key: burst 1
  EXPECT_FALSE(o.allowed());
  EXPECT_EQ(o.http_status, 429);
}

// A tripped rollback guard puts a limit or deny rule in shadow; allow and
// unlimited rules have nothing to shadow and stay as they are.
TEST(Actions, ATrippedGuardShadowsOnlyLimitAndDenyRules) {
  Harness h(kActions);
  for (const char* rule : {"blocked", "internal", "batch", "global"}) {
    ASSERT_TRUE(h.enforcer->TripRollback(rule, "test")) << rule;
  }
  TestRequest internal;
  internal.Peer("10.0.0.5");
  CheckOutcome o = h.Check(internal);
  ASSERT_EQ(o.rules.size(), 2u);
  EXPECT_EQ(o.rules[0].shadow_reason, RuleOutcome::ShadowReason::kRollback);  // global
  EXPECT_EQ(o.rules[1].rule, "internal");
  EXPECT_FALSE(o.rules[1].shadow);
  TestRequest batch;
  batch.Peer("203.0.113.2").Header("x-service", "batch");
  o = h.Check(batch);
  ASSERT_EQ(o.rules.size(), 2u);
  EXPECT_EQ(o.rules[1].rule, "batch");
  EXPECT_FALSE(o.rules[1].shadow);
  TestRequest blocked;
  blocked.Peer("192.0.2.44");
  o = h.Check(blocked);
  EXPECT_TRUE(o.allowed());  // the deny rule only counts now
  ASSERT_GE(o.rules.size(), 2u);
  EXPECT_EQ(o.rules[1].rule, "blocked");
  EXPECT_EQ(o.rules[1].shadow_reason, RuleOutcome::ShadowReason::kRollback);
}

TEST(Actions, ExplainShowsTheMatchAndWhatWasSkipped) {
  Harness h(kActions);
  TestRequest r;
  r.Peer("10.0.0.5");
  CheckOutcome o = h.enforcer->Explain(r.View());
  EXPECT_TRUE(o.allowed());
  EXPECT_TRUE(Contains(o.trace, "blocked: no match (ip:address cidr [1 ranges] failed)"));
  EXPECT_TRUE(Contains(o.trace, "internal: matches, key \\missing, action allow: exempt"));
  EXPECT_TRUE(Contains(o.trace, "batch: not evaluated (allow rule 'internal' matched first)"));
  EXPECT_TRUE(Contains(o.trace, "per-key: not evaluated (allow rule 'internal' matched first)"));
  TestRequest d;
  d.Peer("192.0.2.1");
  CheckOutcome od = h.enforcer->Explain(d.View());
  EXPECT_EQ(od.http_status, 403);
  EXPECT_TRUE(Contains(od.trace, "blocked: matches, key \\missing, action deny: refused (403)"));
}

TEST(Actions, ExplicitItemsNamingARuleFollowItsAction) {
  Harness h(kActions);
  ExplicitItem deny{.rule = "blocked", .key = "x"};
  auto denied = h.enforcer->CheckItems(std::span(&deny, 1));
  ASSERT_TRUE(denied.ok());
  EXPECT_EQ(denied->http_status, 403);
  ExplicitItem allow{.rule = "internal", .key = "x", .cost = 1000};
  for (int i = 0; i < 3; ++i) {
    auto allowed = h.enforcer->CheckItems(std::span(&allow, 1));
    ASSERT_TRUE(allowed.ok());
    EXPECT_TRUE(allowed->allowed());
    EXPECT_EQ(allowed->rules[0].decision.remaining, INT64_MAX);
  }
}

TEST(Actions, FieldsWithoutUseAreRefused) {
  struct Case {
    std::string rule, error;
  } cases[] = {
      {R"({"name": "a", "action": "allow", "algorithm_config": {"rps": 1, "burst": 1}})",
       "rules[0].algorithm_config: is not used by action allow"},
      {R"({"name": "a", "action": "allow", "mode": "shadow"})", "rules[0].mode: is not used"},
      {R"({"name": "a", "action": "unlimited", "tenants": "t.csv"})",
       "rules[0].tenants: is not used by action unlimited"},
      {R"({"name": "a", "action": "deny", "refund_on": ["5xx"]})",
       "rules[0].refund_on: is not used by action deny"},
      {R"({"name": "a", "action": "block"})", "rules[0].action: must be one of"},
      {R"({"name": "a", "action": "limit"})", "rules[0].limit_keys: is required"},
  };
  for (const Case& c : cases) {
    ParsedPolicy p = ParsePolicy(std::string(R"({"rules": [)") + c.rule + "]}");
    EXPECT_NE(FirstError(p).find(c.error), std::string::npos) << c.rule << " -> " << FirstError(p);
  }
  EXPECT_TRUE(ParsePolicy(R"({"rules": [{"name": "a", "action": "deny", "mode": "shadow"}]})")
                  .errors.empty());
}

// ---------------------------------------------------------------------------
// Tenant tables

TEST(TenantTable, ParsesRowsAndFindsByNormalisedIdentity) {
  std::vector<LineError> errors;
  auto t = TenantTable::Parse(
      "# plans\nidentity,count,period,rps,burst\nacme,1000,1h,,\nglobex,,,5,10\n"
      "initech,1000,1h,,\n\"q\" x,10,1m,,\n",
      Algorithm::kTokenBucket, &errors);
  ASSERT_TRUE(errors.empty()) << errors[0].line << ": " << errors[0].message;
  ASSERT_TRUE(t);
  EXPECT_EQ(t->size(), 4u);
  EXPECT_EQ(t->distinct_limits(), 3u);  // acme and initech share one
  ASSERT_TRUE(t->Find("acme"));
  EXPECT_EQ(t->Find("acme")->burst(), 1000);
  EXPECT_EQ(t->Find("globex")->burst(), 10);
  EXPECT_EQ(t->Find("acme"), t->Find("initech"));
  EXPECT_EQ(t->Find("nobody"), nullptr);
  EXPECT_NE(t->Find(NormalizeKeyValue("\"q\" x")), nullptr);
}

TEST(TenantTable, BadRowsAreReportedByLine) {
  struct Case {
    std::string text;
    size_t line;
    std::string error;
  } cases[] = {
      {"identity,count,period\na,10,1h\na,5,1h\n", 3, "duplicate identity"},
      {"identity,count,period\na,10\n", 2, "expected 3 fields, got 2"},
      {"identity,count,period\na,-1,1h\n", 2, "count must be a whole number"},
      {"identity,count,period\na,10,1 fortnight\n", 2, "period:"},
      {"identity,rps,burst\na,0,10\n", 2, "rps must be a positive number"},
      {"identity,rps,burst\na,nan,10\n", 2, "rps must be a positive number"},
      {"identity,rps,burst\na,100,10\n", 2, "burst"},
      {"identity,count,period,rps,burst\na,10,1h,5,10\n", 2, "exactly one pair"},
      {"identity,count,period\n,10,1h\n", 2, "identity is empty"},
      {"identity,plan\n", 1, "header: unknown column 2"},
      {"count,period\n", 1, "header: needs an identity column"},
      {"# only a comment\n", 0, "empty: needs a header line"},
  };
  for (const Case& c : cases) {
    std::vector<LineError> errors;
    auto t = TenantTable::Parse(c.text, Algorithm::kTokenBucket, &errors);
    EXPECT_EQ(t, nullptr) << c.text;
    ASSERT_FALSE(errors.empty()) << c.text;
    EXPECT_EQ(errors[0].line, c.line) << c.text;
    EXPECT_NE(errors[0].message.find(c.error), std::string::npos)
        << c.text << " -> " << errors[0].message;
  }
  std::vector<LineError> errors;
  EXPECT_EQ(TenantTable::Parse("identity,rps,burst\n", Algorithm::kFixedWindow, &errors), nullptr);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].message.find("not used by fixed_window"), std::string::npos);
}

TEST(TenantTable, ErrorsAreCappedNotFlooded) {
  std::string text = "identity,count,period\n";
  for (int i = 0; i < 1000; ++i) text += "x" + std::to_string(i) + ",bad,1h\n";
  std::vector<LineError> errors;
  EXPECT_EQ(TenantTable::Parse(text, Algorithm::kTokenBucket, &errors, 10), nullptr);
  EXPECT_EQ(errors.size(), 10u);
}

TEST(Tenants, RuleUsesTheTenantsOwnLimitAndReloadsWithThePolicy) {
  ScopedTempDir dir;
  WriteFile(dir.File("tenants.csv"), "identity,count,period\nbig,5,1m\n");
  WriteFile(dir.File("policy.json"), R"({"rules": [{"name": "per-key",
      "limit_keys": ["header:x-api-key"], "tenants": {"file": "tenants.csv"},
      "algorithm_config": {"count": 2, "period": "1m"}}]})");
  auto ps = PolicyStore::Open(dir.File("policy.json"));
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ManualClock clock;
  auto local = LocalStore::Create({.max_keys = 1 << 12, .shards = 4, .clock = &clock});
  ASSERT_TRUE(local.ok());
  auto e = Enforcer::Create(*ps, local->get(), &clock);
  ASSERT_TRUE(e.ok());
  auto allowed = [&](const std::string& key, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) {
      TestRequest r;
      r.Header("x-api-key", key);
      ok += (*e)->Check(r.View()).allowed() ? 1 : 0;
    }
    return ok;
  };
  EXPECT_EQ(allowed("big", 8), 5);
  EXPECT_EQ(allowed("small", 8), 2);
  // An explicit item (POST /v1/decide) on the rule gets the tenant's limit too.
  ExplicitItem item{.rule = "per-key", .key = "big", .cost = 0};
  auto peek = (*e)->CheckItems(std::span(&item, 1));
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->rules[0].decision.limit, 5);
  // Explain says which limit applied.
  TestRequest r;
  r.Header("x-api-key", "big");
  EXPECT_TRUE(Contains((*e)->Explain(r.View()).trace, "(tenant limit)"));
  // A bad table leaves the old policy in place, with the line in the error.
  WriteFile(dir.File("tenants.csv"), "identity,count,period\nhuge,7,1m\nhuge,8,1m\n");
  auto errors = (*ps)->Reload();
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].path, "rules[0].tenants");
  EXPECT_NE(errors[0].message.find("tenants.csv line 3: duplicate identity"), std::string::npos)
      << errors[0].message;
  EXPECT_EQ(allowed("huge", 3), 2);
  // A good one is live after the reload.
  WriteFile(dir.File("tenants.csv"), "identity,count,period\nhuge,7,1m\nfresh,7,1m\n");
  ASSERT_TRUE((*ps)->Reload().empty());
  EXPECT_EQ(allowed("fresh", 10), 7);
}

TEST(TenantTable, FromEntriesReportsByFieldName) {
  std::vector<std::pair<std::string, std::string>> entries = {{"acme", "count=1000,period=1h"},
                                                              {"Bolt ", "rps=10, burst=20"},
                                                              {"free", "count=5,period=1m"}};
  std::vector<std::string> errors;
  auto table = TenantTable::FromEntries(entries, Algorithm::kTokenBucket, &errors);
  ASSERT_NE(table, nullptr) << errors[0];
  EXPECT_EQ(table->size(), 3u);
  ASSERT_NE(table->Find("acme"), nullptr);
  EXPECT_EQ(table->Find("acme")->burst(), 1000);
  ASSERT_NE(table->Find(NormalizeKeyValue("Bolt ")), nullptr);
  EXPECT_EQ(table->Find(NormalizeKeyValue("Bolt "))->burst(), 20);
  EXPECT_EQ(table->Find("nobody"), nullptr);

  struct Case {
    std::string value;
    std::string error;
  } cases[] = {
      {"1000,1h", "field \"t\": expected count=N,period=P or rps=R,burst=B"},
      {"count=0,period=1h", "field \"t\": count must be a whole number"},
      {"count=5", "field \"t\": period:"},
      {"count=5,period=1h,rps=1,burst=1", "field \"t\": set count and period, or rps and burst"},
      {"count=5,count=6,period=1h", "field \"t\": count twice"},
      {"rps=5,burst=2", "field \"t\": burst must be >= rps"},
  };
  for (const Case& c : cases) {
    std::vector<std::pair<std::string, std::string>> one = {{"t", c.value}};
    std::vector<std::string> errs;
    EXPECT_EQ(TenantTable::FromEntries(one, Algorithm::kTokenBucket, &errs), nullptr) << c.value;
    ASSERT_EQ(errs.size(), 1u) << c.value;
    EXPECT_NE(errs[0].find(c.error), std::string::npos) << c.value << " -> " << errs[0];
  }
  std::vector<std::pair<std::string, std::string>> window = {{"w", "rps=1,burst=1"}};
  std::vector<std::string> werrs;
  EXPECT_EQ(TenantTable::FromEntries(window, Algorithm::kFixedWindow, &werrs), nullptr);
  ASSERT_EQ(werrs.size(), 1u);
  EXPECT_NE(werrs[0].find("not used by fixed_window"), std::string::npos) << werrs[0];
  // Two fields that normalise to one identity.
  std::vector<std::pair<std::string, std::string>> twins = {{"a\x01", "count=1,period=1s"},
                                                            {"a\x02", "count=1,period=1s"}};
  std::vector<std::string> terrs;
  auto t = TenantTable::FromEntries(twins, Algorithm::kTokenBucket, &terrs);
  if (NormalizeKeyValue("a\x01") == NormalizeKeyValue("a\x02")) {
    EXPECT_EQ(t, nullptr);
  } else {
    EXPECT_NE(t, nullptr);
  }
}

constexpr char kHashPolicy[] = R"({"rules": [{"name": "per-key",
    "limit_keys": ["header:x-api-key"], "tenants": {"redis_hash": "plans", "refresh": "30s"},
    "algorithm_config": {"count": 2, "period": "1m"}}]})";

TEST(Tenants, RedisHashIsReadThroughTheFrontEndsReader) {
  std::vector<std::pair<std::string, std::string>> hash = {{"big", "count=5,period=1m"}};
  std::vector<TenantHashRef> asked;
  Status fail = Status::Ok();
  PolicyParseOptions options;
  options.read_tenant_hash = [&](const TenantHashRef& ref,
                                 std::vector<std::pair<std::string, std::string>>* out) {
    asked.push_back(ref);
    if (!fail.ok()) return fail;
    *out = hash;
    return Status::Ok();
  };
  ManualClock clock;
  auto ps = PolicyStore::FromText(kHashPolicy, &clock, options);
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].key, "plans");
  EXPECT_EQ(asked[0].refresh, std::chrono::seconds(30));
  auto local = LocalStore::Create({.max_keys = 1 << 12, .shards = 4, .clock = &clock});
  ASSERT_TRUE(local.ok());
  auto e = Enforcer::Create(*ps, local->get(), &clock);
  ASSERT_TRUE(e.ok());
  auto allowed = [&](const std::string& key, int n) {
    int ok = 0;
    for (int i = 0; i < n; ++i) {
      TestRequest r;
      r.Header("x-api-key", key);
      ok += (*e)->Check(r.View()).allowed() ? 1 : 0;
    }
    return ok;
  };
  EXPECT_EQ(allowed("big", 8), 5);
  EXPECT_EQ(allowed("small", 8), 2);
  // A reload reads the hash again (ReloadFromText keeps the store's options).
  hash = {{"big", "count=5,period=1m"}, {"new", "count=4,period=1m"}};
  ASSERT_TRUE((*ps)->ReloadFromText(kHashPolicy).empty());
  EXPECT_EQ(asked.size(), 2u);
  EXPECT_EQ(allowed("new", 8), 4);
  // A bad entry names its field; the running policy stays.
  hash = {{"new", "count=4,period=1m"}, {"oops", "count=lots,period=1m"}};
  auto errors = (*ps)->ReloadFromText(kHashPolicy);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "rules[0].tenants");
  EXPECT_NE(errors[0].message.find("redis hash plans field \"oops\": count must be"),
            std::string::npos)
      << errors[0].message;
  // So does a failed read.
  fail = UnavailableError("connection refused");
  errors = (*ps)->ReloadFromText(kHashPolicy);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].message, "redis hash plans: connection refused");
  // Still the last good table: "new" keeps its own limit.
  ExplicitItem item{.rule = "per-key", .key = "new", .cost = 0};
  auto peek = (*e)->CheckItems(std::span(&item, 1));
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->rules[0].decision.limit, 4);
}

TEST(Tenants, RedisHashWithoutAReaderIsOnlyChecked) {
  ParsedPolicy p = ParsePolicy(kHashPolicy);
  ASSERT_TRUE(p.errors.empty()) << FirstError(p);
  EXPECT_NE(SummarizePolicy(*p.policy)[0].description.find("tenants=0"), std::string::npos);
  struct Case {
    std::string tenants;
    std::string error;
  } cases[] = {
      {R"({"redis_hash": ""})", "rules[0].tenants.redis_hash: must be 1 to 512 bytes"},
      {R"({"redis_hash": 5})", "rules[0].tenants.redis_hash: must be a string (got a number)"},
      {R"({"redis_hash": "k", "refresh": "10ms"})",
       "rules[0].tenants.refresh: must be at least 1s"},
      {R"({"redis_hash": "k", "every": "1m"})", "rules[0].tenants.every: unknown field"},
      {R"({"hash": "k"})", "rules[0].tenants: must be a file path, {\"redis_hash\""},
  };
  for (const Case& c : cases) {
    ParsedPolicy bad = ParsePolicy(R"({"rules": [{"name": "a", "limit_keys": ["ip:address"],
        "tenants": )" + c.tenants + R"(, "algorithm_config": {"rps": 1, "burst": 1}}]})");
    EXPECT_NE(FirstError(bad).find(c.error), std::string::npos)
        << c.tenants << " -> " << FirstError(bad);
  }
}

// Issue 18: a store opened from a file keeps the file's directory, so a
// reload from text (the admin API, etcd) finds relative files where a load did.
TEST(Tenants, RelativeFilesResolveBesideThePolicyOnReloadFromText) {
  ScopedTempDir dir;
  WriteFile(dir.File("tenants.csv"), "identity,count,period\nbig,5,1m\n");
  WriteFile(dir.File("nets.txt"), "10.0.0.0/8\n");
  const std::string text = R"({"rules": [{"name": "per-key",
      "limit_keys": ["header:x-api-key"], "tenants": {"file": "tenants.csv"},
      "match": {"cidr": {"file": "nets.txt"}},
      "algorithm_config": {"count": 2, "period": "1m"}}]})";
  WriteFile(dir.File("policy.json"), text);
  auto ps = PolicyStore::Open(dir.File("policy.json"));
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  EXPECT_EQ((*ps)->parse_options().base_dir, dir.path());
  const std::vector<ConfigError> errors = (*ps)->ReloadFromText(text);
  EXPECT_TRUE(errors.empty()) << errors[0].ToString();
}

TEST(Tenants, NeedsExactlyOneKey) {
  ParsedPolicy p = ParsePolicy(R"({"rules": [{"name": "a", "limit_keys": ["ip:address", "method"],
      "tenants": "t.csv", "algorithm_config": {"rps": 1, "burst": 1}}]})");
  EXPECT_NE(FirstError(p).find("rules[0].tenants: needs exactly one limit key"), std::string::npos)
      << FirstError(p);
}

}  // namespace
}  // namespace tollgate
