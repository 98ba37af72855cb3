// envoyproxy/ratelimit's quota-mode expectations (test/service/ratelimit_test.go,
// #1045 and #1059: TestServicePerDescriptorQuotaMode,
// TestServiceMixedPerDescriptorModes, TestServiceQuotaModeOnlyAllOverTheLimit,
// TestServiceQuotaModeOnlySomeOverTheLimit), as scenarios any store runs:
// upstream mocks its cache's statuses, here real buckets are brought into the
// state each test assumes, through the service itself. On top of upstream's
// expectations each scenario checks what tollgate charged (all-or-nothing: a
// rejected call charges nothing; an admitted one charges the enforced
// descriptors and the quota descriptors within their limit).
//
// `call` sends one request (over gRPC, to a fresh service loaded with
// kQuotaYaml) and returns the response; failures are reported with gtest.
//
// Also the stream-end charge scenario (kStreamEndYaml, StreamEndCharges):
// Envoy's apply_on_stream_done call with a hits_addend from the response.
#ifndef TOLLGATE_TESTS_RLS_RLS_SCENARIOS_H_
#define TOLLGATE_TESTS_RLS_RLS_SCENARIOS_H_

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace tollgate::rls::quota_scenarios {

using Response = ::envoy::service::ratelimit::v3::RateLimitResponse;
using Request = ::envoy::service::ratelimit::v3::RateLimitRequest;
using Call = std::function<Response(const Request&)>;

// Upstream's limits: regular 5/minute, quota 3/minute; quota1 5, quota2 3.
inline const char* kQuotaYaml = R"(
domain: quota-domain
descriptors:
  - key: regular
    value: limit
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: quota
    value: limit
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: quota1
    value: limit
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: quota2
    value: limit
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
)";

// A request of one descriptor {key: "limit"} per key, hits_addend 1 as upstream's.
inline Request Keys(const std::vector<std::string>& keys) {
  Request r;
  r.set_domain("quota-domain");
  r.set_hits_addend(1);
  for (const std::string& k : keys) {
    auto* e = r.add_descriptors()->add_entries();
    e->set_key(k);
    e->set_value("limit");
  }
  return r;
}

// `n` admitted calls with `keys` (brings their buckets down by n).
inline void Spend(const Call& call, const std::vector<std::string>& keys, int n) {
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(call(Keys(keys)).overall_code(), Response::OK) << keys[0] << " call " << i;
  }
}

inline void ExpectStatus(const Response& r, int i, Response::Code code, uint32_t per_unit) {
  ASSERT_GT(r.statuses_size(), i);
  EXPECT_EQ(r.statuses(i).code(), code) << "descriptor " << i;
  EXPECT_EQ(r.statuses(i).current_limit().requests_per_unit(), per_unit) << "descriptor " << i;
  EXPECT_EQ(r.statuses(i).current_limit().unit(), Response::RateLimit::MINUTE);
}

// What one descriptor has left: a cost-0 peek (charges nothing).
inline uint32_t Left(const Call& call, const std::string& key) {
  Request r = Keys({key});
  r.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  const Response resp = call(r);
  return resp.statuses_size() == 1 ? resp.statuses(0).limit_remaining() : 999;
}

// A regular descriptor over its limit makes the call OVER_LIMIT even though
// the quota descriptor is within its own; nothing is charged.
inline void PerDescriptorQuotaMode(const Call& call) {
  Spend(call, {"regular"}, 5);
  const Response r = call(Keys({"regular", "quota"}));
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  ExpectStatus(r, 0, Response::OVER_LIMIT, 5);
  ExpectStatus(r, 1, Response::OK, 3);
  EXPECT_EQ(Left(call, "quota"), 3u);  // a rejected call charges nothing
}

// The one quota descriptor of the call is over: every quota descriptor is,
// so the call is OVER_LIMIT although the regular one is within its limit.
inline void MixedPerDescriptorModes(const Call& call) {
  Spend(call, {"quota"}, 3);
  const Response r = call(Keys({"regular", "quota"}));
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  ExpectStatus(r, 0, Response::OK, 5);
  ExpectStatus(r, 1, Response::OVER_LIMIT, 3);
  EXPECT_EQ(Left(call, "regular"), 5u);  // a rejected call charges nothing
  // Upstream's TestServiceMixedPerDescriptorModesUnderLimit: both within, OK.
  const Response fresh = call(Keys({"regular", "quota1"}));
  EXPECT_EQ(fresh.overall_code(), Response::OK);
  ExpectStatus(fresh, 0, Response::OK, 5);
  ExpectStatus(fresh, 1, Response::OK, 5);
}

inline void QuotaModeOnlyAllOverTheLimit(const Call& call) {
  Spend(call, {"quota1", "quota2"}, 3);  // quota2 (3) is over from here
  Spend(call, {"quota1"}, 2);            // and quota1 (5) too
  const Response r = call(Keys({"quota1", "quota2"}));
  EXPECT_EQ(r.overall_code(), Response::OVER_LIMIT);
  ExpectStatus(r, 0, Response::OVER_LIMIT, 5);
  ExpectStatus(r, 1, Response::OVER_LIMIT, 3);
}

// Only some quota descriptors over (and no regular one): OK overall, the
// over one's status OVER_LIMIT. The call charges the one within its limit,
// not the one over it.
inline void QuotaModeOnlySomeOverTheLimit(const Call& call) {
  Spend(call, {"quota1"}, 5);
  const Response r = call(Keys({"quota1", "quota2"}));
  EXPECT_EQ(r.overall_code(), Response::OK);
  ExpectStatus(r, 0, Response::OVER_LIMIT, 5);
  ExpectStatus(r, 1, Response::OK, 3);
  EXPECT_EQ(r.statuses(1).limit_remaining(), 2u);
  EXPECT_EQ(Left(call, "quota2"), 2u);  // charged
  // Two more calls use quota2 up; the next finds every quota descriptor over.
  Spend(call, {"quota1", "quota2"}, 2);
  const Response all_over = call(Keys({"quota1", "quota2"}));
  EXPECT_EQ(all_over.overall_code(), Response::OVER_LIMIT);
  ExpectStatus(all_over, 1, Response::OVER_LIMIT, 3);
}

// Tokens per minute per user, charged at stream end (charge_only), and the
// same limit without the flag, for contrast.
inline const char* kStreamEndYaml = R"(
domain: ai
descriptors:
  - key: user
    charge_only: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: plain_user
    rate_limit: {unit: minute, requests_per_unit: 100}
)";

// One descriptor {key: value} of `domain` with hits_addend `hits`.
inline Request Hits(const std::string& key, const std::string& value, uint64_t hits) {
  Request r;
  r.set_domain("ai");
  auto* d = r.add_descriptors();
  auto* e = d->add_entries();
  e->set_key(key);
  e->set_value(value);
  d->mutable_hits_addend()->set_value(hits);
  return r;
}

// A charge_only descriptor: the request-time check (hits_addend 0) is OK while
// the bucket holds a whole token; the stream-end call charges its cost
// without a fit check and is never refused, so the bucket goes into debt, and
// the next checks are OVER_LIMIT until a token has refilled past the debt.
// `advance` moves the clock by whole seconds.
inline void StreamEndCharges(const Call& call, const std::function<void(int64_t)>& advance) {
  const Response check = call(Hits("user", "u", 0));
  EXPECT_EQ(check.overall_code(), Response::OK);
  EXPECT_EQ(check.statuses(0).limit_remaining(), 100u);
  // 250 tokens reported at stream end: more than the whole bucket, charged anyway.
  const Response charge = call(Hits("user", "u", 250));
  EXPECT_EQ(charge.overall_code(), Response::OK);
  EXPECT_EQ(charge.statuses(0).code(), Response::OK);
  // 100/minute = one token per 0.6 s: 150 tokens of debt drain in 90 s, and
  // one whole token is back 0.6 s later: 90.6 s, reported as 91.
  const Response in_debt = call(Hits("user", "u", 0));
  EXPECT_EQ(in_debt.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(in_debt.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(in_debt.statuses(0).duration_until_reset().seconds(), 91);
  // A charge while in debt is taken too (never refused): 10 more = 6 s more.
  EXPECT_EQ(call(Hits("user", "u", 10)).overall_code(), Response::OK);
  EXPECT_EQ(call(Hits("user", "u", 0)).statuses(0).duration_until_reset().seconds(), 97);
  advance(96);  // 0.6 s short of a token
  EXPECT_EQ(call(Hits("user", "u", 0)).overall_code(), Response::OVER_LIMIT);
  advance(1);
  const Response back = call(Hits("user", "u", 0));
  EXPECT_EQ(back.overall_code(), Response::OK);
  EXPECT_EQ(back.statuses(0).limit_remaining(), 1u);
  // A check that finds no token refuses the whole call and charges nothing else.
  const Response empty_again = call(Hits("user", "u", 100));
  EXPECT_EQ(empty_again.overall_code(), Response::OK);
  Request mixed = Hits("user", "u", 0);
  auto* other = mixed.add_descriptors()->add_entries();
  other->set_key("plain_user");
  other->set_value("v");
  const Response refused = call(mixed);
  EXPECT_EQ(refused.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(refused.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(refused.statuses(1).code(), Response::OK);
  EXPECT_EQ(call(Hits("plain_user", "v", 0)).statuses(0).limit_remaining(), 100u);
  // Without charge_only the same cost is an ordinary decision: refused, uncharged.
  const Response plain = call(Hits("plain_user", "u", 250));
  EXPECT_EQ(plain.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(call(Hits("plain_user", "u", 0)).statuses(0).limit_remaining(), 100u);
}

}  // namespace tollgate::rls::quota_scenarios

#endif  // TOLLGATE_TESTS_RLS_RLS_SCENARIOS_H_
