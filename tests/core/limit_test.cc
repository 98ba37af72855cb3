#include "tollgate/limit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tollgate {
namespace {

LimitSpec Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return s;
}

TEST(LimitTest, PrecomputesExactConstants) {
  auto l = Limit::Create(Bucket(10, 20));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->rate_micro(), 10'000'000);
  EXPECT_EQ(l->interval_ns(), 100'000'000);
  EXPECT_EQ(l->tolerance_ns(), 2'000'000'000);
  EXPECT_EQ(l->IncrementFor(3), 300'000'000);
  EXPECT_EQ(l->TokensIn(250'000'000), 2);
}

TEST(LimitTest, FractionalRatesRoundTheIntervalUp) {
  auto third = Limit::Create(Bucket(3, 3));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->interval_ns(), 333'333'334);  // ceil(1e9 / 3)
  // Everything is a whole multiple of the interval, so a full bucket of 3 grants 3.
  EXPECT_EQ(third->IncrementFor(3), 1'000'000'002);
  EXPECT_EQ(third->tolerance_ns(), 1'000'000'002);
  EXPECT_LE(third->effective_rate(), 3.0);
  EXPECT_GT(third->effective_rate(), 3.0 * (1 - 1e-8));
  auto decimal = Limit::Create(Bucket(0.3, 1));
  ASSERT_TRUE(decimal.ok());
  EXPECT_EQ(decimal->rate_micro(), 300'000);  // the decimal the user meant, not 299999
  auto tiny = Limit::Create(Bucket(1.0 / 3.0, 1));
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->rate_micro(), 333'333);  // truncated down: never faster than asked
}

TEST(LimitTest, RejectsWhatCannotBeExact) {
  EXPECT_FALSE(Limit::Create(Bucket(0, 10)).ok());
  EXPECT_FALSE(Limit::Create(Bucket(-1, 10)).ok());
  EXPECT_FALSE(Limit::Create(Bucket(std::nan(""), 10)).ok());
  EXPECT_FALSE(Limit::Create(Bucket(std::numeric_limits<double>::infinity(), 10)).ok());
  EXPECT_FALSE(Limit::Create(Bucket(2e9, 10)).ok());
  EXPECT_FALSE(Limit::Create(Bucket(10, 0)).ok());
  EXPECT_FALSE(Limit::Create(Bucket(1e-6, int64_t{1} << 40)).ok());  // refill takes > 36 years
  auto err = Limit::Create(Bucket(10, 0));
  EXPECT_NE(err.status().message().find("burst"), std::string::npos) << err.status().ToString();
}

TEST(LimitTest, ValidateReportsEveryField) {
  LimitSpec s = Bucket(-5, 0);
  auto errors = Limit::Validate(s);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "burst");
  EXPECT_EQ(errors[1].field, "rate");
}

TEST(LimitTest, WindowLimitsNeedAWindow) {
  LimitSpec s;
  s.algorithm = Algorithm::kFixedWindow;
  s.burst = 100;
  EXPECT_FALSE(Limit::Create(s).ok());
  s.window = std::chrono::seconds(60);
  auto l = Limit::Create(s);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->window_ns(), 60'000'000'000);
  s.burst = Limit::kMaxFixedWindowBurst;  // a quota of 2^40 a window
  EXPECT_TRUE(Limit::Create(s).ok());
  s.burst = Limit::kMaxFixedWindowBurst + 1;
  EXPECT_FALSE(Limit::Create(s).ok());
  s.algorithm = Algorithm::kSlidingWindow;  // two counts in one word
  s.burst = Limit::kMaxWindowBurst;
  EXPECT_TRUE(Limit::Create(s).ok());
  s.burst = Limit::kMaxWindowBurst + 1;
  EXPECT_FALSE(Limit::Create(s).ok());
}

TEST(LimitTest, AlgorithmNamesRoundTrip) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kFixedWindow,
                      Algorithm::kSlidingWindow, Algorithm::kSlidingLog}) {
    Algorithm parsed;
    ASSERT_TRUE(ParseAlgorithm(AlgorithmName(a), &parsed));
    EXPECT_EQ(parsed, a);
  }
  Algorithm unused;
  EXPECT_FALSE(ParseAlgorithm("gcra2", &unused));
}

}  // namespace
}  // namespace tollgate

namespace tollgate {
namespace {

TEST(ClockTest, CoarseClockIsMonotonicAndCloseToTheSteadyClock) {
  const CoarseClock& coarse = CoarseClock::Instance();
  const SystemClock& fine = SystemClock::Instance();
  int64_t last = coarse.Now();
  for (int i = 0; i < 100000; ++i) {
    const int64_t now = coarse.Now();
    ASSERT_GE(now, last);
    last = now;
  }
  // Both read CLOCK_MONOTONIC underneath: they differ by at most a few ticks.
  const int64_t diff = fine.Now() - coarse.Now();
  EXPECT_LE(std::abs(diff), 10 * CoarseClock::Resolution().count() + 50'000'000);
  EXPECT_GT(CoarseClock::Resolution().count(), 0);
}

TEST(ClockTest, ManualClockMovesOnlyWhenTold) {
  ManualClock clock(5'000);
  EXPECT_EQ(clock.Now(), 5'000);
  clock.Advance(Nanos(10));
  EXPECT_EQ(clock.Now(), 5'010);
  clock.Set(100);
  EXPECT_EQ(clock.Now(), 100);
  EXPECT_EQ(clock.WallNow() - clock.Now(), ManualClock().WallNow() - ManualClock().Now());
}

}  // namespace
}  // namespace tollgate
