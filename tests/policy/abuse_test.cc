// Abuse protection in the policy layer (issue 34): "count_on" and
// "block_for" parse with errors naming their path; the Enforcer on a
// LocalStore with a ManualClock counts only the chosen outcomes (the others'
// charge is given back by the settlement) and keeps a penalty box exactly
// block_for long, synchronously and asynchronously, closing it once however
// many refusals race.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "policy/policy_impl.h"
#include "tollgate/local_store.h"
#include "tollgate/policy.h"

namespace tollgate {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> Errors(std::string_view text) {
  ParsedPolicy p = ParsePolicy(text);
  std::vector<std::string> out;
  for (const auto& e : p.errors) out.push_back(e.ToString());
  EXPECT_EQ(p.policy == nullptr, !p.errors.empty()) << text;
  return out;
}

std::string Rule(const std::string& extra, const std::string& config = R"({"rps": 1, "burst": 5})",
                 const std::string& algorithm = "token_bucket") {
  return R"({"rules": [{"name": "r", "limit_keys": ["ip:address"], "algorithm": ")" + algorithm +
         R"(", "algorithm_config": )" + config + extra + "}]}";
}

TEST(AbuseParse, FieldsAreRead) {
  ParsedPolicy p = ParsePolicy(Rule(R"(, "count_on": ["401", "4xx"], "block_for": "15m")"));
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].ToString();
  const tollgate::Rule& r = p.policy->rules[0];
  ASSERT_TRUE(r.count_on.has_value());
  EXPECT_EQ(r.count_on->entries.size(), 2u);
  EXPECT_EQ(r.block_for, Nanos(15LL * 60 * 1'000'000'000));
  ASSERT_TRUE(r.block_limit.has_value());
  EXPECT_EQ(r.block_limit->burst(), 1);
  EXPECT_TRUE(r.SettlesAfterResponse());
  // Shown in the rule's summary, so a policy diff shows a change of them.
  const std::string d = SummarizePolicy(*p.policy)[0].description;
  EXPECT_NE(d.find(" count_on=401,4xx block_for=15m"), std::string::npos) << d;
  ParsedPolicy without = ParsePolicy(Rule(""));
  ASSERT_TRUE(without.errors.empty());
  const std::vector<RuleChange> changes = DiffPolicies(*without.policy, *p.policy);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, RuleChange::Kind::kChanged);
}

TEST(AbuseParse, ErrorsNameTheirPath) {
  EXPECT_EQ(Errors(Rule(R"(, "count_on": "401")")),
            std::vector<std::string>{
                "rules[0].count_on: must be an array of 1 to 16 outcomes (\"5xx\", \"503\", "
                "\"timeout\", \"connect_error\", \"upstream_error\")"});
  EXPECT_EQ(Errors(Rule(R"(, "count_on": ["401", "6xx"])")),
            std::vector<std::string>{
                "rules[0].count_on[1]: must be a status class (\"5xx\"), a status (\"503\"), "
                "\"timeout\", \"connect_error\" or \"upstream_error\" (got \"6xx\")"});
  EXPECT_EQ(Errors(Rule(R"(, "count_on": ["401"], "refund_on": ["5xx"])")),
            std::vector<std::string>{"rules[0].count_on: cannot be used with refund_on "
                                     "(count_on already gives back every other outcome)"});
  EXPECT_EQ(Errors(Rule(R"(, "count_on": ["401"])",
                        R"({"rps": 1, "burst": 5, "cost_source": "response_header:x-cost"})")),
            std::vector<std::string>{"rules[0].count_on: cannot be used with a cost after the "
                                     "response (the cost is settled already; use refund_on)"});
  EXPECT_EQ(Errors(Rule(R"(, "count_on": ["401"])", R"({"burst": 5, "window_seconds": 10})",
                        "sliding_log")),
            std::vector<std::string>{
                "rules[0].count_on: needs token_bucket, leaky_bucket, fixed_window (without "
                "calendar) or sliding_window (the outcomes it does not count are refunded)"});
  EXPECT_EQ(Errors(Rule(R"(, "block_for": 900)")),
            std::vector<std::string>{
                "rules[0].block_for: must be a period string like \"15m\" (got a number)"});
  EXPECT_EQ(Errors(Rule(R"(, "block_for": "500ms")")),
            std::vector<std::string>{"rules[0].block_for: must be at least 1s (got \"500ms\")"});
  EXPECT_EQ(Errors(Rule(R"(, "block_for": "15x")")).size(), 1u);
  EXPECT_EQ(Errors(Rule(R"(, "block_for": "15x")"))[0].rfind("rules[0].block_for: ", 0), 0u);
  EXPECT_EQ(Errors(R"({"rules": [{"name": "a", "action": "allow", "block_for": "1m",
                                  "count_on": ["401"]}]})"),
            (std::vector<std::string>{"rules[0].count_on: is only used by limit rules",
                                      "rules[0].block_for: is only used by limit rules"}));
  EXPECT_EQ(Errors(Rule(R"(, "block_for": "1m")", R"({"max_in_flight": 2, "lease": "30s"})",
                        "concurrency")),
            std::vector<std::string>{"rules[0].block_for: is not used by a concurrency rule (it "
                                     "holds leases, not tokens)"});
}

// Login protection: at most 3 failed logins (401) per user (a token back
// every 10 s), then the user is blocked for 60 s; successful logins never count.
constexpr std::string_view kLoginPolicy = R"({"rules": [
  {"name": "login", "limit_keys": ["header:x-user"], "algorithm": "token_bucket",
   "algorithm_config": {"count": 3, "period": "30s", "burst": 3},
   "count_on": ["401"], "block_for": "60s"}
]})";

class AbuseEnforcerTest : public ::testing::Test {
 protected:
  void SetUp() override { Load(kLoginPolicy); }
  void Load(std::string_view policy) {
    enforcer_.reset();
    LocalStoreOptions o;
    o.max_keys = 1024;
    o.clock = &clock_;
    store_ = std::move(*LocalStore::Create(o));
    auto policies = PolicyStore::FromText(policy);
    ASSERT_TRUE(policies.ok()) << policies.status().ToString();
    EnforcerOptions eo;
    eo.retry_after_jitter = 0.5;  // a block's Retry-After is never jittered
    enforcer_ = std::move(*Enforcer::Create(*policies, store_.get(), &clock_, eo));
  }
  RequestView View(const std::string& user) {
    headers_ = {{"x-user", user}};
    RequestView view;
    view.method = "POST";
    view.path = "/login";
    view.headers = headers_;
    return view;
  }
  CheckOutcome Check(const std::string& user) { return enforcer_->Check(View(user)); }
  CheckOutcome CheckAsync(const std::string& user) {
    std::optional<CheckOutcome> got;
    enforcer_->CheckAsync(View(user), [&](CheckOutcome o) { got = std::move(o); });
    EXPECT_TRUE(got.has_value());  // the local store answers inline
    return got ? std::move(*got) : CheckOutcome{};
  }
  // One login attempt answered `status` by the upstream (settled), or refused.
  bool Attempt(const std::string& user, int status) {
    CheckOutcome o = Check(user);
    if (!o.allowed()) return false;
    EXPECT_NE(o.settlement, nullptr);
    ResponseOutcome r;
    r.status = status;
    EXPECT_TRUE(enforcer_->Settle(*o.settlement, r).ok());
    return true;
  }
  RuleCounters Counters() {
    for (const RuleCounters& c : enforcer_->Counters()) {
      if (c.rule == "login") return c;
    }
    return {};
  }
  static std::string Header(const CheckOutcome& o, std::string_view name) {
    for (const HeaderField& h : o.headers) {
      if (h.name == name) return h.value;
    }
    return "";
  }

  ManualClock clock_;
  std::unique_ptr<LocalStore> store_;
  std::unique_ptr<Enforcer> enforcer_;
  std::vector<HeaderPair> headers_;
};

TEST_F(AbuseEnforcerTest, OnlyCountedOutcomesKeepTheirCharge) {
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Attempt("alice", 200)) << i;  // never counted
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("alice", 401)) << i;
  EXPECT_FALSE(Check("alice").allowed());  // three failures: the fourth attempt is refused
  EXPECT_TRUE(Attempt("bob", 401));        // another user is untouched
  const RuleCounters c = Counters();
  ASSERT_EQ(c.refunds.size(), 1u);
  EXPECT_EQ(c.refunds[0], (std::pair<std::string, uint64_t>{"not_counted", 20}));
}

TEST_F(AbuseEnforcerTest, ARefusalBlocksTheKeyForExactlyBlockFor) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("alice", 401)) << i;
  CheckOutcome first = Check("alice");  // refused by the rule: closes the box
  ASSERT_FALSE(first.allowed());
  EXPECT_EQ(first.retry_after_seconds, 60);
  EXPECT_EQ(Header(first, "X-RateLimit-Reason"), "token_bucket_exceeded; policy=\"login\"");
  // The bucket is full again after 30 s; the block holds regardless: 59.999 s
  // later still refused, with Retry-After to the block's end.
  clock_.Advance(59'999ms);
  CheckOutcome blocked = Check("alice");
  ASSERT_FALSE(blocked.allowed());
  EXPECT_EQ(blocked.http_status, 429);
  EXPECT_EQ(blocked.retry_after_seconds, 1);
  EXPECT_EQ(Header(blocked, "X-RateLimit-Reason"), "blocked; policy=\"login\"");
  EXPECT_NE(blocked.body.find("blocked by policy 'login' (block_for 1m)"), std::string::npos)
      << blocked.body;
  EXPECT_EQ(Counters().blocked, 1u);
  EXPECT_EQ(Counters().rejected, 1u);
  // Out of the box, the full bucket admits three failures again; the
  // refusal after them opens a new block of 60 s.
  clock_.Advance(1ms);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("alice", 401)) << i;
  CheckOutcome again = Check("alice");
  ASSERT_FALSE(again.allowed());
  EXPECT_EQ(again.retry_after_seconds, 60);
  clock_.Advance(30s);
  EXPECT_EQ(Check("alice").retry_after_seconds, 30);
}

TEST_F(AbuseEnforcerTest, ABlockedRequestChargesNothing) {
  // A token every 10 s, blocked for 60 s: the bucket is full again long
  // before the block ends, and the blocked requests must not drain it.
  Load(R"({"rules": [
    {"name": "login", "limit_keys": ["header:x-user"], "algorithm": "token_bucket",
     "algorithm_config": {"count": 3, "period": "30s", "burst": 3},
     "count_on": ["401"], "block_for": "60s"}
  ]})");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("alice", 401)) << i;
  ASSERT_FALSE(Check("alice").allowed());  // closes the box
  clock_.Advance(30s);                     // the bucket is full again, the box closed
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(Attempt("alice", 401)) << i;
  EXPECT_EQ(Counters().blocked, 100u);
  clock_.Advance(30s);  // the box opens: the bucket holds its 3 tokens
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("alice", 401)) << i;
  EXPECT_FALSE(Check("alice").allowed());
}

TEST_F(AbuseEnforcerTest, AsyncChecksBlockTheSameWay) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("carol", 401)) << i;
  CheckOutcome first = CheckAsync("carol");
  ASSERT_FALSE(first.allowed());
  EXPECT_EQ(first.retry_after_seconds, 60);
  clock_.Advance(10s);
  CheckOutcome blocked = CheckAsync("carol");
  ASSERT_FALSE(blocked.allowed());
  EXPECT_EQ(blocked.retry_after_seconds, 50);
  EXPECT_EQ(Header(blocked, "X-RateLimit-Reason"), "blocked; policy=\"login\"");
}

TEST_F(AbuseEnforcerTest, ExplainShowsTheBlockAndChargesNothing) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("dave", 401)) << i;
  ASSERT_FALSE(Check("dave").allowed());
  CheckOutcome e = enforcer_->Explain(View("dave"));
  EXPECT_EQ(e.verdict, CheckOutcome::Verdict::kReject);
  bool found = false;
  for (const std::string& line : e.trace) {
    found = found || line.find("login: key blocked for 60000 ms more") != std::string::npos;
  }
  EXPECT_TRUE(found) << ::testing::PrintToString(e.trace);
  EXPECT_EQ(Counters().blocked, 0u);  // explain counts nothing
}

// Refusals racing to close the box close it once: the block lasts block_for
// from the first, never longer.
TEST_F(AbuseEnforcerTest, ConcurrentRefusalsCloseTheBoxOnce) {
  Load(R"({"rules": [
    {"name": "login", "limit_keys": ["header:x-user"], "algorithm": "token_bucket",
     "algorithm_config": {"count": 3, "period": "3000s", "burst": 3},
     "count_on": ["401"], "block_for": "60s"}
  ]})");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Attempt("erin", 401)) << i;
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      std::vector<HeaderPair> headers = {{"x-user", "erin"}};
      RequestView view;
      view.method = "POST";
      view.path = "/login";
      view.headers = headers;
      for (int i = 0; i < 50; ++i) {
        if (!enforcer_->Check(view).allowed()) refused.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(refused.load(), 400);
  // Exactly block_for after the (frozen) clock's first refusal the box is
  // open (had each refusal extended it, it would still be closed); the
  // bucket, a token per 1000 s, is still empty: refused by the rule.
  clock_.Advance(60s);
  CheckOutcome o = Check("erin");
  EXPECT_FALSE(o.allowed());  // the box is open, but the bucket is still empty
  EXPECT_EQ(Header(o, "X-RateLimit-Reason"), "token_bucket_exceeded; policy=\"login\"");
}

}  // namespace
}  // namespace tollgate
