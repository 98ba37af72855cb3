// Cost after the response and refunds in the policy layer: the new fields'
// parsers (errors name their path), the example policy, and the Enforcer's
// settlements (estimate, charge into debt, refund exactly once, counters).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/policy_impl.h"
#include "testing/test_paths.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

std::vector<std::string> Errors(std::string_view text) {
  ParsedPolicy p = ParsePolicy(text);
  std::vector<std::string> out;
  for (const auto& e : p.errors) out.push_back(e.ToString());
  EXPECT_EQ(p.policy == nullptr, !p.errors.empty()) << text;
  return out;
}

std::string Rule(const std::string& config, const std::string& extra = "",
                 const std::string& algorithm = "token_bucket") {
  return R"({"rules": [{"name": "r", "limit_keys": ["ip:address"], "algorithm": ")" + algorithm +
         R"(", "algorithm_config": )" + config + extra + "}]}";
}

TEST(SettleParse, ResponseCostSourcesAndTheirFields) {
  ParsedPolicy p = ParsePolicy(Rule(
      R"({"rps": 10, "burst": 100, "cost_source": "response_header:X-LLM-Tokens",
          "cost_estimate": 5, "default_cost": 50, "max_response_cost": 1000})",
      R"(, "refund_on": ["5xx", "429", "timeout", "connect_error", "upstream_error"])"));
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  const tollgate::Rule& r = p.policy->rules[0];
  EXPECT_EQ(r.cost_kind, tollgate::Rule::CostKind::kResponse);
  EXPECT_EQ(r.cost_arg, "x-llm-tokens");  // matched case-insensitively
  EXPECT_EQ(r.cost_estimate, 5);
  EXPECT_EQ(r.default_cost, 50);
  EXPECT_EQ(r.max_response_cost, 1000);
  ASSERT_TRUE(r.refund_on.has_value());
  EXPECT_EQ(r.refund_on->entries.size(), 5u);
  ParsedPolicy h = ParsePolicy(Rule(R"({"rps": 10, "burst": 100, "cost_source": "handler"})"));
  ASSERT_TRUE(h.errors.empty());
  EXPECT_EQ(h.policy->rules[0].cost_kind, tollgate::Rule::CostKind::kHandler);
  EXPECT_EQ(h.policy->rules[0].cost_estimate, 1);
  EXPECT_EQ(h.policy->rules[0].max_response_cost, 100 * kDefaultMaxResponseCostBursts);
}

TEST(SettleParse, ErrorsNameTheirPath) {
  const std::string ac = "rules[0].algorithm_config.";
  EXPECT_EQ(Errors(Rule(R"({"rps": 1, "burst": 5, "cost_source": "response:x-tokens"})")),
            std::vector<std::string>{
                ac + "cost_source: a response cost is \"response_header:<name>\" (got "
                     "\"response:x-tokens\")"});
  EXPECT_EQ(Errors(Rule(R"({"rps": 1, "burst": 5, "cost_source": "response_header:a b"})")),
            std::vector<std::string>{
                ac + "cost_source: the response field must be 1 to 64 characters of A-Z a-z "
                     "0-9 - _ (got \"a b\")"});
  EXPECT_EQ(Errors(Rule(R"({"rps": 1, "burst": 5, "cost_source": "handler", "cost_estimate": 6})")),
            std::vector<std::string>{
                ac + "cost_estimate: must be at most burst (5): it is charged up front, so a "
                     "larger one could never be admitted"});
  EXPECT_EQ(Errors(Rule(R"({"rps": 1, "burst": 5, "cost_estimate": 2})")),
            std::vector<std::string>{
                ac + "cost_estimate: is only used with a cost after the response (cost_source "
                     "\"response_header:<name>\" or \"handler\")"});
  EXPECT_EQ(
      Errors(
          Rule(R"({"rps": 1, "burst": 5, "cost_source": "handler", "max_response_cost": "9"})"))[0],
      ac + "max_response_cost: must be a number (got a string)");
  EXPECT_EQ(Errors(Rule(R"({"burst": 5, "window_seconds": 10, "cost_source": "handler"})", "",
                        "sliding_log"))[0],
            ac + "cost_source: a cost after the response needs token_bucket, leaky_bucket, "
                 "fixed_window (without calendar) or sliding_window");
  EXPECT_EQ(Errors(Rule(R"({"rps": 1, "burst": 5})", R"(, "refund_on": "5xx")"))[0],
            "rules[0].refund_on: must be an array of 1 to 16 outcomes (\"5xx\", \"503\", "
            "\"timeout\", \"connect_error\", \"upstream_error\")");
  EXPECT_EQ(
      Errors(Rule(R"({"rps": 1, "burst": 5})", R"(, "refund_on": ["5xx", 503, "6xx", "5xx"])")),
      (std::vector<std::string>{
          "rules[0].refund_on[1]: must be a string (got a number)",
          "rules[0].refund_on[2]: must be a status class (\"5xx\"), a status (\"503\"), "
          "\"timeout\", \"connect_error\" or \"upstream_error\" (got \"6xx\")",
          "rules[0].refund_on[3]: \"5xx\" is listed twice"}));
}

TEST(SettleParse, ResponseCostsAreStrictIntegers) {
  int64_t v = 0;
  EXPECT_TRUE(ParseResponseCost("1234", &v));
  EXPECT_EQ(v, 1234);
  EXPECT_TRUE(ParseResponseCost(" 7\t", &v));
  EXPECT_EQ(v, 7);
  for (std::string_view bad :
       {"", "-1", "+1", "1.5", "1e3", "0x10", "12 3", "9999999999999999999", "abc", "١٢"}) {
    EXPECT_FALSE(ParseResponseCost(bad, &v)) << bad;
  }
}

class SettleEnforcerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalStoreOptions o;
    o.max_keys = 1024;
    o.clock = &clock_;
    store_ = std::move(*LocalStore::Create(o));
    auto policies = PolicyStore::FromText(R"({"rules": [
      {"name": "tokens", "group": "t", "limit_keys": ["header:x-api-key"],
       "algorithm": "token_bucket",
       "algorithm_config": {"rps": 1, "burst": 10, "cost_source": "response_header:x-tokens",
                            "cost_estimate": 2, "default_cost": 3, "max_response_cost": 40},
       "refund_on": ["5xx", "timeout"]},
      {"name": "requests", "group": "r", "limit_keys": ["header:x-api-key"],
       "algorithm": "fixed_window",
       "algorithm_config": {"burst": 2, "window_seconds": 60}, "refund_on": ["503"]}
    ]})");
    ASSERT_TRUE(policies.ok()) << policies.status().ToString();
    EnforcerOptions eo;
    eo.retry_after_jitter = 0;
    enforcer_ = std::move(*Enforcer::Create(*policies, store_.get(), &clock_, eo));
  }
  CheckOutcome Check(const std::string& key) {
    headers_ = {{"x-api-key", key}};
    RequestView view;
    view.method = "GET";
    view.path = "/";
    view.headers = headers_;
    return enforcer_->Check(view);
  }
  static ResponseOutcome Response(int status, const std::string& tokens) {
    ResponseOutcome r;
    r.status = status;
    if (!tokens.empty()) r.fields.push_back({"x-tokens", tokens});
    return r;
  }
  RuleCounters Counters(const std::string& rule) {
    for (const RuleCounters& c : enforcer_->Counters()) {
      if (c.rule == rule) return c;
    }
    return {};
  }

  ManualClock clock_;
  std::unique_ptr<LocalStore> store_;
  std::unique_ptr<Enforcer> enforcer_;
  std::vector<HeaderPair> headers_;
};

TEST_F(SettleEnforcerTest, ChargesTheReportedCostBeyondTheEstimateIntoDebt) {
  CheckOutcome o = Check("a");
  ASSERT_TRUE(o.allowed());
  ASSERT_NE(o.settlement, nullptr);
  EXPECT_EQ(o.settlement->response_fields(), std::vector<std::string>{"x-tokens"});
  EXPECT_EQ(o.rules[0].cost, 2);  // the estimate, charged up front
  ASSERT_TRUE(enforcer_->Settle(*o.settlement, Response(200, "25")).ok());
  CheckOutcome denied = Check("a");
  ASSERT_FALSE(denied.allowed());
  // 25 tokens against a burst of 10: the estimate of 2 fits after 17 s.
  EXPECT_EQ(denied.retry_after_seconds, 17);
  EXPECT_EQ(Counters("tokens").settled_cost, 23u);
}

TEST_F(SettleEnforcerTest, RefundsExactlyOnceAndCountsByOutcome) {
  CheckOutcome o = Check("b");
  ASSERT_TRUE(o.allowed());
  ASSERT_TRUE(enforcer_->Settle(*o.settlement, Response(503, "9")).ok());
  EXPECT_TRUE(o.settlement->settled());
  // A second settlement does nothing: no second refund, nothing charged.
  ASSERT_TRUE(enforcer_->Settle(*o.settlement, Response(200, "9")).ok());
  const RuleCounters tokens = Counters("tokens"), requests = Counters("requests");
  EXPECT_EQ(tokens.settled_cost, 0u);
  ASSERT_EQ(tokens.refunds.size(), 1u);
  EXPECT_EQ(tokens.refunds[0], (std::pair<std::string, uint64_t>{"5xx", 1}));
  ASSERT_EQ(requests.refunds.size(), 1u);
  EXPECT_EQ(requests.refunds[0], (std::pair<std::string, uint64_t>{"503", 1}));
  // Both charges came back: the window (burst 2) admits two more, then no more.
  EXPECT_TRUE(Check("b").allowed());
  EXPECT_TRUE(Check("b").allowed());
  EXPECT_FALSE(Check("b").allowed());
}

TEST_F(SettleEnforcerTest, MissingBadOrHugeCostsChargeTheDefaultOrTheBound) {
  for (const std::string& bad : {std::string(), std::string("-3"), std::string("ten")}) {
    CheckOutcome o = Check("c" + bad);
    ASSERT_TRUE(o.allowed());
    ASSERT_TRUE(enforcer_->Settle(*o.settlement, Response(200, bad)).ok());
  }
  CheckOutcome huge = Check("huge");
  ASSERT_TRUE(enforcer_->Settle(*huge.settlement, Response(200, "999999999999")).ok());
  const RuleCounters c = Counters("tokens");
  EXPECT_EQ(c.response_cost_invalid, 4u);
  // default_cost 3 (1 beyond the estimate) three times, then the bound of 40.
  EXPECT_EQ(c.settled_cost, 3 * 1 + 38u);
  // An upstream timeout refunds (refund_on "timeout") and is not an invalid cost.
  CheckOutcome t = Check("t");
  ResponseOutcome timeout;
  timeout.kind = ResponseOutcome::Kind::kTimeout;
  ASSERT_TRUE(enforcer_->Settle(*t.settlement, timeout).ok());
  EXPECT_EQ(Counters("tokens").response_cost_invalid, 4u);
}

// A client that left before the response ended, its upstream not finished
// (ResponseOutcome::client_aborted): abort_cost (max_response_cost, 40, here),
// or what a header reported when larger; never counted invalid; a refund by
// status still applies.
TEST_F(SettleEnforcerTest, AClientThatLeftEarlyIsChargedTheAbortCost) {
  for (const std::string& reported : {std::string(), std::string("7"), std::string("ten")}) {
    CheckOutcome o = Check("gone" + reported);
    ASSERT_TRUE(o.allowed());
    ResponseOutcome gone = Response(200, reported);
    gone.client_aborted = true;
    ASSERT_TRUE(enforcer_->Settle(*o.settlement, gone).ok());
  }
  EXPECT_EQ(Counters("tokens").settled_cost, 3 * 38u);
  EXPECT_EQ(Counters("tokens").response_cost_invalid, 0u);
  CheckOutcome refunded = Check("gone503");
  ResponseOutcome gone = Response(503, "");
  gone.client_aborted = true;
  ASSERT_TRUE(enforcer_->Settle(*refunded.settlement, gone).ok());
  EXPECT_EQ(Counters("tokens").settled_cost, 3 * 38u);
  ASSERT_EQ(Counters("tokens").refunds.size(), 1u);
}

TEST(SettleAbortCost, ParsedWithDefaultBoundAndPaths) {
  ParsedPolicy p =
      ParsePolicy(Rule(R"({"rps": 10, "burst": 100, "cost_source": "response_header:x-tokens",
               "max_response_cost": 1000, "abort_cost": 600})"));
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  EXPECT_EQ(p.policy->rules[0].abort_cost, 600);
  ParsedPolicy d = ParsePolicy(
      Rule(R"({"rps": 10, "burst": 100, "cost_source": "handler", "max_response_cost": 1000})"));
  ASSERT_TRUE(d.errors.empty()) << d.errors[0].ToString();
  EXPECT_EQ(d.policy->rules[0].abort_cost, 1000);  // max_response_cost by default
  ParsedPolicy b = ParsePolicy(Rule(R"({"rps": 10, "burst": 100, "cost_source": "handler"})"));
  ASSERT_TRUE(b.errors.empty()) << b.errors[0].ToString();
  EXPECT_EQ(b.policy->rules[0].abort_cost, 100 * kDefaultMaxResponseCostBursts);

  const std::string ac = "rules[0].algorithm_config.";
  EXPECT_EQ(Errors(Rule(R"({"rps": 1, "burst": 5, "cost_source": "handler",
                             "max_response_cost": 50, "abort_cost": 51})")),
            std::vector<std::string>{ac + "abort_cost: must be at most max_response_cost (50)"});
  EXPECT_EQ(Errors(Rule(R"({"rps": 1, "burst": 5, "abort_cost": 2})")),
            std::vector<std::string>{
                ac + "abort_cost: is only used with a cost after the response (cost_source "
                     "\"response_header:<name>\" or \"handler\")"});
  EXPECT_EQ(
      Errors(Rule(R"({"rps": 1, "burst": 5, "cost_source": "handler", "abort_cost": "9"})"))[0],
      ac + "abort_cost: must be a number (got a string)");
  EXPECT_EQ(
      Errors(Rule(R"({"rps": 1, "burst": 5, "cost_source": "handler", "abort_cost": 0})")).size(),
      1u);
}

TEST(SettleExample, LlmTokensPolicyLoads) {
  ParsedPolicy p =
      ParsePolicyFile(tollgate::testing::SourcePathOf("examples/policies/llm-tokens.json"));
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  ASSERT_EQ(p.policy->rules.size(), 2u);
  EXPECT_EQ(p.policy->rules[0].cost_kind, tollgate::Rule::CostKind::kResponse);
  EXPECT_EQ(p.policy->rules[0].cost_arg, "x-llm-tokens");
  EXPECT_TRUE(p.policy->rules[1].refund_on.has_value());
}

}  // namespace
}  // namespace tollgate
