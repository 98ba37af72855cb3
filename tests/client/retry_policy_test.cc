// RetryPolicy: backoff with full jitter, never earlier than the server asked,
// bounded by attempts and by time. PaceDelay: spreading the remaining quota.
#include <gtest/gtest.h>

#include "tollgate/client.h"

namespace tollgate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

RateLimitInfo WithRetryAfter(Nanos d) {
  RateLimitInfo info;
  info.retry_after = d;
  return info;
}

RateLimitInfo Quota(int64_t quota, int64_t remaining, Nanos reset) {
  RateLimitInfo info;
  info.source = RateLimitSource::kDraft11;
  RateLimitQuota q;
  q.name = "default";
  q.quota = quota;
  q.remaining = remaining;
  q.reset = reset;
  info.quotas.push_back(q);
  return info;
}

TEST(RetryPolicyTest, NeverEarlierThanRetryAfter) {
  ManualClock clock;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    RetryPolicy p({.max_attempts = 10, .base_delay = milliseconds(100)}, clock, seed);
    for (int i = 0; i < 5; ++i) {
      const RetryDecision d = p.OnResponse(429, WithRetryAfter(seconds(2)));
      ASSERT_TRUE(d.retry);
      ASSERT_GE(d.delay, seconds(2));
    }
  }
}

TEST(RetryPolicyTest, FullJitterStaysUnderTheExponentialCeiling) {
  ManualClock clock;
  Nanos max_seen[4] = {};
  for (uint64_t seed = 0; seed < 500; ++seed) {
    RetryPolicy p({.max_attempts = 5, .base_delay = milliseconds(100), .max_backoff = seconds(1)},
                  clock, seed);
    for (int retry = 0; retry < 4; ++retry) {
      const RetryDecision d = p.OnResponse(503, {});
      ASSERT_TRUE(d.retry);
      const Nanos ceiling = std::min<Nanos>(milliseconds(100 << retry), seconds(1));
      ASSERT_LE(d.delay, ceiling);
      ASSERT_GE(d.delay, Nanos(0));
      max_seen[retry] = std::max(max_seen[retry], d.delay);
    }
  }
  // Jitter actually spreads: the largest delay seen per retry is near its ceiling.
  EXPECT_GT(max_seen[0], milliseconds(90));
  EXPECT_GT(max_seen[3], milliseconds(700));
}

TEST(RetryPolicyTest, StopsWhenAttemptsRunOut) {
  ManualClock clock;
  RetryPolicy p({.max_attempts = 3}, clock, 1);
  EXPECT_TRUE(p.OnResponse(429, {}).retry);
  EXPECT_TRUE(p.OnTransportError().retry);
  const RetryDecision d = p.OnResponse(429, {});
  EXPECT_FALSE(d.retry);
  EXPECT_EQ(d.reason, "attempts exhausted");
  p.Reset();
  EXPECT_TRUE(p.OnResponse(429, {}).retry);
}

TEST(RetryPolicyTest, StopsWhenTheServerWaitEndsPastTheBudget) {
  ManualClock clock;
  RetryPolicy p({.max_attempts = 10, .max_total = seconds(10)}, clock, 1);
  EXPECT_TRUE(p.OnResponse(429, WithRetryAfter(seconds(4))).retry);
  clock.Advance(seconds(4));
  EXPECT_TRUE(p.OnResponse(429, WithRetryAfter(seconds(5))).retry);
  clock.Advance(seconds(5));
  const RetryDecision d = p.OnResponse(429, WithRetryAfter(seconds(2)));
  EXPECT_FALSE(d.retry);
  EXPECT_EQ(d.reason, "time budget exhausted");
}

TEST(RetryPolicyTest, NonRetryableStatusesAndSuccess) {
  ManualClock clock;
  RetryPolicy p({}, clock, 1);
  EXPECT_FALSE(p.OnResponse(200, {}).retry);
  EXPECT_FALSE(p.OnResponse(404, {}).retry);
  EXPECT_FALSE(p.OnResponse(500, {}).retry);
  RetryPolicy q({.retry_transport_errors = false}, clock, 1);
  EXPECT_FALSE(q.OnTransportError().retry);
}

TEST(RetryPolicyTest, ExhaustedQuotaResetIsTheFloorWithoutRetryAfter) {
  ManualClock clock;
  RetryPolicy p({.base_delay = milliseconds(1)}, clock, 7);
  const RetryDecision d = p.OnResponse(429, Quota(10, 0, seconds(3)));
  EXPECT_TRUE(d.retry);
  EXPECT_GE(d.delay, seconds(3));
  EXPECT_EQ(d.reason, "quota-reset");
}

TEST(RetryPolicyTest, AbsurdRetryAfterGivesUp) {
  ManualClock clock;
  RetryPolicy p({.max_total = std::chrono::hours(24 * 400)}, clock, 1);
  EXPECT_FALSE(p.OnResponse(429, WithRetryAfter(kMaxRetryAfter)).retry);
}

TEST(PaceDelayTest, SpreadsTheRemainingQuota) {
  EXPECT_EQ(PaceDelay(Quota(100, 80, seconds(10))), Nanos(0));           // plenty left
  EXPECT_EQ(PaceDelay(Quota(100, 9, seconds(10))), Nanos(seconds(1)));   // 10 s / (9 + 1)
  EXPECT_EQ(PaceDelay(Quota(100, 0, seconds(10))), Nanos(seconds(10)));  // wait for the reset
  EXPECT_EQ(PaceDelay(Quota(100, 80, seconds(10)), {.below_fraction = 1.0}),
            Nanos(seconds(10)) / 81);
  RateLimitInfo info = Quota(100, 80, seconds(10));
  info.retry_after = seconds(4);
  EXPECT_EQ(PaceDelay(info), Nanos(seconds(4)));
  EXPECT_EQ(PaceDelay(RateLimitInfo{}), Nanos(0));
}

}  // namespace
}  // namespace tollgate
