// The Envoy rate limit service through real gRPC on loopback: a client stub
// generated from tollgate's own .proto talks to RlsServer over a socket.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "rls/rls_test_util.h"
#include "testing/scoped_temp_dir.h"

namespace tollgate::rls {
namespace {

using testing::AddDescriptor;
using testing::Request;
using testing::RlsFixture;
using Code = rlspb::RateLimitResponse;

std::string Example(const std::string& name) {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : ".") + "/examples/envoy/ratelimit/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

std::string AllExamples() {
  return Example("databases.yaml") + "\n---\n" + Example("messaging.yaml") + "\n---\n" +
         Example("edge_proxy.yaml") + "\n---\n" + Example("api_tiers.yaml");
}

const char* kSimple = R"(
domain: simple
descriptors:
  - key: fw
    rate_limit: {name: three_a_minute, unit: minute, requests_per_unit: 3, algorithm: fixed_window}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: never
    rate_limit: {unit: hour, requests_per_unit: 0}
)";

TEST(RlsGrpcTest, FixedWindowFieldByField) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  for (uint32_t want_remaining : {2u, 1u, 0u}) {
    Code resp;
    ASSERT_TRUE(f.Call(Request("simple", {{"fw", "client-1"}}), &resp).ok());
    EXPECT_EQ(resp.overall_code(), Code::OK);
    ASSERT_EQ(resp.statuses_size(), 1);
    const auto& st = resp.statuses(0);
    EXPECT_EQ(st.code(), Code::OK);
    ASSERT_TRUE(st.has_current_limit());
    EXPECT_EQ(st.current_limit().requests_per_unit(), 3u);
    EXPECT_EQ(st.current_limit().unit(), Code::RateLimit::MINUTE);
    EXPECT_EQ(st.current_limit().name(), "three_a_minute");
    EXPECT_EQ(st.limit_remaining(), want_remaining);
    ASSERT_TRUE(st.has_duration_until_reset());
    EXPECT_GE(st.duration_until_reset().seconds(), 1);
    EXPECT_LE(st.duration_until_reset().seconds(), 60);
    EXPECT_EQ(st.duration_until_reset().nanos(), 0);
    EXPECT_EQ(resp.response_headers_to_add_size(), 0);
  }
  Code over;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "client-1"}}), &over).ok());
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
  const int64_t reset = over.statuses(0).duration_until_reset().seconds();
  EXPECT_GE(reset, 1);
  EXPECT_LE(reset, 60);
  // Another value is another counter.
  Code other;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "client-2"}}), &other).ok());
  EXPECT_EQ(other.overall_code(), Code::OK);
  // The window resets when duration_until_reset says.
  clock.Advance(std::chrono::seconds(reset));
  Code again;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "client-1"}}), &again).ok());
  EXPECT_EQ(again.overall_code(), Code::OK);
  EXPECT_EQ(again.statuses(0).limit_remaining(), 2u);
}

TEST(RlsGrpcTest, TokenBucketFieldByField) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  for (int i = 0; i < 10; ++i) {
    Code resp;
    ASSERT_TRUE(f.Call(Request("simple", {{"tb", "k"}}), &resp).ok());
    ASSERT_EQ(resp.overall_code(), Code::OK) << i;
    EXPECT_EQ(resp.statuses(0).limit_remaining(), static_cast<uint32_t>(9 - i));
    EXPECT_EQ(resp.statuses(0).current_limit().unit(), Code::RateLimit::SECOND);
    EXPECT_EQ(resp.statuses(0).current_limit().name(), "");
    // Until the bucket is full again: (i + 1) tokens at 10/s, rounded up to seconds.
    EXPECT_EQ(resp.statuses(0).duration_until_reset().seconds(), 1);
  }
  Code over;
  ASSERT_TRUE(f.Call(Request("simple", {{"tb", "k"}}), &over).ok());
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 1);  // 100 ms, rounded up
  clock.Advance(std::chrono::milliseconds(100));
  Code refilled;
  ASSERT_TRUE(f.Call(Request("simple", {{"tb", "k"}}), &refilled).ok());
  EXPECT_EQ(refilled.overall_code(), Code::OK);
  EXPECT_EQ(refilled.statuses(0).limit_remaining(), 0u);
}

TEST(RlsGrpcTest, ZeroRequestsPerUnitDeniesEveryCost) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  Code resp;
  ASSERT_TRUE(f.Call(Request("simple", {{"never", "x"}}), &resp).ok());
  EXPECT_EQ(resp.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 0u);
  EXPECT_GE(resp.statuses(0).duration_until_reset().seconds(), 1);
  EXPECT_LE(resp.statuses(0).duration_until_reset().seconds(), 3600);
  Code check;
  ASSERT_TRUE(f.Call(Request("simple", {{"never", "x"}}, /*hits=*/0), &check).ok());
  EXPECT_EQ(check.overall_code(), Code::OK);
}

// Decisions (calls per rule, not hits) as tollgated's tollgate_decisions_total
// counts them, and the latency of every call that applied a rule.
TEST(RlsGrpcTest, DecisionCountersAndLatency) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  auto rule = [&](const std::string& name) {
    for (const auto& r : f.server().counters().RuleSnapshot()) {
      if (r.rule == name) return r;
    }
    ADD_FAILURE() << "no rule " << name;
    return RuleCountersSnapshot{};
  };
  Code resp;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(f.Call(Request("simple", {{"fw", "d"}}, /*hits=*/2), &resp).ok());
  }
  EXPECT_EQ(resp.overall_code(), Code::OVER_LIMIT);
  // fw (3 a minute) with cost 2: one allowed, then over; deny-all is over too.
  ASSERT_TRUE(f.Call(Request("simple", {{"never", "d"}}), &resp).ok());
  // Both in one call: the deny-all rule rejects; the token bucket, which would
  // have fit, counts nothing (as on HTTP: only the rules that denied count).
  rlspb::RateLimitRequest both = Request("simple", {{"tb", "d"}});
  AddDescriptor(&both, {{"never", "d"}});
  ASSERT_TRUE(f.Call(both, &resp).ok());
  EXPECT_EQ(resp.overall_code(), Code::OVER_LIMIT);
  const auto fw = rule("simple.fw"), never = rule("simple.never"), tb = rule("simple.tb");
  EXPECT_EQ(fw.allowed, 1u);
  EXPECT_EQ(fw.rejected, 3u);
  EXPECT_EQ(fw.total_hits, 8u);  // the hit counters still count the cost
  EXPECT_EQ(never.rejected, 2u);
  EXPECT_EQ(never.allowed, 0u);
  EXPECT_EQ(tb.allowed, 0u);
  EXPECT_EQ(tb.rejected, 0u);
  // Unknown domains and descriptors without a rule decide nothing.
  ASSERT_TRUE(f.Call(Request("nowhere", {{"fw", "d"}}), &resp).ok());
  ASSERT_TRUE(f.Call(Request("simple", {{"unknown_key", "d"}}), &resp).ok());
  const LatencySnapshot l = f.server().counters().Latency();
  uint64_t observed = 0;
  for (uint64_t n : l.buckets) observed += n;
  EXPECT_EQ(observed, 6u);
  // Store calls: the four fw calls and the tb+never one (deny-all alone asks no store).
  EXPECT_EQ(l.store_calls, 5u);
  EXPECT_EQ(l.store_errors, 0u);
}

TEST(RlsGrpcTest, NestedDescriptorsAndAllOrNothing) {
  ManualClock clock;
  RlsCompileOptions upstream;  // exact envoyproxy/ratelimit counters
  upstream.default_algorithm = Algorithm::kFixedWindow;
  RlsFixture f(AllExamples(), &clock, {}, upstream);
  auto req = [] {
    rlspb::RateLimitRequest r;
    r.set_domain("sms");
    AddDescriptor(&r, {{"message_kind", "marketing"}, {"to_number", "+15550100"}});
    AddDescriptor(&r, {{"to_number", "+15550100"}});
    AddDescriptor(&r, {{"message_kind", "marketing"}});  // no rule at that level
    return r;
  };
  for (int i = 0; i < 4; ++i) {
    Code resp;
    ASSERT_TRUE(f.Call(req(), &resp).ok());
    ASSERT_EQ(resp.overall_code(), Code::OK);
    ASSERT_EQ(resp.statuses_size(), 3);
    EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 4u);
    EXPECT_EQ(resp.statuses(0).current_limit().unit(), Code::RateLimit::DAY);
    EXPECT_EQ(resp.statuses(0).limit_remaining(), static_cast<uint32_t>(3 - i));
    EXPECT_EQ(resp.statuses(1).current_limit().requests_per_unit(), 80u);
    EXPECT_EQ(resp.statuses(1).limit_remaining(), static_cast<uint32_t>(79 - i));
    EXPECT_EQ(resp.statuses(2).code(), Code::OK);
    EXPECT_FALSE(resp.statuses(2).has_current_limit());
  }
  Code over;
  ASSERT_TRUE(f.Call(req(), &over).ok());
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(1).code(), Code::OK);
  // The rejected request charged nothing: the per-number counter still has 76.
  EXPECT_EQ(over.statuses(1).limit_remaining(), 76u);
  Code plain;
  ASSERT_TRUE(f.Call(Request("sms", {{"to_number", "+15550100"}}), &plain).ok());
  EXPECT_EQ(plain.overall_code(), Code::OK);
  EXPECT_EQ(plain.statuses(0).limit_remaining(), 75u);
}

TEST(RlsGrpcTest, HitsAddend) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  auto call = [&](rlspb::RateLimitRequest r) {
    Code resp;
    EXPECT_TRUE(f.Call(r, &resp).ok());
    return resp;
  };
  // Absent: 1.
  EXPECT_EQ(call(Request("simple", {{"tb", "h"}})).statuses(0).limit_remaining(), 9u);
  // Request level.
  auto r = Request("simple", {{"tb", "h"}});
  r.set_hits_addend(4);
  EXPECT_EQ(call(r).statuses(0).limit_remaining(), 5u);
  // Descriptor level wins over request level.
  r = Request("simple", {{"tb", "h"}}, /*hits=*/2);
  r.set_hits_addend(4);
  EXPECT_EQ(call(r).statuses(0).limit_remaining(), 3u);
  // Descriptor-level 0 checks only, even with a request-level value.
  r = Request("simple", {{"tb", "h"}}, /*hits=*/0);
  r.set_hits_addend(4);
  Code check = call(r);
  EXPECT_EQ(check.overall_code(), Code::OK);
  EXPECT_EQ(check.statuses(0).limit_remaining(), 3u);
  // Large: over the limit, nothing charged.
  Code big = call(Request("simple", {{"tb", "h"}}, /*hits=*/uint64_t{1} << 50));
  EXPECT_EQ(big.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(big.statuses(0).limit_remaining(), 3u);
  Code huge = call(Request("simple", {{"tb", "h"}}, /*hits=*/INT64_MAX));
  EXPECT_EQ(huge.overall_code(), Code::OVER_LIMIT);
  r = Request("simple", {{"tb", "h"}});
  r.set_hits_addend(UINT32_MAX);
  EXPECT_EQ(call(r).overall_code(), Code::OVER_LIMIT);
  // Exactly the rest fits; then check-only at zero remaining is still OK.
  EXPECT_EQ(call(Request("simple", {{"tb", "h"}}, 3)).overall_code(), Code::OK);
  Code empty = call(Request("simple", {{"tb", "h"}}, 0));
  EXPECT_EQ(empty.overall_code(), Code::OK);
  EXPECT_EQ(empty.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(call(Request("simple", {{"tb", "h"}})).overall_code(), Code::OVER_LIMIT);
}

TEST(RlsGrpcTest, UnknownDomainIsOkWithoutLimits) {
  RlsFixture f(kSimple);
  rlspb::RateLimitRequest r;
  r.set_domain("not-configured");
  AddDescriptor(&r, {{"fw", "x"}});
  AddDescriptor(&r, {{"anything", "y"}});
  Code resp;
  ASSERT_TRUE(f.Call(r, &resp).ok());
  EXPECT_EQ(resp.overall_code(), Code::OK);
  ASSERT_EQ(resp.statuses_size(), 2);
  for (const auto& st : resp.statuses()) {
    EXPECT_EQ(st.code(), Code::OK);
    EXPECT_FALSE(st.has_current_limit());
    EXPECT_EQ(st.limit_remaining(), 0u);
  }
  EXPECT_EQ(f.server().counters().ServiceSnapshot().unknown_domain, 1u);
}

TEST(RlsGrpcTest, InvalidRequestsAreInvalidArgument) {
  RlsFixture f(kSimple);
  Code resp;
  rlspb::RateLimitRequest no_domain = Request("", {{"fw", "x"}});
  EXPECT_EQ(f.Call(no_domain, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  rlspb::RateLimitRequest no_descriptors;
  no_descriptors.set_domain("simple");
  EXPECT_EQ(f.Call(no_descriptors, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  rlspb::RateLimitRequest many;
  many.set_domain("simple");
  for (int i = 0; i < 65; ++i) AddDescriptor(&many, {{"fw", "x"}});
  EXPECT_EQ(f.Call(many, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(f.server().counters().ServiceSnapshot().invalid_request, 3u);
}

TEST(RlsGrpcTest, ShadowModeNeverRejects) {
  ManualClock clock;
  RlsFixture f(AllExamples(), &clock);
  for (int i = 0; i < 5; ++i) {
    Code resp;
    ASSERT_TRUE(f.Call(Request("edge", {{"path", "/login"}}), &resp).ok());
    EXPECT_EQ(resp.overall_code(), Code::OK);
    EXPECT_EQ(resp.statuses(0).code(), Code::OK);
    EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 3u);
  }
  bool found = false;
  for (const auto& r : f.server().counters().RuleSnapshot()) {
    if (r.rule == "edge.path") {
      found = true;
      EXPECT_EQ(r.total_hits, 5u);
      EXPECT_EQ(r.shadow_mode, 2u);
      EXPECT_EQ(r.shadow_rejected, 2u);  // decisions: shadow never allows or rejects
      EXPECT_EQ(r.allowed + r.rejected, 0u);
    }
  }
  EXPECT_TRUE(found);
  // A shadow rule over its limit does not hold back an enforced one.
  rlspb::RateLimitRequest r;
  r.set_domain("edge");
  AddDescriptor(&r, {{"path", "/login"}});
  AddDescriptor(&r, {{"remote_address", "203.0.113.1"}});
  Code resp;
  ASSERT_TRUE(f.Call(r, &resp).ok());
  EXPECT_EQ(resp.overall_code(), Code::OK);
  EXPECT_EQ(resp.statuses(1).limit_remaining(), 19u);
}

TEST(RlsGrpcTest, UnlimitedAndReplaces) {
  ManualClock clock;
  RlsFixture f(AllExamples(), &clock);
  Code unlimited;
  ASSERT_TRUE(f.Call(Request("edge", {{"remote_address", "10.1.1.1"}}), &unlimited).ok());
  EXPECT_EQ(unlimited.overall_code(), Code::OK);
  EXPECT_EQ(unlimited.statuses(0).code(), Code::OK);
  EXPECT_FALSE(unlimited.statuses(0).has_current_limit());
  EXPECT_EQ(unlimited.statuses(0).limit_remaining(), UINT32_MAX);

  auto tiers = [](const std::string& plan) {
    rlspb::RateLimitRequest r;
    r.set_domain("api");
    AddDescriptor(&r, {{"plan", plan}, {"api_key", "key-1"}});
    AddDescriptor(&r, {{"api_key", "key-1"}});
    return r;
  };
  Code enterprise;
  ASSERT_TRUE(f.Call(tiers("enterprise"), &enterprise).ok());
  EXPECT_EQ(enterprise.statuses(0).current_limit().name(), "enterprise_key");
  EXPECT_EQ(enterprise.statuses(0).limit_remaining(), 199u);  // burst 200
  // per_key is replaced: no limit reported, nothing charged.
  EXPECT_FALSE(enterprise.statuses(1).has_current_limit());
  Code free_plan;
  ASSERT_TRUE(f.Call(tiers("free"), &free_plan).ok());
  EXPECT_EQ(free_plan.statuses(0).current_limit().unit(), Code::RateLimit::HOUR);
  EXPECT_EQ(free_plan.statuses(1).current_limit().name(), "per_key");
  // per_key was never charged by the enterprise call.
  EXPECT_EQ(free_plan.statuses(1).limit_remaining(), 59u);
}

TEST(RlsGrpcTest, DescriptorLimitOverride) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  auto r = Request("simple", {{"fw", "o"}});
  r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(2);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::SECOND);
  for (int i = 0; i < 2; ++i) {
    Code resp;
    ASSERT_TRUE(f.Call(r, &resp).ok());
    EXPECT_EQ(resp.overall_code(), Code::OK);
    EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 2u);
    EXPECT_EQ(resp.statuses(0).current_limit().unit(), Code::RateLimit::SECOND);
  }
  Code over;
  ASSERT_TRUE(f.Call(r, &over).ok());
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
  // The configured 3/minute counter of the same value was not touched.
  Code configured;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "o"}}), &configured).ok());
  EXPECT_EQ(configured.statuses(0).limit_remaining(), 2u);
  r.mutable_descriptors(0)->mutable_limit()->set_unit(envoy::type::v3::UNKNOWN);
  EXPECT_EQ(f.Call(r, &over).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(RlsGrpcTest, UntrustedValuesStayInTheirBucket) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  const std::string tricky[] = {"a|b=c", "{tag}", std::string("nul\0byte", 8), "sp ace\r\n",
                                std::string(20000, 'v')};
  for (const auto& v : tricky) {
    rlspb::RateLimitRequest r;
    r.set_domain("simple");
    auto* e = r.add_descriptors()->add_entries();
    e->set_key("fw");
    e->set_value(v);
    Code resp;
    ASSERT_TRUE(f.Call(r, &resp).ok());
    EXPECT_EQ(resp.statuses(0).limit_remaining(), 2u);  // each its own fresh counter
  }
}

TEST(RlsGrpcTest, RateLimitHeaders) {
  ManualClock clock;
  RlsDecideOptions o;
  o.header_styles = {HeaderStyle::kDraft11};
  o.retry_after_jitter = 0;  // Retry-After equals duration_until_reset
  RlsFixture f(kSimple, &clock, o);
  Code ok;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "h"}}), &ok).ok());
  std::map<std::string, std::string> h;
  for (const auto& hv : ok.response_headers_to_add()) h[hv.key()] = hv.value();
  EXPECT_EQ(h["RateLimit-Policy"], "\"three_a_minute\";q=3;w=60");
  EXPECT_EQ(h.count("Retry-After"), 0u);
  EXPECT_EQ(h["RateLimit"].rfind("\"three_a_minute\";r=2;t=", 0), 0u) << h["RateLimit"];
  Code over;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "h"}}, 3), &over).ok());
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
  h.clear();
  for (const auto& hv : over.response_headers_to_add()) h[hv.key()] = hv.value();
  EXPECT_EQ(h.count("Retry-After"), 1u);
  EXPECT_EQ(h["Retry-After"], std::to_string(over.statuses(0).duration_until_reset().seconds()));
}

// Retry-After on OVER_LIMIT by default (no header styles), with jitter: never
// earlier than duration_until_reset, at most (1 + jitter) times it, the same for
// the same descriptor value; the styles' reset equals it; duration_until_reset
// itself stays the bucket's own time.
TEST(RlsGrpcTest, RetryAfterByDefaultWithDeterministicJitter) {
  ManualClock clock;
  RlsDecideOptions plain;  // defaults: no styles, retry_after on, jitter 0.5
  RlsFixture f(kSimple, &clock, plain);
  auto headers = [](const Code& c) {
    std::map<std::string, std::string> h;
    for (const auto& hv : c.response_headers_to_add()) h[hv.key()] = hv.value();
    return h;
  };
  Code ok;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "j"}}), &ok).ok());
  EXPECT_TRUE(headers(ok).empty());  // nothing on OK without styles
  Code over;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "j"}}, 3), &over).ok());
  ASSERT_EQ(over.overall_code(), Code::OVER_LIMIT);
  auto h = headers(over);
  ASSERT_EQ(h.size(), 1u) << over.DebugString();
  const int64_t wait = over.statuses(0).duration_until_reset().seconds();
  const int64_t retry = std::stoll(h["Retry-After"]);
  EXPECT_GE(retry, wait);
  EXPECT_LE(retry, wait + (wait + 1) / 2 + 1);
  Code again;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "j"}}, 3), &again).ok());
  EXPECT_EQ(headers(again)["Retry-After"], h["Retry-After"]);  // same client, same offset

  // Across many clients the jitter spreads the offsets.
  RlsDecideOptions styled;
  styled.header_styles = {HeaderStyle::kDraft11, HeaderStyle::kXRateLimit};
  styled.retry_after_jitter = 1.0;
  RlsFixture g(kSimple, &clock, styled);
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    const std::string v = "c" + std::to_string(i);
    Code c;
    ASSERT_TRUE(g.Call(Request("simple", {{"fw", v}}), &c).ok());
    ASSERT_TRUE(g.Call(Request("simple", {{"fw", v}}, 3), &c).ok());
    ASSERT_EQ(c.overall_code(), Code::OVER_LIMIT);
    auto hh = headers(c);
    // The manual clock is 20 s or more before the minute's end: room to spread.
    ASSERT_GE(c.statuses(0).duration_until_reset().seconds(), 10);
    seen.insert(hh["Retry-After"]);
    EXPECT_EQ(hh["X-RateLimit-Reset"], hh["Retry-After"]) << v;
    EXPECT_NE(hh["RateLimit"].find(";t=" + hh["Retry-After"]), std::string::npos)
        << hh["RateLimit"];
    EXPECT_GE(std::stoll(hh["Retry-After"]), c.statuses(0).duration_until_reset().seconds());
  }
  EXPECT_GT(seen.size(), 3u);

  RlsDecideOptions off;
  off.retry_after = false;
  RlsFixture n(kSimple, &clock, off);
  Code none;
  ASSERT_TRUE(n.Call(Request("simple", {{"fw", "j"}}), &none).ok());
  ASSERT_TRUE(n.Call(Request("simple", {{"fw", "j"}}, 3), &none).ok());
  EXPECT_EQ(none.overall_code(), Code::OVER_LIMIT);
  EXPECT_TRUE(headers(none).empty());
}

TEST(RlsGrpcTest, ReloadSwapsAtomicallyAndKeepsConfigOnError) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  const tollgate::testing::ScopedTempDir dir;
  const std::string file = dir.File("new.yaml");
  {
    std::ofstream out(file);
    out << "domain: simple\ndescriptors:\n  - key: fw\n    rate_limit: {unit: minute, "
           "requests_per_unit: 1}\n";
  }
  EXPECT_TRUE(f.server().ReloadFiles({dir.path()}).empty());
  Code resp;
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "r"}}), &resp).ok());
  EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 1u);
  {
    std::ofstream out(file);
    out << "domain: simple\ndescriptors:\n  - key: fw\n    rate_limit: {unit: lightyear}\n";
  }
  auto errors = f.server().ReloadFiles({file});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].ToString().find("descriptors[0].rate_limit.unit"), std::string::npos);
  ASSERT_TRUE(f.Call(Request("simple", {{"fw", "r2"}}), &resp).ok());
  EXPECT_EQ(resp.statuses(0).current_limit().requests_per_unit(), 1u);  // old config kept
  EXPECT_EQ(f.server().counters().ServiceSnapshot().config_reloads, 1u);
}

class FailingStore final : public Store {
 public:
  Result<BatchDecision> Acquire(std::span<const AcquireItem>) override {
    return ConnectionError("redis 127.0.0.1:1 refused");
  }
  std::string Name() const override { return "failing"; }
};

TEST(RlsGrpcTest, StoreFailureIsUnavailable) {
  FailingStore store;
  auto enforcer = StandaloneEnforcer(&store, &SystemClock::Instance());
  ASSERT_TRUE(enforcer.ok()) << enforcer.status().ToString();
  RlsServerOptions o;
  o.address = "127.0.0.1:0";
  o.enforcer = enforcer->get();
  o.config = testing::CompileOrDie(kSimple);
  auto server = StartRlsServer(o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto channel = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  auto stub = rlspb::RateLimitService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  Code resp;
  grpc::Status st = stub->ShouldRateLimit(&ctx, Request("simple", {{"fw", "x"}}), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("refused"), std::string::npos);
  EXPECT_EQ((*server)->counters().ServiceSnapshot().store_errors, 1u);
  for (const auto& r : (*server)->counters().RuleSnapshot()) {
    EXPECT_EQ(r.unavailable, r.rule == "simple.fw" ? 1u : 0u) << r.rule;
    EXPECT_EQ(r.allowed + r.rejected, 0u) << r.rule;
  }
  // No rule matched: the store is not asked, the answer is OK.
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  st = stub->ShouldRateLimit(&ctx2, Request("simple", {{"unknown_key", "x"}}), &resp);
  EXPECT_TRUE(st.ok());
  EXPECT_EQ((*server)->counters().Latency().store_calls, 1u);
  EXPECT_EQ((*server)->counters().Latency().store_errors, 1u);
  (*server)->Shutdown();
}

TEST(RlsGrpcTest, AddressInUseIsAnError) {
  RlsFixture f(kSimple);
  RlsServerOptions o;
  o.address = f.server().address();
  auto enforcer = StandaloneEnforcer(&f.store(), &SystemClock::Instance());
  ASSERT_TRUE(enforcer.ok()) << enforcer.status().ToString();
  o.enforcer = enforcer->get();
  o.config = f.server().config();
  auto second = StartRlsServer(o);
  EXPECT_FALSE(second.ok());
  o.enforcer = nullptr;
  EXPECT_EQ(StartRlsServer(o).status().code(), StatusCode::kInvalidArgument);
}

// Over-grant on a frozen clock: exactly burst, then exactly rate * elapsed.
TEST(RlsGrpcTest, OverGrantExactOnManualClock) {
  ManualClock clock;
  RlsFixture f(kSimple, &clock);
  auto count_allowed = [&](int n) {
    int allowed = 0;
    for (int i = 0; i < n; ++i) {
      Code resp;
      EXPECT_TRUE(f.Call(Request("simple", {{"tb", "seed"}}), &resp).ok());
      allowed += resp.overall_code() == Code::OK;
    }
    return allowed;
  };
  EXPECT_EQ(count_allowed(25), 10);
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(count_allowed(25), 10);
  clock.Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(count_allowed(25), 5);
}

// The seed benchmark's over-grant check through gRPC on a real clock: burst
// 10, 10/s, many concurrent callers for 1.5 s; allowed <= burst + rate *
// elapsed, with elapsed measured around all the calls. Each caller makes at
// least kMinCalls calls however slow the machine (the run takes longer then).
TEST(RlsGrpcTest, OverGrantConcurrentRealClock) {
  RlsFixture f(kSimple);
  constexpr int kCallers = 8;
  constexpr int kMinCalls = 6;
  std::atomic<int> allowed{0}, calls{0};
  const auto start = std::chrono::steady_clock::now();
  const auto stop_at = start + std::chrono::milliseconds(1500);
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&] {
      auto stub = rlspb::RateLimitService::NewStub(f.NewChannel());
      for (int mine = 0; mine < kMinCalls || std::chrono::steady_clock::now() < stop_at; ++mine) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        Code resp;
        if (!stub->ShouldRateLimit(&ctx, Request("simple", {{"tb", "shared"}}), &resp).ok()) {
          continue;
        }
        calls.fetch_add(1);
        if (resp.overall_code() == Code::OK) allowed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(calls.load(), kCallers * kMinCalls);
  EXPECT_GE(allowed.load(), 10);
  EXPECT_LE(allowed.load(), 10 + static_cast<int>(10 * elapsed))
      << "calls=" << calls.load() << " elapsed=" << elapsed;
}

}  // namespace
}  // namespace tollgate::rls
