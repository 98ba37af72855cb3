// Soft limits and per-rule answers in the policy layer (issue 34): "soft" and
// "response" parse with every error naming its path; the Enforcer on a
// LocalStore with a ManualClock admits over a soft limit and says so (r=0 and
// X-RateLimit-Soft-Exceeded, counted soft_exceeded), charges a soft rule
// nothing once it is empty, refuses by the hard rule beside it, and answers a
// refusal with the rule's own status, header fields and problem texts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policy/policy_impl.h"
#include "policy_test_util.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

using namespace std::chrono_literals;
using testing::FindHeader;
using testing::Harness;
using testing::HasHeader;
using testing::TestRequest;

std::vector<ConfigError> Errors(std::string_view text) {
  ParsedPolicy p = ParsePolicy(text);
  EXPECT_EQ(p.policy == nullptr, !p.errors.empty()) << text;
  return p.errors;
}

// The message of the error at `path`, or "<none>" with every error listed.
std::string ErrorAt(std::string_view text, std::string_view path) {
  std::string all;
  for (const ConfigError& e : Errors(text)) {
    if (e.path == path) return e.message;
    all += "\n  " + e.ToString();
  }
  return "<none at " + std::string(path) + ">" + all;
}

std::string Rule(const std::string& extra, const std::string& head = "") {
  return R"({"rules": [)" + head +
         R"({"name": "r", "limit_keys": ["ip:address"], "algorithm": "token_bucket",
             "algorithm_config": {"rps": 1, "burst": 5})" +
         extra + "}]}";
}

std::string Response(const std::string& body) { return Rule(R"(, "response": )" + body); }

TEST(AnswerParse, FieldsAreRead) {
  ParsedPolicy p = ParsePolicy(Rule(R"(, "soft": true)"));
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  EXPECT_TRUE(p.policy->rules[0].soft);
  // Its own tier group: a hard rule on the same keys still applies beside it.
  EXPECT_EQ(p.policy->rules[0].group.rfind("soft,", 0), 0u) << p.policy->rules[0].group;
  EXPECT_NE(SummarizePolicy(*p.policy)[0].description.find(" soft"), std::string::npos);

  p = ParsePolicy(Response(R"({"status": 403, "headers": [{"name": "X-Plan", "value": "free"}],
      "type": "https://example.com/problems/{rule}", "title": "Over {rule}",
      "detail": "{limit} a day; retry in {retry_after} s", "ratelimit_headers": false})"));
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  const RuleResponse& r = *p.policy->rules[0].response;
  EXPECT_EQ(r.status, 403);
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].name, "X-Plan");
  EXPECT_EQ(r.headers[0].value, "free");
  EXPECT_EQ(r.title, "Over {rule}");
  EXPECT_FALSE(r.ratelimit_headers);
  EXPECT_NE(SummarizePolicy(*p.policy)[0].description.find(
                " response=403 response_headers=1 ratelimit_headers=false"),
            std::string::npos)
      << SummarizePolicy(*p.policy)[0].description;
  EXPECT_EQ(FillAnswerTemplate(r.detail, "r", 5, 12), "5 a day; retry in 12 s");
  EXPECT_EQ(FillAnswerTemplate("}{rule}{", "a", 0, 0), "}a{");
}

TEST(AnswerParse, SoftErrorsNameTheirPath) {
  EXPECT_EQ(ErrorAt(Rule(R"(, "soft": "yes")"), "rules[0].soft"),
            "must be true or false (got a string)");
  EXPECT_EQ(
      ErrorAt(R"({"rules": [{"name": "a", "action": "allow", "soft": true}]})", "rules[0].soft"),
      "is only used by limit rules");
  EXPECT_EQ(ErrorAt(R"({"rules": [{"name": "c", "limit_keys": ["ip:address"],
                      "algorithm": "concurrency", "soft": true,
                      "algorithm_config": {"max_in_flight": 2, "lease": "30s"}}]})",
                    "rules[0].soft"),
            "is not used by a concurrency rule (a slot cannot be lent past its limit)");
  for (const char* field :
       {R"("mode": "shadow")", R"("enforce_percent": 50)", R"("block_for": "1m")",
        R"("count_on": ["401"])", R"("refund_on": ["5xx"])",
        R"("rollback": {"max_reject_ratio": 0.5})"}) {
    const std::string text = Rule(std::string(R"(, "soft": true, )") + field);
    const std::string name = std::string(field).substr(1, std::string(field).find('"', 1) - 1);
    EXPECT_EQ(ErrorAt(text, "rules[0]." + name), "is not used by a soft rule (it never refuses)")
        << field;
  }
  EXPECT_EQ(ErrorAt(Rule(R"(, "soft": true, "response": {"status": 403})"), "rules[0].response"),
            "is not used by a soft rule (it never refuses)");
  // "soft": false is the default, and allowed anywhere a limit rule is.
  EXPECT_TRUE(Errors(Rule(R"(, "soft": false, "mode": "shadow")")).empty());
}

TEST(AnswerParse, ResponseErrorsNameTheirPath) {
  const std::string p = "rules[0].response";
  EXPECT_EQ(ErrorAt(Response("429"), p), "must be an object (got a number)");
  EXPECT_EQ(ErrorAt(R"({"rules": [{"name": "a", "action": "allow", "response": {}}]})", p),
            "is only used by limit and deny rules (this rule never refuses)");
  EXPECT_NE(ErrorAt(Response(R"({"body": "x"})"), p + ".body").find("unknown"), std::string::npos);
  for (const char* status : {"200", "302", "600", "399", "\"429\"", "429.5"}) {
    EXPECT_EQ(ErrorAt(Response(std::string(R"({"status": )") + status + "}"), p + ".status")
                  .rfind("must be an HTTP error status, an integer from 400 to 599", 0),
              0u)
        << status;
  }
  EXPECT_NE(ErrorAt(Response(R"({"headers": {"X-A": "b"}})"), p + ".headers")
                .find("must be an array of up to 16"),
            std::string::npos);
  std::string many = "[";
  for (int i = 0; i < 17; ++i) {
    many +=
        std::string(i ? "," : "") + R"({"name": "X-H)" + std::to_string(i) + R"(", "value": "v"})";
  }
  EXPECT_NE(ErrorAt(Response(R"({"headers": )" + many + "]}"), p + ".headers").find("up to 16"),
            std::string::npos);
  const std::string h0 = p + ".headers[0]";
  EXPECT_NE(ErrorAt(Response(R"({"headers": ["X-A: b"]})"), h0).find("must be an object"),
            std::string::npos);
  EXPECT_EQ(ErrorAt(Response(R"({"headers": [{"value": "b"}]})"), h0 + ".name"), "is required");
  EXPECT_EQ(ErrorAt(Response(R"({"headers": [{"name": "X-A"}]})"), h0 + ".value"), "is required");
  EXPECT_NE(ErrorAt(Response(R"({"headers": [{"name": "X-A", "value": "b", "x": 1}]})"), h0 + ".x")
                .find("unknown"),
            std::string::npos);
  for (const char* name : {"X Bad", "X:Bad", "", "X\u00e9",
                           "X-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    EXPECT_EQ(ErrorAt(Response(std::string(R"({"headers": [{"name": ")") + name +
                               R"(", "value": "b"}]})"),
                      h0 + ".name")
                  .rfind("must be 1 to 64 token characters", 0),
              0u)
        << name;
  }
  for (const char* name :
       {"Content-Length", "transfer-encoding", "Connection", "Keep-Alive", "Upgrade", "TE",
        "Trailer", "Host", "Content-Type", "Retry-After", "RateLimit", "X-RateLimit-Decision"}) {
    EXPECT_NE(ErrorAt(Response(std::string(R"({"headers": [{"name": ")") + name +
                               R"(", "value": "b"}]})"),
                      h0 + ".name")
                  .find("hop-by-hop / framing field"),
              std::string::npos)
        << name;
  }
  EXPECT_EQ(ErrorAt(Response(R"({"headers": [{"name": "X-A", "value": "b"},
                                             {"name": "x-a", "value": "c"}]})"),
                    p + ".headers[1].name"),
            "\"x-a\" is listed twice");
  const std::string v0 = h0 + ".value";
  EXPECT_EQ(ErrorAt(Response(R"({"headers": [{"name": "X-A", "value": ""}]})"), v0),
            "must not be empty");
  EXPECT_EQ(ErrorAt(Response(R"({"headers": [{"name": "X-A", "value": " b"}]})"), v0),
            "must not start or end with whitespace");
  for (const char* value : {R"(b\r\nSet-Cookie: x=1)", R"(b\u0000)", "b\u00e9"}) {
    EXPECT_EQ(ErrorAt(Response(std::string(R"({"headers": [{"name": "X-A", "value": ")") + value +
                               "\"}]}"),
                      v0)
                  .rfind("must be visible ASCII", 0),
              0u)
        << value;
  }
  EXPECT_EQ(ErrorAt(Response(R"({"headers": [{"name": "X-A", "value": ")" + std::string(513, 'v') +
                             "\"}]}"),
                    v0),
            "must be at most 512 bytes");
  EXPECT_EQ(ErrorAt(Response(R"({"headers": [{"name": "X-A", "value": 5}]})"), v0)
                .rfind("must be a string", 0),
            0u);
  // Templates: only the three placeholders; request data can never be named.
  EXPECT_EQ(ErrorAt(Response(R"({"title": "over {path}"})"), p + ".title"),
            "unknown placeholder \"{path}\" (only {rule}, {limit} and {retry_after}; request "
            "data is never echoed)");
  EXPECT_NE(ErrorAt(Response(R"({"detail": "x {header:x-api-key}"})"), p + ".detail")
                .find("unknown placeholder"),
            std::string::npos);
  EXPECT_NE(ErrorAt(Response(R"({"detail": "x {"})"), p + ".detail").find("unknown placeholder"),
            std::string::npos);
  EXPECT_EQ(ErrorAt(Response(R"({"title": "a\nb"})"), p + ".title"),
            "must not contain control characters");
  EXPECT_EQ(ErrorAt(Response(R"({"title": ""})"), p + ".title"), "must not be empty");
  EXPECT_EQ(ErrorAt(Response(R"({"detail": ")" + std::string(1025, 'd') + "\"}"), p + ".detail"),
            "must be at most 1024 bytes");
  EXPECT_EQ(ErrorAt(Response(R"({"type": "https://x.example/a b"})"), p + ".type")
                .rfind("must be a URI reference", 0),
            0u);
  EXPECT_EQ(ErrorAt(Response(R"({"title": 5})"), p + ".title").rfind("must be a string", 0), 0u);
  EXPECT_EQ(ErrorAt(Response(R"({"ratelimit_headers": "no"})"), p + ".ratelimit_headers")
                .rfind("must be", 0),
            0u);
  EXPECT_EQ(ErrorAt(R"({"rules": [{"name": "d", "action": "deny",
                      "response": {"ratelimit_headers": false}}]})",
                    p + ".ratelimit_headers"),
            "is not used by a deny rule (it sends no rate-limit headers)");
  // Every error of a response is reported at once.
  EXPECT_EQ(Errors(Response(R"({"status": 200, "title": "{x}", "headers": [{"name": "Host",
                                 "value": "h"}]})"))
                .size(),
            3u);
}

// Warn at 3 a day, refuse at 6 a day, on the same key.
constexpr std::string_view kSoftBesideHard = R"({"rules": [
  {"name": "plan-soft", "limit_keys": ["header:x-api-key"], "soft": true,
   "algorithm": "token_bucket", "algorithm_config": {"count": 3, "period": "1d", "burst": 3}},
  {"name": "plan-hard", "limit_keys": ["header:x-api-key"],
   "algorithm": "token_bucket", "algorithm_config": {"count": 6, "period": "1d", "burst": 6}}]})";

uint64_t Counter(const Enforcer& e, std::string_view rule, uint64_t RuleCounters::*field) {
  for (const RuleCounters& c : e.Counters()) {
    if (c.rule == rule) return c.*field;
  }
  return 0;
}

TEST(SoftLimit, AdmitsOverItsLimitAndSaysSoBesideAHardRule) {
  Harness h(kSoftBesideHard);
  TestRequest req;
  req.Header("x-api-key", "k1");
  for (int i = 1; i <= 3; ++i) {
    CheckOutcome o = h.Check(req);
    ASSERT_TRUE(o.allowed()) << i;
    EXPECT_FALSE(HasHeader(o, "X-RateLimit-Soft-Exceeded")) << i;
    // Both policies are reported to the client, the soft one with what is left of it.
    EXPECT_NE(FindHeader(o, "RateLimit").find("\"plan-soft\";r=" + std::to_string(3 - i)),
              std::string::npos)
        << FindHeader(o, "RateLimit");
    EXPECT_NE(FindHeader(o, "RateLimit-Policy").find("\"plan-hard\""), std::string::npos);
  }
  for (int i = 4; i <= 5; ++i) {
    CheckOutcome o = h.Check(req);
    ASSERT_TRUE(o.allowed()) << i;
    EXPECT_EQ(FindHeader(o, "X-RateLimit-Soft-Exceeded"), "plan-soft");
    EXPECT_NE(FindHeader(o, "RateLimit").find("\"plan-soft\";r=0"), std::string::npos)
        << FindHeader(o, "RateLimit");
    ASSERT_EQ(o.rules.size(), 2u);
    EXPECT_TRUE(o.rules[0].soft_exceeded());
    EXPECT_TRUE(o.rules[0].shadow);
    EXPECT_FALSE(o.rules[1].soft());
    EXPECT_TRUE(o.rules[1].decision.allowed);
  }
  EXPECT_EQ(Counter(*h.enforcer, "plan-soft", &RuleCounters::soft_exceeded), 2u);
  EXPECT_EQ(Counter(*h.enforcer, "plan-soft", &RuleCounters::shadow_rejected), 0u);
  EXPECT_EQ(Counter(*h.enforcer, "plan-soft", &RuleCounters::rejected), 0u);

  // Over its limit the soft rule charged nothing: a third of a day refills
  // exactly one token of it, and the next request finds it (no debt to repay).
  h.clock.Advance(8h);
  CheckOutcome refilled = h.Check(req);
  ASSERT_TRUE(refilled.allowed());
  EXPECT_FALSE(HasHeader(refilled, "X-RateLimit-Soft-Exceeded"))
      << FindHeader(refilled, "RateLimit");
  CheckOutcome again = h.Check(req);
  ASSERT_TRUE(again.allowed());
  EXPECT_EQ(FindHeader(again, "X-RateLimit-Soft-Exceeded"), "plan-soft");

  // The hard rule refuses at its own limit: 6 a day (+2 refilled in 8 h).
  int admitted = 7;
  CheckOutcome o;
  while ((o = h.Check(req)).allowed() && admitted < 20) ++admitted;
  EXPECT_EQ(admitted, 8);
  EXPECT_EQ(o.http_status, 429);
  ASSERT_GE(o.denied_rule, 0);
  EXPECT_EQ(o.rules[static_cast<size_t>(o.denied_rule)].rule, "plan-hard");
  EXPECT_EQ(Counter(*h.enforcer, "plan-hard", &RuleCounters::rejected), 1u);

  // Another key is untouched.
  TestRequest other;
  other.Header("x-api-key", "k2");
  CheckOutcome fresh = h.Check(other);
  EXPECT_TRUE(fresh.allowed());
  EXPECT_FALSE(HasHeader(fresh, "X-RateLimit-Soft-Exceeded"));
}

TEST(SoftLimit, AnExplicitItemIsSoftToo) {
  Harness h(kSoftBesideHard);
  const ExplicitItem item{.rule = "plan-soft", .key = "k1", .cost = 4};
  Result<CheckOutcome> o = h.enforcer->CheckItems(std::span<const ExplicitItem>(&item, 1));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->allowed());
  EXPECT_EQ(FindHeader(*o, "X-RateLimit-Soft-Exceeded"), "plan-soft");
  EXPECT_EQ(Counter(*h.enforcer, "plan-soft", &RuleCounters::soft_exceeded), 1u);
}

// The shipped example (examples/policies/saas-plan.json, docs/configuration.md's
// recipe): per API key, warned from request 1001 of a day, refused at 1201
// with the hard rule's own texts and Link field.
TEST(SoftLimit, TheSaasPlanExampleWarnsAt1000AndRefusesAt1200) {
  ParsedPolicy p = ParsePolicyFile(testing::SourcePath("examples/policies/saas-plan.json"));
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  Harness h(p.text);
  TestRequest req;
  req.Header("x-api-key", "customer-1");
  int warned = 0;
  int admitted = 0;
  CheckOutcome o;
  while ((o = h.Check(req)).allowed() && admitted < 2000) {
    ++admitted;
    if (HasHeader(o, "X-RateLimit-Soft-Exceeded")) {
      if (warned++ == 0) {
        EXPECT_EQ(admitted, 1001);
      }
      EXPECT_EQ(FindHeader(o, "X-RateLimit-Soft-Exceeded"), "plan-daily-soft");
    }
  }
  EXPECT_EQ(admitted, 1200);
  EXPECT_EQ(warned, 200);
  EXPECT_EQ(o.http_status, 429);
  EXPECT_EQ(FindHeader(o, "Link"), "<https://example.com/pricing>; rel=\"payment\"");
  const nlohmann::json body = nlohmann::json::parse(o.body);
  EXPECT_EQ(body["title"], "Daily plan quota used up");
  EXPECT_EQ(body["detail"], "The plan allows 1200 requests a day; retry in " +
                                std::to_string(o.retry_after_seconds) + " s or upgrade.");
  // A day later the quota is whole again, without a warning.
  h.clock.Advance(24h);
  CheckOutcome next = h.Check(req);
  EXPECT_TRUE(next.allowed());
  EXPECT_FALSE(HasHeader(next, "X-RateLimit-Soft-Exceeded"));
}

constexpr std::string_view kAnswers = R"({"rules": [
  {"name": "deny-bots", "action": "deny", "match": {"header:user-agent": {"prefix": "bot"}},
   "response": {"status": 451, "title": "Unavailable to {rule}"}},
  {"name": "quiet", "limit_keys": ["header:x-api-key"], "match": {"path": {"prefix": "/quiet"}},
   "algorithm": "token_bucket", "algorithm_config": {"count": 1, "period": "1h", "burst": 1},
   "response": {"ratelimit_headers": false}},
  {"name": "plan", "limit_keys": ["header:x-api-key"],
   "algorithm": "token_bucket", "algorithm_config": {"count": 2, "period": "1h", "burst": 2},
   "response": {"status": 403, "headers": [{"name": "X-Upgrade", "value": "https://example.com/plans"}],
                "type": "https://example.com/problems/{rule}", "title": "Plan {rule} used up",
                "detail": "{limit} requests an hour; retry in {retry_after} s"}}]})";

TEST(RuleAnswer, RefusesWithTheRulesStatusHeadersAndBody) {
  EnforcerOptions options;
  options.retry_after_jitter = 0;
  Harness h(kAnswers, options);
  TestRequest req;
  req.Header("x-api-key", "k1");
  ASSERT_TRUE(h.Check(req).allowed());
  CheckOutcome ok = h.Check(req);
  ASSERT_TRUE(ok.allowed());
  EXPECT_FALSE(HasHeader(ok, "X-Upgrade"));  // only on its refusals
  CheckOutcome o = h.Check(req);
  ASSERT_FALSE(o.allowed());
  EXPECT_EQ(o.http_status, 403);
  EXPECT_EQ(FindHeader(o, "X-Upgrade"), "https://example.com/plans");
  EXPECT_EQ(FindHeader(o, "Content-Type"), "application/problem+json");
  EXPECT_EQ(FindHeader(o, "Retry-After"), "1800");  // one of 2 tokens an hour
  EXPECT_TRUE(HasHeader(o, "RateLimit"));
  const nlohmann::json body = nlohmann::json::parse(o.body);
  EXPECT_EQ(body["status"], 403);
  EXPECT_EQ(body["type"], "https://example.com/problems/plan");
  EXPECT_EQ(body["title"], "Plan plan used up");
  EXPECT_EQ(body["detail"], "2 requests an hour; retry in 1800 s");
  EXPECT_EQ(body["retry-after"], 1800);
  EXPECT_EQ(body["violated-policies"], nlohmann::json::array({"plan"}));
}

TEST(RuleAnswer, WithoutRateLimitHeadersRetryAfterStays) {
  Harness h(kAnswers);
  TestRequest req;
  req.Header("x-api-key", "k1").Path("/quiet/a");
  ASSERT_TRUE(h.Check(req).allowed());
  CheckOutcome o = h.Check(req);
  ASSERT_FALSE(o.allowed());
  EXPECT_EQ(o.http_status, 429);
  EXPECT_FALSE(HasHeader(o, "RateLimit"));
  EXPECT_FALSE(HasHeader(o, "RateLimit-Policy"));
  EXPECT_TRUE(HasHeader(o, "Retry-After"));
  const nlohmann::json body = nlohmann::json::parse(o.body);
  EXPECT_EQ(body["status"], 429);
  EXPECT_EQ(body["title"], "Request cannot be satisfied as assigned quota has been exceeded");
}

TEST(RuleAnswer, ADenyRuleAnswersItsStatus) {
  Harness h(kAnswers);
  TestRequest req;
  req.Header("user-agent", "bot/1.0");
  CheckOutcome o = h.Check(req);
  ASSERT_FALSE(o.allowed());
  EXPECT_EQ(o.http_status, 451);
  const nlohmann::json body = nlohmann::json::parse(o.body);
  EXPECT_EQ(body["status"], 451);
  EXPECT_EQ(body["title"], "Unavailable to deny-bots");
  EXPECT_EQ(body["type"], "about:blank");
}

TEST(RuleAnswer, AnExplicitItemOfTheRuleIsAnsweredTheSame) {
  Harness h(kAnswers);
  const ExplicitItem item{.rule = "plan", .key = "k9", .cost = 3};
  Result<CheckOutcome> o = h.enforcer->CheckItems(std::span<const ExplicitItem>(&item, 1));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->allowed());
  EXPECT_EQ(o->http_status, 403);
  EXPECT_EQ(FindHeader(*o, "X-Upgrade"), "https://example.com/plans");
}

}  // namespace
}  // namespace tollgate
