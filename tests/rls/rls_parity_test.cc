// envoyproxy/ratelimit parity through real gRPC on loopback (docs/envoy.md,
// "Parity with envoyproxy/ratelimit"): the newer descriptor keys (quota_mode,
// share_threshold, metadata, value_to_metric), wildcards anywhere in a value,
// limit overrides keyed by the override, shadow resets, and every unit's reset.
#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "rls/rls_scenarios.h"
#include "rls/rls_test_util.h"

namespace tollgate::rls {
namespace {

using testing::AddDescriptor;
using testing::Request;
using testing::RlsFixture;
using Code = rlspb::RateLimitResponse;
using std::chrono::seconds;

Code CallOk(RlsFixture& f, const rlspb::RateLimitRequest& r) {
  Code resp;
  const grpc::Status st = f.Call(r, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp;
}

int64_t Reset(const Code& resp, int i) {
  EXPECT_EQ(resp.statuses(i).duration_until_reset().nanos(), 0);
  return resp.statuses(i).duration_until_reset().seconds();
}

const char* kWildcards = R"(
domain: wild
descriptors:
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: foo*bar*baz
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: host
    value: "*.example.com"
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: path
    value: /exact
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 9}
)";

uint32_t LimitOf(RlsFixture& f, const std::string& key, const std::string& value) {
  const Code resp = CallOk(f, Request("wild", {{key, value}}));
  return resp.statuses(0).current_limit().requests_per_unit();
}

TEST(RlsParityTest, WildcardsAnywhereInAValue) {
  ManualClock clock;
  RlsFixture f(kWildcards, &clock);
  EXPECT_EQ(LimitOf(f, "path", "/api/v1/action"), 2u);
  EXPECT_EQ(LimitOf(f, "path", "/api//action"), 2u);  // `*` matches the empty run
  EXPECT_EQ(LimitOf(f, "path", "/api/v1/actions"), 9u);
  EXPECT_EQ(LimitOf(f, "path", "/api/v1/other"), 9u);
  EXPECT_EQ(LimitOf(f, "path", "foobarbaz"), 3u);
  EXPECT_EQ(LimitOf(f, "path", "foo-bar-bar-baz"), 3u);
  EXPECT_EQ(LimitOf(f, "path", "foo-baz-bar"), 9u);  // pieces in order only
  EXPECT_EQ(LimitOf(f, "host", "a.example.com"), 4u);
  EXPECT_EQ(LimitOf(f, "host", "example.com"), 0u);  // no key-only rule for host
  EXPECT_EQ(LimitOf(f, "path", "/exact"), 5u);       // an exact value beats the patterns
}

TEST(RlsParityTest, WildcardValuesCountApartUnlessShareThreshold) {
  ManualClock clock;
  RlsFixture f(kWildcards, &clock);
  // Without share_threshold every matching value has its own counter.
  for (const char* v : {"/api/a/action", "/api/b/action"}) {
    EXPECT_EQ(CallOk(f, Request("wild", {{"path", v}})).statuses(0).limit_remaining(), 1u) << v;
  }
  // With it, every value under /files/* counts against the pattern's one counter.
  EXPECT_EQ(CallOk(f, Request("wild", {{"path", "/files/a.pdf"}})).statuses(0).limit_remaining(),
            1u);
  EXPECT_EQ(CallOk(f, Request("wild", {{"path", "/files/b.csv"}})).statuses(0).limit_remaining(),
            0u);
  const Code over = CallOk(f, Request("wild", {{"path", "/files/c.txt"}}));
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
}

// A hostile pattern and value take no time worth measuring: the matcher never
// backtracks (rls_wildcard.h), so this finishes whatever the machine's load.
TEST(RlsParityTest, PathologicalWildcardsAreLinear) {
  std::string pattern;
  for (int i = 0; i < 200; ++i) pattern += "a*";
  pattern += "b";
  const std::string yaml = "domain: evil\ndescriptors:\n  - key: k\n    value: \"" + pattern +
                           "\"\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
  ManualClock clock;
  RlsFixture f(yaml, &clock);
  const Code miss = CallOk(f, Request("evil", {{"k", std::string(100000, 'a')}}));
  EXPECT_FALSE(miss.statuses(0).has_current_limit());
  const Code hit = CallOk(f, Request("evil", {{"k", std::string(100000, 'a') + "b"}}));
  EXPECT_TRUE(hit.statuses(0).has_current_limit());
}

TEST(RlsParityTest, OverrideThatChangesTheLimitGetsItsOwnBucket) {
  ManualClock clock;
  RlsFixture f("domain: o\ndescriptors:\n  - key: user\n", &clock);
  auto with = [](uint32_t rpu, envoy::type::v3::RateLimitUnit unit) {
    auto r = Request("o", {{"user", "u1"}});
    r.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(rpu);
    r.mutable_descriptors(0)->mutable_limit()->set_unit(unit);
    return r;
  };
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(CallOk(f, with(10, envoy::type::v3::DAY)).overall_code(), Code::OK) << i;
  }
  EXPECT_EQ(CallOk(f, with(10, envoy::type::v3::DAY)).overall_code(), Code::OVER_LIMIT);
  // 42/HOUR is another limit: a fresh bucket, not 10/DAY's empty one.
  const Code hour = CallOk(f, with(42, envoy::type::v3::HOUR));
  EXPECT_EQ(hour.overall_code(), Code::OK);
  EXPECT_EQ(hour.statuses(0).limit_remaining(), 41u);
  EXPECT_EQ(hour.statuses(0).current_limit().requests_per_unit(), 42u);
  EXPECT_EQ(Reset(hour, 0), 3600 / 42 + 1);  // one token back: ceil(85.71 s)
  // And going back to 10/DAY finds that bucket as it was left.
  EXPECT_EQ(CallOk(f, with(10, envoy::type::v3::DAY)).overall_code(), Code::OVER_LIMIT);
  // Same count, other unit: also its own bucket.
  EXPECT_EQ(CallOk(f, with(10, envoy::type::v3::MINUTE)).statuses(0).limit_remaining(), 9u);
}

const char* kShadow = R"(
domain: sh
descriptors:
  - key: enforced
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: shadow_tb
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 6}
  - key: shadow_fw
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 6, algorithm: fixed_window}
  - key: never
    rate_limit: {unit: minute, requests_per_unit: 0}
)";

// [enforced, shadow_tb, shadow_fw], all with `value`.
rlspb::RateLimitRequest ShadowRequest(const std::string& value) {
  rlspb::RateLimitRequest r;
  r.set_domain("sh");
  AddDescriptor(&r, {{"enforced", value}});
  AddDescriptor(&r, {{"shadow_tb", value}});
  AddDescriptor(&r, {{"shadow_fw", value}});
  return r;
}

TEST(RlsParityTest, ShadowDescriptorReportsItsResetWhenAnotherRejects) {
  ManualClock clock;
  RlsFixture f(kShadow, &clock);
  const auto r = ShadowRequest("x");
  const Code first = CallOk(f, r);
  ASSERT_EQ(first.overall_code(), Code::OK);
  EXPECT_EQ(Reset(first, 1), 10);  // one of 6 a minute refills in 10 s
  const int64_t window_left = Reset(first, 2);
  EXPECT_GT(window_left, 0);
  EXPECT_LE(window_left, 60);
  clock.Advance(seconds(2));
  const Code second = CallOk(f, r);
  ASSERT_EQ(second.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(second.statuses(0).code(), Code::OVER_LIMIT);
  EXPECT_EQ(Reset(second, 0), 58);
  // Nothing was charged, so the shadow buckets are where the first call left
  // them: 8 s until the token bucket is full, the window's end 2 s closer.
  EXPECT_EQ(second.statuses(1).code(), Code::OK);
  EXPECT_EQ(second.statuses(1).limit_remaining(), 5u);
  EXPECT_EQ(Reset(second, 1), 8);
  EXPECT_EQ(second.statuses(2).code(), Code::OK);
  EXPECT_EQ(second.statuses(2).limit_remaining(), 5u);
  EXPECT_EQ(Reset(second, 2), window_left - 2);
}

// The shadow buckets were never charged: a fixed window still reports the end
// of its window (as envoyproxy/ratelimit, whose counters are windows), a full
// token bucket is full now (0 s).
TEST(RlsParityTest, FreshShadowDescriptorReportsItsWindowWhenAnotherRejects) {
  ManualClock clock;
  RlsFixture f(kShadow, &clock);
  CallOk(f, Request("sh", {{"enforced", "y"}}));
  const Code resp = CallOk(f, ShadowRequest("y"));
  ASSERT_EQ(resp.overall_code(), Code::OVER_LIMIT);
  const int64_t wall_s = clock.WallNow() / 1'000'000'000;
  EXPECT_EQ(resp.statuses(1).limit_remaining(), 6u);
  EXPECT_EQ(Reset(resp, 1), 0);
  EXPECT_EQ(resp.statuses(2).limit_remaining(), 6u);
  EXPECT_EQ(Reset(resp, 2), 60 - wall_s % 60);
}

// A deny-all rule rejects without the store, so the other descriptors are only
// peeked (cost 0): a shadow descriptor over its own limit still reports when
// its cost would fit again, not the 0 s a cost-0 peek waits.
TEST(RlsParityTest, ShadowOverItsLimitReportsItsWaitWhenDenyAllRejects) {
  ManualClock clock;
  RlsFixture f(kShadow, &clock);
  for (int i = 0; i < 6; ++i) CallOk(f, Request("sh", {{"shadow_tb", "z"}}));
  rlspb::RateLimitRequest r;
  r.set_domain("sh");
  AddDescriptor(&r, {{"never", "z"}});
  AddDescriptor(&r, {{"shadow_tb", "z"}});
  const Code resp = CallOk(f, r);
  ASSERT_EQ(resp.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(resp.statuses(1).code(), Code::OK);
  EXPECT_EQ(resp.statuses(1).limit_remaining(), 0u);
  EXPECT_EQ(Reset(resp, 1), 10);  // one token of 6/minute
}

// Upstream's quota-mode tests (rls_scenarios.h), on the local store.
class RlsQuotaModeTest : public ::testing::Test {
 protected:
  quota_scenarios::Call Caller() {
    return [this](const rlspb::RateLimitRequest& r) { return CallOk(f_, r); };
  }
  ManualClock clock_;
  RlsFixture f_{quota_scenarios::kQuotaYaml, &clock_};
};

TEST_F(RlsQuotaModeTest, TestServicePerDescriptorQuotaMode) {
  quota_scenarios::PerDescriptorQuotaMode(Caller());
}
TEST_F(RlsQuotaModeTest, TestServiceMixedPerDescriptorModes) {
  quota_scenarios::MixedPerDescriptorModes(Caller());
}
TEST_F(RlsQuotaModeTest, TestServiceQuotaModeOnlyAllOverTheLimit) {
  quota_scenarios::QuotaModeOnlyAllOverTheLimit(Caller());
}
TEST_F(RlsQuotaModeTest, TestServiceQuotaModeOnlySomeOverTheLimit) {
  quota_scenarios::QuotaModeOnlySomeOverTheLimit(Caller());
}

// Stream-end charges (charge_only), on the local store.
TEST(RlsStreamEndTest, ChargeOnlyDescriptorsChargeIntoDebtAndNeverRefuse) {
  ManualClock clock;
  RlsFixture f(quota_scenarios::kStreamEndYaml, &clock);
  quota_scenarios::StreamEndCharges([&](const rlspb::RateLimitRequest& r) { return CallOk(f, r); },
                                    [&](int64_t s) { clock.Advance(std::chrono::seconds(s)); });
}

// A quota-mode rule that allows nothing (requests_per_unit: 0) is always
// over: alone it rejects; beside a quota rule within its limit it does not.
TEST(RlsParityTest, DenyAllQuotaDescriptorsCountAsOver) {
  ManualClock clock;
  RlsFixture f(std::string(quota_scenarios::kQuotaYaml) + R"(
  - key: closed
    value: limit
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
)",
               &clock);
  const Code alone = CallOk(f, quota_scenarios::Keys({"closed"}));
  EXPECT_EQ(alone.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(alone.statuses(0).code(), Code::OVER_LIMIT);
  const Code with_open = CallOk(f, quota_scenarios::Keys({"closed", "quota"}));
  EXPECT_EQ(with_open.overall_code(), Code::OK);
  EXPECT_EQ(with_open.statuses(0).code(), Code::OVER_LIMIT);
  EXPECT_EQ(with_open.statuses(1).code(), Code::OK);
}

RlsDecideOptions WithMetadata() {
  RlsDecideOptions o;
  o.response_metadata = true;
  return o;
}

TEST(RlsParityTest, MetadataIsSentWhileWithinTheLimit) {
  ManualClock clock;
  RlsFixture f(R"(
domain: md
descriptors:
  - key: backend
    value: primary
    metadata: {service: primary-svc, weight: 3, canary: false, tags: [a, "7"]}
    value_to_metric: true
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1}
)",
               &clock, WithMetadata());
  const Code ok = CallOk(f, Request("md", {{"backend", "primary"}}));
  const auto& fields = ok.dynamic_metadata().fields().at("metadata").struct_value().fields();
  EXPECT_EQ(fields.at("service").string_value(), "primary-svc");
  EXPECT_EQ(fields.at("weight").number_value(), 3);
  EXPECT_FALSE(fields.at("canary").bool_value());
  ASSERT_EQ(fields.at("tags").list_value().values_size(), 2);
  EXPECT_EQ(fields.at("tags").list_value().values(1).string_value(), "7");  // quoted: a string
  const Code over = CallOk(f, Request("md", {{"backend", "primary"}}));
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.dynamic_metadata().fields().count("metadata"), 0u);
  EXPECT_EQ(over.dynamic_metadata().fields().at("domain").string_value(), "md");
}

// Upstream's RESPONSE_DYNAMIC_METADATA is off by default: no dynamic_metadata
// at all, with quota mode and `metadata` configured.
TEST(RlsParityTest, NoDynamicMetadataUnlessResponseMetadataIsOn) {
  ManualClock clock;
  const std::string yaml = std::string(quota_scenarios::kQuotaYaml) + R"(
  - key: tagged
    value: limit
    metadata: {name: service_1}
    rate_limit: {unit: minute, requests_per_unit: 5}
)";
  RlsFixture off(yaml, &clock);
  const Code r = CallOk(off, quota_scenarios::Keys({"tagged", "quota"}));
  EXPECT_EQ(r.overall_code(), Code::OK);
  EXPECT_FALSE(r.has_dynamic_metadata());
  RlsFixture on(yaml, &clock, WithMetadata());
  EXPECT_TRUE(CallOk(on, quota_scenarios::Keys({"tagged", "quota"})).has_dynamic_metadata());
}

// Upstream's ratelimitToMetadata shape, field by field.
TEST(RlsParityTest, DynamicMetadataHasUpstreamsShape) {
  ManualClock clock;
  RlsFixture f(quota_scenarios::kQuotaYaml, &clock, WithMetadata());
  rlspb::RateLimitRequest r = quota_scenarios::Keys({"regular"});
  r.set_hits_addend(2);
  AddDescriptor(&r, {{"quota", "limit"}, {"x", "y"}}, 3);
  auto* limited = r.add_descriptors();
  auto* e = limited->add_entries();
  e->set_key("regular");
  e->set_value("limit");
  limited->mutable_limit()->set_requests_per_unit(42);
  limited->mutable_limit()->set_unit(envoy::type::v3::HOUR);
  const Code resp = CallOk(f, r);
  const auto& m = resp.dynamic_metadata().fields();
  EXPECT_EQ(m.at("domain").string_value(), "quota-domain");
  EXPECT_EQ(m.at("hitsAddend").number_value(), 2);
  EXPECT_EQ(m.count("metadata"), 0u);  // no rule carries `metadata`
  const auto& d = m.at("descriptors").list_value();
  ASSERT_EQ(d.values_size(), 3);
  const auto& d1 = d.values(1).struct_value().fields();
  ASSERT_EQ(d1.at("entries").list_value().values_size(), 2);
  EXPECT_EQ(d1.at("entries").list_value().values(0).string_value(), "quota=limit");
  EXPECT_EQ(d1.at("entries").list_value().values(1).string_value(), "x=y");
  EXPECT_EQ(d1.at("hitsAddend").number_value(), 3);
  EXPECT_EQ(d1.count("limit"), 0u);
  EXPECT_EQ(d.values(0).struct_value().fields().count("hitsAddend"), 0u);
  const std::string limit = d.values(2).struct_value().fields().at("limit").string_value();
  EXPECT_NE(limit.find("requests_per_unit: 42"), std::string::npos) << limit;
  EXPECT_NE(limit.find("HOUR"), std::string::npos) << limit;
}

// Upstream's TestMetadataReturnedForPassedDescriptors,
// TestMetadataReturnedForAllPassedDescriptors and
// TestOverlappingMetadataReturnsTheFirstValue: `metadata` of the descriptors
// not OVER_LIMIT, merged, the first descriptor's field winning; nested
// mappings merge.
TEST(RlsParityTest, MetadataOfPassedDescriptorsMergedFirstWins) {
  ManualClock clock;
  RlsFixture f(R"(
domain: md
descriptors:
  - key: one
    metadata: {name: service_1, nested: {a: 1}}
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: two
    quota_mode: true
    metadata: {name: service_2, some_other_name: service_2, nested: {a: 2, b: 2}}
    rate_limit: {unit: minute, requests_per_unit: 1}
)",
               &clock, WithMetadata());
  auto req = [] {
    rlspb::RateLimitRequest r = Request("md", {{"one", "x"}});
    AddDescriptor(&r, {{"two", "x"}});
    return r;
  };
  const Code both = CallOk(f, req());
  ASSERT_EQ(both.overall_code(), Code::OK);
  const auto& m = both.dynamic_metadata().fields().at("metadata").struct_value().fields();
  EXPECT_EQ(m.at("name").string_value(), "service_1");  // the first wins
  EXPECT_EQ(m.at("some_other_name").string_value(), "service_2");
  const auto& nested = m.at("nested").struct_value().fields();
  EXPECT_EQ(nested.at("a").number_value(), 1);
  EXPECT_EQ(nested.at("b").number_value(), 2);
  // `two` (quota mode, 1/minute) is over now: only `one`'s metadata is sent.
  const Code second = CallOk(f, req());
  ASSERT_EQ(second.overall_code(), Code::OVER_LIMIT);  // every quota descriptor is over
  EXPECT_EQ(second.statuses(1).code(), Code::OVER_LIMIT);
  const auto& m2 = second.dynamic_metadata().fields().at("metadata").struct_value().fields();
  EXPECT_EQ(m2.at("name").string_value(), "service_1");
  EXPECT_EQ(m2.count("some_other_name"), 0u);
}

struct UnitCase {
  const char* name;
  envoy::type::v3::RateLimitUnit proto;
  int64_t seconds;
};

constexpr UnitCase kUnits[] = {
    {"second", envoy::type::v3::SECOND, 1},    {"minute", envoy::type::v3::MINUTE, 60},
    {"hour", envoy::type::v3::HOUR, 3600},     {"day", envoy::type::v3::DAY, 86400},
    {"week", envoy::type::v3::WEEK, 604800},   {"month", envoy::type::v3::MONTH, 2592000},
    {"year", envoy::type::v3::YEAR, 31536000},
};

// Issue 17: `unit: week` with requests_per_unit 1 answers a reset of at most
// 604800 s after one hit (1/week used to refill every 1,000,000 s).
TEST(RlsParityTest, EveryUnitResetsExactlyOnePeriodAfterOneHit) {
  std::string yaml = "domain: units\ndescriptors:\n";
  for (const UnitCase& u : kUnits) {
    yaml += std::string("  - key: tb_") + u.name + "\n    rate_limit: {unit: " + u.name +
            ", requests_per_unit: 1}\n";
    yaml += std::string("  - key: fw_") + u.name +
            "\n    rate_limit: {unit: " + std::string(u.name) +
            ", requests_per_unit: 1, algorithm: fixed_window}\n";
  }
  ManualClock clock;
  RlsFixture f(yaml, &clock);
  const int64_t wall_s = clock.WallNow() / 1'000'000'000;
  for (const UnitCase& u : kUnits) {
    const Code hit = CallOk(f, Request("units", {{std::string("tb_") + u.name, "k"}}));
    EXPECT_EQ(hit.statuses(0).current_limit().unit(), static_cast<int>(u.proto)) << u.name;
    EXPECT_EQ(hit.statuses(0).limit_remaining(), 0u) << u.name;
    EXPECT_EQ(Reset(hit, 0), u.seconds) << u.name;
    const Code over = CallOk(f, Request("units", {{std::string("tb_") + u.name, "k"}}));
    EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT) << u.name;
    EXPECT_EQ(Reset(over, 0), u.seconds) << u.name;
    // Fixed windows end on the wall clock's grid of the unit.
    const Code fw = CallOk(f, Request("units", {{std::string("fw_") + u.name, "k"}}));
    EXPECT_EQ(fw.statuses(0).current_limit().unit(), static_cast<int>(u.proto)) << u.name;
    EXPECT_EQ(Reset(fw, 0), u.seconds - wall_s % u.seconds) << u.name;
  }
}

// A count that does not divide its unit: 7 a minute is one token every
// 60/7 s = 8.571428572 s (core rounds the interval up by under 1 ns). The
// answer is whole seconds rounded up, as envoyproxy/ratelimit's are whole
// seconds, so it never points before the real moment; the decisions follow
// the exact interval.
TEST(RlsParityTest, UnevenCountsResetAtTheExactInterval) {
  ManualClock clock;
  RlsFixture f(
      "domain: u\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
      "requests_per_unit: 7}\n  - key: t\n    rate_limit: {unit: hour, "
      "requests_per_unit: 13}\n",
      &clock);
  const auto k = Request("u", {{"k", "x"}});
  EXPECT_EQ(Reset(CallOk(f, k), 0), 9);  // 8.57 s until full again
  for (int i = 0; i < 6; ++i) CallOk(f, k);
  const Code over = CallOk(f, k);
  ASSERT_EQ(over.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(Reset(over, 0), 9);
  const Nanos interval{8'571'428'572};
  clock.Advance(interval - Nanos(1));
  EXPECT_EQ(CallOk(f, k).overall_code(), Code::OVER_LIMIT);  // 1 ns early
  clock.Advance(Nanos(1));
  const Code back = CallOk(f, k);
  EXPECT_EQ(back.overall_code(), Code::OK);
  // Full again in 7 intervals = 60 s + 4 ns: whole seconds round that up, as
  // the HTTP headers do (tests/policy/period_policy_test.cc).
  EXPECT_EQ(Reset(back, 0), 61);
  // 13 an hour: 276.923 s a token.
  EXPECT_EQ(Reset(CallOk(f, Request("u", {{"t", "x"}})), 0), 277);
}

// examples/envoy/ratelimit/edge_proxy.yaml uses the newer keys as documented.
TEST(RlsParityTest, EdgeProxyExampleSharesExportsAndCountsBotsInQuotaMode) {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : ".") + "/examples/envoy/ratelimit/edge_proxy.yaml");
  std::stringstream yaml;
  yaml << in.rdbuf();
  ManualClock clock;
  RlsFixture f(yaml.str(), &clock, WithMetadata());
  EXPECT_EQ(CallOk(f, Request("edge", {{"path", "/api/v1/export"}})).statuses(0).limit_remaining(),
            99u);
  EXPECT_EQ(CallOk(f, Request("edge", {{"path", "/api/v2/export"}})).statuses(0).limit_remaining(),
            98u);  // one budget for every version
  const Code bot = CallOk(f, Request("edge", {{"user_agent", "Googlebot/2.1"}}));
  EXPECT_EQ(bot.overall_code(), Code::OK);
  EXPECT_EQ(bot.statuses(0).code(), Code::OK);
  EXPECT_EQ(bot.dynamic_metadata()
                .fields()
                .at("metadata")
                .struct_value()
                .fields()
                .at("backend")
                .string_value(),
            "crawler-pool");
}

}  // namespace
}  // namespace tollgate::rls
