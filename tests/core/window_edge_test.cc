// Edge cases of the window algorithms and the leaky-bucket shaper on explicit
// times: clock steps backwards, cost 0 (peek), cost > burst, long idle,
// windows that are not whole seconds. Every expected value is derived from the
// algorithm's arithmetic (see the comments), not copied from a run.
#include <gtest/gtest.h>

#include "tollgate/algorithm.h"

namespace tollgate {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000 * kMs;

Limit MakeWindow(Algorithm a, int64_t burst, int64_t window_ns) {
  LimitSpec s;
  s.algorithm = a;
  s.burst = burst;
  s.window = Nanos(window_ns);
  auto l = Limit::Create(s);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}

// Applies steps and keeps the state, as a store would; checks that a step that
// does not change the state says so.
struct Keyed {
  Limit limit;
  uint64_t state = 0;
  StepResult Take(int64_t cost, int64_t now) {
    StepResult r = Step(limit, state, cost, now);
    if (r.changed) {
      state = r.state;
    } else {
      EXPECT_EQ(r.state, state) << "unchanged step altered the state word";
    }
    return r;
  }
};

// ---------------------------------------------------------------- fixed window

TEST(FixedWindowEdge, BackwardStepStaysInTheCountedWindow) {
  Keyed k{MakeWindow(Algorithm::kFixedWindow, 5, kSec)};
  const int64_t t = 2000 * kSec + 500 * kMs;  // window 2000: [2000 s, 2001 s)
  ASSERT_TRUE(k.Take(3, t).decision.allowed);
  // 100 ms before the window began: still window 2000's count (3 used).
  const int64_t back = 1999 * kSec + 900 * kMs;
  StepResult peek = k.Take(0, back);
  EXPECT_TRUE(peek.decision.allowed);
  EXPECT_FALSE(peek.changed);
  EXPECT_EQ(peek.decision.remaining, 2);
  EXPECT_EQ(peek.decision.reset_after, Nanos(1100 * kMs));  // 2001 s - 1999.9 s
  EXPECT_TRUE(k.Take(2, back).decision.allowed);
  const uint64_t full = k.state;
  StepResult denied = k.Take(1, back);
  EXPECT_FALSE(denied.decision.allowed);
  EXPECT_FALSE(denied.changed);
  EXPECT_EQ(k.state, full);
  EXPECT_EQ(denied.decision.remaining, 0);
  EXPECT_EQ(denied.decision.retry_after, Nanos(1100 * kMs));  // measured from the real now
  // Far back, and before time zero: no budget appears.
  StepResult far = k.Take(1, 5 * kSec);
  EXPECT_FALSE(far.decision.allowed);
  EXPECT_EQ(far.decision.retry_after, Nanos(1996 * kSec));
  StepResult negative = k.Take(1, -kSec);
  EXPECT_FALSE(negative.decision.allowed);
  EXPECT_EQ(negative.decision.retry_after, Nanos(2002 * kSec));
  EXPECT_EQ(k.state, full);
  // The next real window is full again.
  EXPECT_FALSE(k.Take(1, 2001 * kSec - 1).decision.allowed);
  StepResult next = k.Take(5, 2001 * kSec);
  EXPECT_TRUE(next.decision.allowed);
  EXPECT_EQ(next.decision.remaining, 0);
}

TEST(FixedWindowEdge, CostZeroPeeksAndCostAboveBurstIsNever) {
  Keyed k{MakeWindow(Algorithm::kFixedWindow, 5, kSec)};
  const int64_t t = 2000 * kSec + 250 * kMs;
  StepResult fresh = k.Take(0, t);
  EXPECT_TRUE(fresh.decision.allowed);
  EXPECT_FALSE(fresh.changed);
  EXPECT_EQ(k.state, 0u);
  EXPECT_EQ(fresh.decision.remaining, 5);
  EXPECT_EQ(fresh.decision.retry_after, Nanos(0));
  StepResult huge = k.Take(6, t);
  EXPECT_FALSE(huge.decision.allowed);
  EXPECT_FALSE(huge.changed);
  EXPECT_EQ(huge.decision.retry_after, Decision::kNever);
  EXPECT_EQ(huge.decision.remaining, 5);
  ASSERT_TRUE(k.Take(5, t).decision.allowed);
  // Exhausted: a peek still reports (allowed, nothing left), charges nothing.
  const uint64_t full = k.state;
  StepResult peek = k.Take(0, t);
  EXPECT_TRUE(peek.decision.allowed);
  EXPECT_FALSE(peek.changed);
  EXPECT_EQ(peek.decision.remaining, 0);
  EXPECT_EQ(peek.decision.reset_after, Nanos(750 * kMs));
  EXPECT_EQ(k.state, full);
  EXPECT_EQ(k.Take(6, t).decision.retry_after, Decision::kNever);
  EXPECT_EQ(k.Take(int64_t{1} << 40, t).decision.retry_after, Decision::kNever);
  // cost == burst is not "never": it fits at the next window.
  EXPECT_EQ(k.Take(5, t).decision.retry_after, Nanos(750 * kMs));
}

TEST(FixedWindowEdge, LongIdleIsFullAgain) {
  Keyed k{MakeWindow(Algorithm::kFixedWindow, 5, kSec)};
  ASSERT_TRUE(k.Take(5, 2000 * kSec).decision.allowed);
  for (int64_t later : {2001 * kSec, 2000 * kSec + 1'000'000 * kSec, int64_t{1} << 62}) {
    Keyed copy = k;
    StepResult r = copy.Take(5, later);
    EXPECT_TRUE(r.decision.allowed) << later;
    EXPECT_EQ(r.decision.remaining, 0) << later;
  }
}

TEST(FixedWindowEdge, FractionalRateWindow) {
  // 3 per 2.5 s (1.2/s): windows [1000 s, 1002.5 s), [1002.5 s, 1005 s), ...
  Keyed k{MakeWindow(Algorithm::kFixedWindow, 3, 2500 * kMs)};
  EXPECT_EQ(k.limit.rate(), 1.2);
  ASSERT_TRUE(k.Take(3, 1001 * kSec).decision.allowed);
  StepResult d = k.Take(1, 1001 * kSec);
  EXPECT_FALSE(d.decision.allowed);
  EXPECT_EQ(d.decision.retry_after, Nanos(1500 * kMs));
  EXPECT_EQ(d.decision.reset_after, Nanos(1500 * kMs));
  EXPECT_FALSE(k.Take(1, 1002 * kSec + 500 * kMs - 1).decision.allowed);
  EXPECT_TRUE(k.Take(3, 1002 * kSec + 500 * kMs).decision.allowed);
}

// Regression: with a 1 ms window, epoch nanoseconds (1.7e18) give window
// indices above 2^40, which did not fit the state word's index field: the
// stored index never matched again and every call saw a fresh window.
TEST(FixedWindowEdge, LargeWindowIndicesStillCount) {
  Keyed k{MakeWindow(Algorithm::kFixedWindow, 3, kMs)};
  const int64_t epoch = 1'700'000'000 * kSec + 250'000;  // window index 1.7e12 > 2^40
  ASSERT_GT(epoch / kMs, int64_t{1} << 40);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(k.Take(1, epoch).decision.allowed) << i;
  StepResult d = k.Take(1, epoch + 1000);
  EXPECT_FALSE(d.decision.allowed);
  EXPECT_EQ(d.decision.retry_after, Nanos(750'000 - 1000));
  // A step back stays in that window.
  EXPECT_FALSE(k.Take(1, epoch - 5 * kMs).decision.allowed);
  StepResult next = k.Take(3, epoch + 750'000);
  EXPECT_TRUE(next.decision.allowed);
  EXPECT_FALSE(k.Take(1, epoch + 750'000).decision.allowed);
}

// -------------------------------------------------------------- sliding window

TEST(SlidingWindowEdge, BackwardStepNeverAddsCapacity) {
  Keyed k{MakeWindow(Algorithm::kSlidingWindow, 10, kSec)};
  const int64_t w0 = 3000 * kSec;  // window 3000
  StepResult a = k.Take(4, w0 + 500 * kMs);
  ASSERT_TRUE(a.decision.allowed);
  EXPECT_EQ(a.decision.remaining, 6);
  EXPECT_EQ(a.decision.reset_after, Nanos(1500 * kMs));  // end of window 3001
  // Window 3001, 250 ms in: prev 4 weighs 4 * 0.75 = 3; 5 more make 8.
  StepResult b = k.Take(5, w0 + kSec + 250 * kMs);
  ASSERT_TRUE(b.decision.allowed);
  EXPECT_EQ(b.decision.remaining, 2);
  const uint64_t before = k.state;

  // Back to 3000.9 s: decided at the start of the stored window 3001, where
  // prev still weighs fully: 4 + 5 = 9 used, so 1 fits where 2 did before.
  const int64_t back = w0 + 900 * kMs;
  StepResult peek = k.Take(0, back);
  EXPECT_TRUE(peek.decision.allowed);
  EXPECT_FALSE(peek.changed);
  EXPECT_EQ(peek.decision.remaining, 1);
  EXPECT_EQ(peek.decision.reset_after, Nanos(2100 * kMs));  // 3003 s - 3000.9 s
  StepResult two = k.Take(2, back);
  EXPECT_FALSE(two.decision.allowed);
  EXPECT_FALSE(two.changed);
  EXPECT_EQ(k.state, before);
  // 2 fit once prev * (1 - e) <= 10 - 5 - 2 = 3, i.e. 250 ms into window
  // 3001: 3001.25 s, which is 350 ms after the (stepped back) now.
  EXPECT_EQ(two.decision.retry_after, Nanos(350 * kMs));
  {
    Keyed copy = k;
    EXPECT_FALSE(copy.Take(2, back + 350 * kMs - 1).decision.allowed);
    EXPECT_TRUE(copy.Take(2, back + 350 * kMs).decision.allowed);
  }
  StepResult one = k.Take(1, back);
  EXPECT_TRUE(one.decision.allowed);
  EXPECT_EQ(one.decision.remaining, 0);
  EXPECT_FALSE(k.Take(1, back).decision.allowed);
  const uint64_t exhausted = k.state;
  // Far back and before time zero: still the stored window, nothing added;
  // retry_after still counts from the real now (250 ms into window 3001).
  StepResult far = k.Take(1, kSec);
  EXPECT_FALSE(far.decision.allowed);
  EXPECT_EQ(far.decision.retry_after, Nanos(3000 * kSec + 250 * kMs));
  StepResult negative = k.Take(1, -5 * kSec);
  EXPECT_FALSE(negative.decision.allowed);
  EXPECT_EQ(negative.decision.retry_after, Nanos(3006 * kSec + 250 * kMs));
  EXPECT_EQ(k.state, exhausted);
  // Forward again to 3001.25 s: prev 4 weighs 3, curr 6: 9 used, 1 fits.
  EXPECT_TRUE(k.Take(1, w0 + kSec + 250 * kMs).decision.allowed);
  EXPECT_FALSE(k.Take(1, w0 + kSec + 250 * kMs).decision.allowed);
}

TEST(SlidingWindowEdge, CostZeroPeeksAndCostAboveBurstIsNever) {
  Keyed k{MakeWindow(Algorithm::kSlidingWindow, 10, kSec)};
  const int64_t t = 3000 * kSec;
  StepResult fresh = k.Take(0, t);
  EXPECT_TRUE(fresh.decision.allowed);
  EXPECT_FALSE(fresh.changed);
  EXPECT_EQ(k.state, 0u);
  EXPECT_EQ(fresh.decision.remaining, 10);
  EXPECT_EQ(fresh.decision.reset_after, Nanos(0));
  StepResult huge = k.Take(11, t);
  EXPECT_FALSE(huge.decision.allowed);
  EXPECT_FALSE(huge.changed);
  EXPECT_EQ(huge.decision.retry_after, Decision::kNever);
  EXPECT_EQ(huge.decision.remaining, 10);
  ASSERT_TRUE(k.Take(10, t).decision.allowed);
  const uint64_t full = k.state;
  StepResult peek = k.Take(0, t + 100 * kMs);
  EXPECT_TRUE(peek.decision.allowed);
  EXPECT_FALSE(peek.changed);
  EXPECT_EQ(peek.decision.remaining, 0);
  EXPECT_EQ(peek.decision.reset_after, Nanos(1900 * kMs));  // end of the next window
  EXPECT_EQ(k.state, full);
  EXPECT_EQ(k.Take(11, t).decision.retry_after, Decision::kNever);
  // cost == burst fits once the 10 have left both windows: 2 s from the
  // window start (at 3001.999999999 s the previous 10 still weigh 1 ns).
  StepResult whole = k.Take(10, t);
  EXPECT_FALSE(whole.decision.allowed);
  EXPECT_EQ(whole.decision.retry_after, Nanos(2 * kSec));
  EXPECT_FALSE(k.Take(10, t + 2 * kSec - 1).decision.allowed);
  EXPECT_TRUE(k.Take(10, t + 2 * kSec).decision.allowed);
}

TEST(SlidingWindowEdge, LongIdleIsFullAgain) {
  Keyed k{MakeWindow(Algorithm::kSlidingWindow, 10, kSec)};
  const int64_t t = 3000 * kSec;
  ASSERT_TRUE(k.Take(10, t).decision.allowed);
  // The very next window still carries the previous one at full weight.
  EXPECT_FALSE(k.Take(1, t + kSec).decision.allowed);
  for (int64_t later : {t + 2 * kSec, t + 1000 * kSec, t + 100'000 * kSec}) {
    Keyed copy = k;
    StepResult r = copy.Take(10, later);
    EXPECT_TRUE(r.decision.allowed) << later;
    EXPECT_EQ(r.decision.remaining, 0) << later;
  }
}

TEST(SlidingWindowEdge, FractionalRateWindow) {
  // 3 per 1.5 s (2/s); window 2000 is [3000 s, 3001.5 s).
  Keyed k{MakeWindow(Algorithm::kSlidingWindow, 3, 1500 * kMs)};
  EXPECT_EQ(k.limit.rate(), 2.0);
  const int64_t w0 = 3000 * kSec;
  ASSERT_TRUE(k.Take(3, w0).decision.allowed);
  // 0.5 s into the next window prev weighs 3 * (1.0 / 1.5) = 2: one fits.
  const int64_t t = w0 + 1500 * kMs + 500 * kMs;
  StepResult one = k.Take(1, t);
  EXPECT_TRUE(one.decision.allowed);
  EXPECT_EQ(one.decision.remaining, 0);
  StepResult denied = k.Take(1, t);
  EXPECT_FALSE(denied.decision.allowed);
  // Fits when 3 * (1.5 - e) / 1.5 <= 3 - 1 - 1, i.e. e >= 1.0 s: 500 ms on.
  EXPECT_EQ(denied.decision.retry_after, Nanos(500 * kMs));
  EXPECT_FALSE(k.Take(1, t + 500 * kMs - 1).decision.allowed);
  EXPECT_TRUE(k.Take(1, t + 500 * kMs).decision.allowed);
}

// --------------------------------------------------- leaky bucket as a shaper

TEST(ShaperEdge, BackwardStepNeverAddsCapacity) {
  LimitSpec s;
  s.algorithm = Algorithm::kLeakyBucket;
  s.rate = 10;  // one every 100 ms
  s.burst = 3;
  s.max_delay = Nanos(300 * kMs);
  auto l = Limit::Create(s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  Keyed k{*l};
  const int64_t t = 1000 * kSec;
  EXPECT_EQ(k.Take(1, t).decision.delay, Nanos(0));
  EXPECT_EQ(k.Take(1, t).decision.delay, Nanos(100 * kMs));  // TAT now t + 200 ms
  const uint64_t before = k.state;
  // One second back: the next slot (t + 200 ms) is 1.2 s away, past max_delay.
  StepResult far = k.Take(1, t - kSec);
  EXPECT_FALSE(far.decision.allowed);
  EXPECT_FALSE(far.changed);
  EXPECT_EQ(k.state, before);
  EXPECT_EQ(far.decision.retry_after, Nanos(900 * kMs));
  EXPECT_EQ(far.decision.remaining, 0);
  EXPECT_EQ(far.decision.reset_after, Nanos(1200 * kMs));
  StepResult peek = k.Take(0, t - kSec);
  EXPECT_TRUE(peek.decision.allowed);
  EXPECT_FALSE(peek.changed);
  EXPECT_EQ(peek.decision.delay, Nanos(0));
  // 50 ms back: queued behind the same slot, with the longer delay.
  StepResult near = k.Take(1, t - 50 * kMs);
  EXPECT_TRUE(near.decision.allowed);
  EXPECT_EQ(near.decision.delay, Nanos(250 * kMs));  // TAT now t + 300 ms
  // At t the queue would have held one more (delay exactly 300 ms); 50 ms
  // earlier it does not: the step back took capacity, never added it.
  StepResult full = k.Take(1, t - 50 * kMs);
  EXPECT_FALSE(full.decision.allowed);
  EXPECT_EQ(full.decision.retry_after, Nanos(50 * kMs));
  EXPECT_EQ(k.Take(1, t).decision.delay, Nanos(300 * kMs));
  EXPECT_EQ(k.Take(4, t).decision.retry_after, Decision::kNever);
}

}  // namespace
}  // namespace tollgate
