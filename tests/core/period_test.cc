// Counts per period: the period parser, and limits held to the nanosecond
// (issue 17: 1/hour, 1/day, 1/week, 3/30 days, 7 per 13 s, 10^9 per day).
#include "tollgate/period.h"

#include <gtest/gtest.h>

#include "period_cases.h"
#include "tollgate/algorithm.h"
#include "tollgate/limit.h"

namespace tollgate {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(ParsePeriod, ReadsWholeTermsOfEveryUnit) {
  EXPECT_EQ(*ParsePeriod("1h"), Nanos(3600 * kSecond));
  EXPECT_EQ(*ParsePeriod("30d"), Nanos(30 * 86400 * kSecond));
  EXPECT_EQ(*ParsePeriod("1w"), Nanos(7 * 86400 * kSecond));
  EXPECT_EQ(*ParsePeriod("13s"), Nanos(13 * kSecond));
  EXPECT_EQ(*ParsePeriod("1h30m"), Nanos(5400 * kSecond));
  EXPECT_EQ(*ParsePeriod("1500ms"), Nanos(1'500'000'000));
  EXPECT_EQ(*ParsePeriod("7us"), Nanos(7'000));
  EXPECT_EQ(*ParsePeriod("1ns"), Nanos(1));
  EXPECT_EQ(*ParsePeriod("366d"), kMaxPeriod);
  EXPECT_EQ(*ParsePeriod("1d1d"), Nanos(2 * 86400 * kSecond));  // terms add up
  EXPECT_EQ(*ParsePeriod("000000000000000001s"), Nanos(kSecond));
}

TEST(ParsePeriod, RefusesWithWhereAndWhy) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"", "at byte 0: empty"},
      {"h", "at byte 0: expected a number"},
      {"1", "at byte 1: the number 1 has no unit"},
      {"1.5s", "at byte 1: only whole numbers"},
      {"-1s", "at byte 0: only whole, unsigned numbers"},
      {"1x", "at byte 1: unknown unit \"x\""},
      {"1 h", "at byte 1: unknown unit \" h\""},
      {"1H", "unknown unit"},
      {"1month", "at byte 1: unknown unit \"month\"; months and years"},
      {"1y", "unknown unit"},
      {"0s", "must be longer than zero"},
      {"367d", "longer than 366 days"},
      {"53w", "longer than 366 days"},
      {"365d2d", "at byte 4: longer than 366 days"},
      {"9999999999999999999s", "more than 18 digits"},
      {"999999999999999999w", "longer than 366 days"},
      {"1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s",
       "longer than 64 bytes"},
  };
  for (const Case& c : cases) {
    auto p = ParsePeriod(c.text);
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_NE(p.status().message().find(c.says), std::string::npos)
        << c.text << ": " << p.status().message();
  }
}

TEST(ParsePeriod, FormatRoundTrips) {
  for (int64_t ns : {int64_t{1}, int64_t{999}, int64_t{1'500'000'000}, 13 * kSecond, 3600 * kSecond,
                     5400 * kSecond, 86400 * kSecond, 8 * 86400 * kSecond, 14 * 86400 * kSecond,
                     kMaxPeriod.count(), kMaxPeriod.count() - 1}) {
    const std::string text = FormatPeriod(Nanos(ns));
    auto back = ParsePeriod(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status().ToString();
    EXPECT_EQ(back->count(), ns) << text;
  }
  EXPECT_EQ(FormatPeriod(Nanos(7 * 86400 * kSecond)), "1w");
  EXPECT_EQ(FormatPeriod(Nanos(8 * 86400 * kSecond)), "8d");
  EXPECT_EQ(FormatPeriod(Nanos(5400 * kSecond)), "1h30m");
}

TEST(CountPerPeriod, IntervalIsThePeriodOverTheCountInWholeNanoseconds) {
  for (const testing::PeriodCase& c : testing::PeriodCases()) {
    const Limit l = testing::PeriodLimit(c);
    EXPECT_EQ(l.interval_ns(), c.interval_ns) << c.name;
    EXPECT_EQ(l.tolerance_ns(), c.burst * c.interval_ns) << c.name;
    EXPECT_EQ(l.count(), c.count);
    EXPECT_EQ(l.period_ns(), c.period_ns);
  }
  // The same rates given per second land on the same intervals: no rounding
  // to micro-tokens (1/3600 rps was one token every 3611 s).
  const std::pair<double, int64_t> rates[] = {{1.0 / 3600, 3600 * kSecond},
                                              {1.0 / 86400, 86400 * kSecond},
                                              {5.0 / 86400, 17280 * kSecond},
                                              {1.0 / 604800, 604800 * kSecond},
                                              {3.0 / (30 * 86400), 864000 * kSecond},
                                              {1e9 / 86400, 86400},
                                              {0.3, 3'333'333'334},
                                              {3, 333'333'334}};
  for (const auto& [rate, interval] : rates) {
    LimitSpec s;
    s.rate = rate;
    s.burst = 1;
    auto l = Limit::Create(s);
    ASSERT_TRUE(l.ok()) << rate;
    EXPECT_EQ(l->interval_ns(), interval) << rate;
  }
}

TEST(CountPerPeriod, RefusesBadCountsAndPeriodsByField) {
  auto field = [](LimitSpec s) {
    auto errors = Limit::Validate(s);
    return errors.empty() ? std::string() : errors.front().field;
  };
  LimitSpec s;
  s.burst = 1;
  s.count = 1;
  s.period = Nanos(0);
  EXPECT_EQ(field(s), "period");
  s.period = kMaxPeriod + Nanos(1);
  EXPECT_EQ(field(s), "period");
  s.period = Nanos(10);
  s.count = 11;  // more than one a nanosecond
  EXPECT_EQ(field(s), "count");
  s.count = 0;
  EXPECT_EQ(field(s), "count");
  s.count = 1;
  s.rate = 5;
  EXPECT_EQ(field(s), "rate");
  s.rate = 0;
  s.period = kMaxPeriod;
  s.burst = 40;  // 40 tokens of 366 days take longer than 36 years
  EXPECT_EQ(field(s), "burst");
  s.burst = 36;
  EXPECT_EQ(field(s), "");
  s.algorithm = Algorithm::kFixedWindow;
  s.window = Nanos(kSecond);
  EXPECT_EQ(field(s), "count");
}

// Each case from a full bucket: the whole burst at once, then exact waits.
TEST(CountPerPeriod, DecisionsRetryAfterAndResetAreExactToTheNanosecond) {
  for (const testing::PeriodCase& c : testing::PeriodCases()) {
    SCOPED_TRACE(c.name);
    const Limit l = testing::PeriodLimit(c);
    const int64_t t0 = 5 * kSecond;
    uint64_t state = 0;
    StepResult r = Step(l, state, c.burst, t0);
    ASSERT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.decision.remaining, 0);
    EXPECT_EQ(r.decision.reset_after.count(), c.burst * c.interval_ns);
    state = r.state;
    // The next token refills exactly one interval later, not a nanosecond sooner.
    r = Step(l, state, 1, t0);
    EXPECT_FALSE(r.decision.allowed);
    EXPECT_EQ(r.decision.retry_after.count(), c.interval_ns);
    r = Step(l, state, 1, t0 + c.interval_ns - 1);
    EXPECT_FALSE(r.decision.allowed);
    EXPECT_EQ(r.decision.retry_after.count(), 1);
    r = Step(l, state, 1, t0 + c.interval_ns);
    ASSERT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.decision.remaining, 0);
    EXPECT_EQ(r.decision.reset_after.count(), c.burst * c.interval_ns);
    state = r.state;
    // Over one whole period after draining, exactly `count` more tokens (the
    // interval is exact for all but 7 per 13 s, which is 6 ns slow a period).
    const int64_t later = t0 + c.interval_ns + c.period_ns;
    r = Step(l, state, 0, later);
    const int64_t exact = c.period_ns % c.count == 0 ? c.count : c.count - 1;
    EXPECT_EQ(r.decision.remaining, std::min(c.burst, exact));
  }
}

// Quotas up to 2^40 a window in one state word, at wall-clock times, with
// the window index stored modulo: exact counts, waits to the window's end.
TEST(Quota, FixedWindowsCountUpTo2To40Exactly) {
  for (const testing::QuotaCase& c : testing::QuotaCases()) {
    SCOPED_TRACE(c.name);
    const Limit l = testing::QuotaLimit(c);
    const int64_t w = c.window_ns;
    const int64_t start = 1'763'700'000'000'000'000LL / w * w;  // a window start in 2025
    uint64_t state = 0;
    const int64_t t = start + w / 3;
    StepResult r = Step(l, state, c.count - 1, t);
    ASSERT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.decision.remaining, 1);
    EXPECT_EQ(r.decision.reset_after.count(), start + w - t);
    state = r.state;
    r = Step(l, state, 2, t);
    EXPECT_FALSE(r.decision.allowed);
    EXPECT_EQ(r.decision.retry_after.count(), start + w - t);
    r = Step(l, state, 1, start + w - 1);
    ASSERT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.decision.remaining, 0);
    state = r.state;
    r = Step(l, state, 1, start + w - 1);
    EXPECT_FALSE(r.decision.allowed);
    EXPECT_EQ(r.decision.retry_after.count(), 1);
    // A clock that steps back stays in the window it has counts for.
    r = Step(l, state, 1, start - 5);
    EXPECT_FALSE(r.decision.allowed);
    r = Step(l, state, c.count, start + w);
    EXPECT_TRUE(r.decision.allowed);
    EXPECT_EQ(r.decision.reset_after.count(), w);
  }
}

}  // namespace
}  // namespace tollgate
