#include "tollgate/algorithm.h"

#include <gtest/gtest.h>

namespace tollgate {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT0 = 1'000 * kSec;

Limit Make(Algorithm a, double rate, int64_t burst, int64_t window_ns = 0, int64_t max_delay = 0) {
  LimitSpec s;
  s.algorithm = a;
  s.rate = rate;
  s.burst = burst;
  s.window = Nanos(window_ns);
  s.max_delay = Nanos(max_delay);
  auto l = Limit::Create(s);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}

// Applies a step and keeps the state, as a store would.
struct Bucket {
  Limit limit;
  uint64_t state = 0;
  Decision Take(int64_t cost, int64_t now) {
    StepResult r = Step(limit, state, cost, now);
    if (r.changed) state = r.state;
    return r.decision;
  }
};

TEST(TokenBucketTest, BurstThenRefillAtRate) {
  Bucket b{Make(Algorithm::kTokenBucket, 10, 20)};
  for (int i = 0; i < 20; ++i) {
    Decision d = b.Take(1, kT0);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.remaining, 19 - i);
  }
  Decision denied = b.Take(1, kT0);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.remaining, 0);
  EXPECT_EQ(denied.retry_after, Nanos(100'000'000));  // exactly one interval
  EXPECT_EQ(denied.reset_after, Nanos(2 * kSec));
  EXPECT_FALSE(b.Take(1, kT0 + 99'999'999).allowed);
  EXPECT_TRUE(b.Take(1, kT0 + 100'000'000).allowed);
}

TEST(TokenBucketTest, RetryAfterIsExactForLargerCosts) {
  Bucket b{Make(Algorithm::kTokenBucket, 2, 10)};
  ASSERT_TRUE(b.Take(10, kT0).allowed);
  Decision d = b.Take(3, kT0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos(1'500'000'000));
  EXPECT_FALSE(b.Take(3, kT0 + 1'499'999'999).allowed);
  EXPECT_TRUE(b.Take(3, kT0 + 1'500'000'000).allowed);
}

TEST(TokenBucketTest, RejectedStepChargesNothing) {
  Limit l = Make(Algorithm::kTokenBucket, 1, 5);
  StepResult r = Step(l, 0, 5, kT0);
  ASSERT_TRUE(r.decision.allowed);
  StepResult denied = Step(l, r.state, 1, kT0);
  EXPECT_FALSE(denied.decision.allowed);
  EXPECT_FALSE(denied.changed);
  EXPECT_EQ(denied.state, r.state);
}

TEST(TokenBucketTest, FractionalRate) {
  Bucket b{Make(Algorithm::kTokenBucket, 0.5, 1)};
  EXPECT_TRUE(b.Take(1, kT0).allowed);
  Decision d = b.Take(1, kT0);
  EXPECT_EQ(d.retry_after, Nanos(2 * kSec));
  EXPECT_FALSE(b.Take(1, kT0 + 2 * kSec - 1).allowed);
  EXPECT_TRUE(b.Take(1, kT0 + 2 * kSec).allowed);
}

TEST(TokenBucketTest, CostAboveBurstIsNeverAllowed) {
  Bucket b{Make(Algorithm::kTokenBucket, 100, 10)};
  Decision d = b.Take(11, kT0);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Decision::kNever);
  EXPECT_EQ(d.remaining, 10);  // nothing was charged
  EXPECT_TRUE(b.Take(10, kT0).allowed);
}

TEST(TokenBucketTest, CostZeroPeeks) {
  Bucket b{Make(Algorithm::kTokenBucket, 1, 3)};
  ASSERT_TRUE(b.Take(2, kT0).allowed);
  const uint64_t before = b.state;
  StepResult peek = Step(b.limit, b.state, 0, kT0);
  EXPECT_TRUE(peek.decision.allowed);
  EXPECT_FALSE(peek.changed);
  EXPECT_EQ(peek.decision.remaining, 1);
  EXPECT_EQ(b.state, before);
}

TEST(TokenBucketTest, BackwardClockNeverAddsTokens) {
  Bucket b{Make(Algorithm::kTokenBucket, 10, 10)};
  ASSERT_TRUE(b.Take(10, kT0).allowed);
  // The clock jumps back an hour, then creeps forward: no tokens until the
  // original refill time is reached again.
  EXPECT_FALSE(b.Take(1, kT0 - 3600 * kSec).allowed);
  Decision d = b.Take(1, kT0 - 3600 * kSec);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_FALSE(b.Take(1, kT0 + 99'999'999).allowed);
  EXPECT_TRUE(b.Take(1, kT0 + 100'000'000).allowed);
}

TEST(TokenBucketTest, LongIdleRefillsToBurstOnly) {
  Bucket b{Make(Algorithm::kTokenBucket, 1000, 50)};
  ASSERT_TRUE(b.Take(50, kT0).allowed);
  const int64_t later = kT0 + 10LL * 365 * 24 * 3600 * kSec;  // ten years
  Decision d = b.Take(0, later);
  EXPECT_EQ(d.remaining, 50);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(b.Take(1, later).allowed);
  EXPECT_FALSE(b.Take(1, later).allowed);
}

TEST(TokenBucketTest, ExtremeRates) {
  Bucket fast{Make(Algorithm::kTokenBucket, 1e9, 1000)};
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(fast.Take(1, kT0).allowed);
  EXPECT_FALSE(fast.Take(1, kT0).allowed);
  EXPECT_TRUE(fast.Take(1, kT0 + 1).allowed);  // one token per nanosecond
  Bucket slow{Make(Algorithm::kTokenBucket, 1e-6, 1)};
  EXPECT_TRUE(slow.Take(1, kT0).allowed);
  Decision d = slow.Take(1, kT0);
  EXPECT_EQ(d.retry_after, Nanos(1'000'000LL * kSec));
}

TEST(LeakyBucketTest, MeterBehavesAsTokenBucket) {
  Limit meter = Make(Algorithm::kLeakyBucket, 5, 5);
  Limit tb = Make(Algorithm::kTokenBucket, 5, 5);
  uint64_t a = 0, b = 0;
  for (int64_t t = kT0; t < kT0 + 3 * kSec; t += 37'000'000) {
    StepResult x = Step(meter, a, 1, t), y = Step(tb, b, 1, t);
    ASSERT_EQ(x.decision, y.decision);
    a = x.state;
    b = y.state;
  }
}

TEST(LeakyBucketTest, ShaperDelaysInsteadOfRejecting) {
  // nginx-like: 10 r/s, up to 3 requests at once (1 now + 2 delayed).
  Bucket b{Make(Algorithm::kLeakyBucket, 10, 3, 0, -1)};
  Decision first = b.Take(1, kT0);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.delay, Nanos(0));
  Decision second = b.Take(1, kT0);
  EXPECT_TRUE(second.allowed);
  EXPECT_EQ(second.delay, Nanos(100'000'000));
  Decision third = b.Take(1, kT0);
  EXPECT_TRUE(third.allowed);
  EXPECT_EQ(third.delay, Nanos(200'000'000));
  Decision fourth = b.Take(1, kT0);
  EXPECT_FALSE(fourth.allowed);
  EXPECT_EQ(fourth.retry_after, Nanos(100'000'000));
  EXPECT_TRUE(b.Take(1, kT0 + 100'000'000).allowed);
}

TEST(FixedWindowTest, CountsPerWindowAndResets) {
  Bucket b{Make(Algorithm::kFixedWindow, 0, 3, kSec)};
  const int64_t start = 2000 * kSec + 250'000'000;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(b.Take(1, start).allowed);
  Decision d = b.Take(1, start + 100);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos(750'000'000 - 100));
  EXPECT_EQ(d.remaining, 0);
  EXPECT_TRUE(b.Take(1, 2001 * kSec).allowed);
  // A backward step does not reopen the old window's budget.
  EXPECT_TRUE(b.Take(2, 1999 * kSec).allowed);  // stays in window 2001: 1 + 2 = 3
  EXPECT_FALSE(b.Take(1, 1999 * kSec).allowed);
}

TEST(SlidingWindowTest, WeighsThePreviousWindow) {
  Bucket b{Make(Algorithm::kSlidingWindow, 0, 10, kSec)};
  const int64_t w0 = 3000 * kSec;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b.Take(1, w0).allowed);
  EXPECT_FALSE(b.Take(1, w0 + kSec / 2).allowed);
  // Halfway through the next window, prev weighs 5: 5 more fit.
  const int64_t mid = w0 + kSec + kSec / 2;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(b.Take(1, mid).allowed) << i;
  Decision d = b.Take(1, mid);
  EXPECT_FALSE(d.allowed);
  EXPECT_GT(d.retry_after, Nanos(0));
  // Waiting the announced retry_after is enough.
  EXPECT_TRUE(b.Take(1, mid + d.retry_after.count()).allowed);
}

TEST(SlidingLogTest, ExactWindow) {
  Limit l = Make(Algorithm::kSlidingLog, 0, 3, kSec);
  SlidingLogState s;
  EXPECT_TRUE(StepLog(l, s, 1, kT0).allowed);
  EXPECT_TRUE(StepLog(l, s, 2, kT0 + 400'000'000).allowed);
  Decision d = StepLog(l, s, 1, kT0 + 500'000'000);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, Nanos(500'000'000));  // the first grant leaves at kT0 + 1s
  EXPECT_TRUE(StepLog(l, s, 1, kT0 + kSec).allowed);
  EXPECT_EQ(StepLog(l, s, 5, kT0 + kSec).retry_after, Decision::kNever);
}

}  // namespace
}  // namespace tollgate

namespace tollgate {
namespace {

// Regression: with the interval rounded up on its own, 30/s burst 30 granted
// only 29 from a full bucket. Every (rate, burst) must grant exactly burst.
TEST(TokenBucketTest, FullBucketGrantsExactlyBurst) {
  const double rates[] = {30, 100.0 / 3600, 80.0 / 86400, 3, 7, 33.3, 12345.678, 0.7, 1e6 / 7};
  for (double rate : rates) {
    for (int64_t burst : {int64_t{1}, int64_t{2}, int64_t{30}, int64_t{100}, int64_t{997}}) {
      LimitSpec s;
      s.rate = rate;
      s.burst = burst;
      auto l = Limit::Create(s);
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      uint64_t state = 0;
      int64_t granted = 0;
      for (int64_t i = 0; i < burst + 5; ++i) {
        StepResult r = Step(*l, state, 1, 5'000'000'000'000);
        if (r.changed) state = r.state;
        granted += r.decision.allowed;
      }
      EXPECT_EQ(granted, burst) << "rate " << rate << " burst " << burst;
      // And the whole burst at once from a fresh bucket.
      EXPECT_TRUE(Step(*l, 0, burst, 5'000'000'000'000).decision.allowed);
    }
  }
}

TEST(LimitTest, TokensInIsExactFloorDivision) {
  for (double rate : {1.0, 3.0, 7.0, 33.3, 1000.0, 12345.678, 1e6 / 7, 1e9}) {
    LimitSpec s;
    s.rate = rate;
    s.burst = 10;
    auto l = Limit::Create(s);
    ASSERT_TRUE(l.ok());
    const int64_t d = l->interval_ns();
    for (int64_t n : {int64_t{0}, int64_t{1}, d - 1, d, d + 1, 2 * d - 1, 2 * d, 10 * d - 1, 10 * d,
                      int64_t{1} << 40, (int64_t{1} << 60) + 12345}) {
      ASSERT_EQ(l->TokensIn(n), n / d) << "rate " << rate << " n " << n;
    }
  }
}

}  // namespace
}  // namespace tollgate
