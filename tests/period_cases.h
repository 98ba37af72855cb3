// The counts per period of issue 17 (1/hour, 1/day, 1/week, 3/30 days, 7 per
// 13 s, 10^9 per day) and a scenario that holds a Store to them to the
// nanosecond on a ManualClock. Shared by tests/core (Step), tests/local,
// tests/redis and tests/cluster, so every store is held to the same numbers.
#ifndef TOLLGATE_TESTS_PERIOD_CASES_H_
#define TOLLGATE_TESTS_PERIOD_CASES_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tollgate/algorithm.h"
#include "tollgate/calendar.h"
#include "tollgate/clock.h"
#include "tollgate/limit.h"
#include "tollgate/store.h"
#include "tollgate/time_zone.h"

namespace tollgate::testing {

struct PeriodCase {
  const char* name;
  int64_t count;
  int64_t period_ns;
  int64_t burst;
  int64_t interval_ns;  // what the interval must be, worked out by hand
};

inline std::vector<PeriodCase> PeriodCases() {
  constexpr int64_t s = 1'000'000'000, day = 86400 * s;
  return {
      {"1/hour", 1, 3600 * s, 1, 3600 * s},
      {"1/day", 1, day, 1, day},
      {"1/week", 1, 7 * day, 1, 7 * day},
      {"3/30days", 3, 30 * day, 3, 10 * day},
      {"7/13s", 7, 13 * s, 7, 1'857'142'858},  // ceil(13e9 / 7): 6 ns a period slow
      {"1e9/day", 1'000'000'000, day, 1'000'000'000, 86'400},
  };
}

inline Limit PeriodLimit(const PeriodCase& c) {
  LimitSpec spec;
  spec.count = c.count;
  spec.period = Nanos(c.period_ns);
  spec.burst = c.burst;
  auto l = Limit::Create(spec);
  EXPECT_TRUE(l.ok()) << c.name << ": " << l.status().ToString();
  return *l;
}

// One decision; a store error fails the test and reads as an empty Decision.
inline Decision DecideOne(Store& store, const std::string& key, const Limit& limit, int64_t cost) {
  auto d = AcquireOne(store, key, limit, cost);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : Decision{};
}

// From a full bucket: the whole burst at once, the next token exactly one
// interval later (denied 1 ns before it), a peek a whole period later. The
// store must take its time from `clock` (LocalStore's clock, or a Redis store
// on the client clock); every key starts with `prefix`.
inline void ExpectPeriodsExactOnStore(Store& store, ManualClock& clock, const std::string& prefix) {
  for (const PeriodCase& c : PeriodCases()) {
    SCOPED_TRACE(std::string(store.Name()) + " " + c.name);
    const Limit l = PeriodLimit(c);
    const std::string key = prefix + c.name;
    auto one = [&](int64_t cost) { return DecideOne(store, key, l, cost); };
    Decision d = one(c.burst);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.reset_after.count(), c.burst * c.interval_ns);
    d = one(1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after.count(), c.interval_ns);
    EXPECT_EQ(d.reset_after.count(), c.burst * c.interval_ns);
    clock.Advance(Nanos(c.interval_ns - 1));
    d = one(1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after.count(), 1);
    EXPECT_EQ(d.reset_after.count(), (c.burst - 1) * c.interval_ns + 1);
    clock.Advance(Nanos(1));
    d = one(1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.reset_after.count(), c.burst * c.interval_ns);
    clock.Advance(Nanos(c.period_ns));
    d = one(0);
    EXPECT_TRUE(d.allowed);
    const int64_t refilled = c.period_ns % c.count == 0 ? c.count : c.count - 1;
    EXPECT_EQ(d.remaining, std::min(c.burst, refilled));
    EXPECT_EQ(d.reset_after.count(), c.burst * c.interval_ns - c.period_ns > 0
                                         ? c.burst * c.interval_ns - c.period_ns
                                         : 0);
  }
}

// Quotas: fixed windows up to a year with counts up to 2^40, on the Unix
// epoch's grid of wall time on every store (LocalStore included), so the
// reset is the window's end. Across the layouts: Redis' 7-digit counts
// (9999999) and 13-digit ones (10M), core's 24-bit (2^24 - 1) and 41-bit ones.
struct QuotaCase {
  const char* name;
  int64_t count;
  int64_t window_ns;
};

inline std::vector<QuotaCase> QuotaCases() {
  constexpr int64_t s = 1'000'000'000, day = 86400 * s;
  return {{"9999999/day", 9'999'999, day},
          {"10M/30days", 10'000'000, 30 * day},
          {"2^24-1/hour", (int64_t{1} << 24) - 1, 3600 * s},
          {"2^24/hour", int64_t{1} << 24, 3600 * s},
          {"2^40/366days", int64_t{1} << 40, 366 * day}};
}

inline Limit QuotaLimit(const QuotaCase& c) {
  LimitSpec spec;
  spec.algorithm = Algorithm::kFixedWindow;
  spec.burst = c.count;
  spec.window = Nanos(c.window_ns);
  auto l = Limit::Create(spec);
  EXPECT_TRUE(l.ok()) << c.name << ": " << l.status().ToString();
  return *l;
}

inline void ExpectQuotasExactOnStore(Store& store, ManualClock& clock, const std::string& prefix) {
  for (const QuotaCase& c : QuotaCases()) {
    SCOPED_TRACE(std::string(store.Name()) + " " + c.name);
    const Limit l = QuotaLimit(c);
    const std::string key = prefix + c.name;
    auto one = [&](int64_t cost) { return DecideOne(store, key, l, cost); };
    const int64_t w = c.window_ns;
    auto to_end = [&] { return w - clock.WallNow() % w; };
    Decision d = one(c.count - 1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 1);
    EXPECT_EQ(d.reset_after.count(), to_end());
    d = one(2);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.remaining, 1);
    EXPECT_EQ(d.retry_after.count(), to_end());
    d = one(1);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    d = one(c.count + 1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after, Decision::kNever);
    clock.Advance(Nanos(to_end() - 1));  // the window's last nanosecond
    d = one(1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after.count(), 1);
    clock.Advance(Nanos(1));  // the next window: the whole quota again
    d = one(c.count);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.reset_after.count(), w);
  }
}

// Calendar quotas: a fixed window per local day, week or month in a zone.
// The boundaries are written out by hand (UTC), not computed by Calendar:
// the 23- and 25-hour days of Berlin's DST changes in 2026, New York's
// February and its November with the hour DST gives back, a UTC week.
struct CalendarCase {
  const char* name;
  CalendarUnit unit;
  const char* zone;
  int64_t count;
  int64_t start_s, end_s;  // the window under test, Unix seconds
  int64_t next_end_s;      // the end of the window after it
};

inline int64_t UtcSeconds(int64_t y, int m, int d, int h) {
  return DaysFromCivil(y, m, d) * 86400 + h * 3600;
}

// In time order (a store's clock only moves forward in the scenario).
inline std::vector<CalendarCase> CalendarCases() {
  return {
      {"berlin-23h-day", CalendarUnit::kDay, "Europe/Berlin", 5, UtcSeconds(2026, 3, 28, 23),
       UtcSeconds(2026, 3, 29, 22), UtcSeconds(2026, 3, 30, 22)},
      {"berlin-25h-day", CalendarUnit::kDay, "Europe/Berlin", 10'000'000,
       UtcSeconds(2026, 10, 24, 22), UtcSeconds(2026, 10, 25, 23), UtcSeconds(2026, 10, 26, 23)},
      {"utc-week", CalendarUnit::kWeek, "UTC", 7, UtcSeconds(2026, 11, 30, 0),
       UtcSeconds(2026, 12, 7, 0), UtcSeconds(2026, 12, 14, 0)},
      {"new-york-february", CalendarUnit::kMonth, "America/New_York", 1000,
       UtcSeconds(2027, 2, 1, 5), UtcSeconds(2027, 3, 1, 5), UtcSeconds(2027, 4, 1, 4)},
      {"new-york-november", CalendarUnit::kMonth, "America/New_York", 3, UtcSeconds(2027, 11, 1, 4),
       UtcSeconds(2027, 12, 1, 5), UtcSeconds(2028, 1, 1, 5)},
  };
}

inline Limit CalendarLimit(const CalendarCase& c) {
  LimitSpec spec;
  spec.algorithm = Algorithm::kFixedWindow;
  spec.burst = c.count;
  auto zone = TimeZone::Load(c.zone);
  EXPECT_TRUE(zone.ok()) << zone.status().ToString();
  spec.calendar = std::make_shared<Calendar>(c.unit, zone.ok() ? *zone : TimeZone::Fixed("UTC", 0));
  auto l = Limit::Create(spec);
  EXPECT_TRUE(l.ok()) << c.name << ": " << l.status().ToString();
  return *l;
}

// An hour into each window: the quota, its reset at the local boundary to the
// nanosecond, denial until the window's last nanosecond, the whole quota at
// the boundary with the next window's real length as its reset. `clock`'s
// wall time must lie before the first case.
inline void ExpectCalendarQuotasOnStore(Store& store, ManualClock& clock,
                                        const std::string& prefix) {
  constexpr int64_t s = 1'000'000'000;
  for (const CalendarCase& c : CalendarCases()) {
    SCOPED_TRACE(std::string(store.Name()) + " " + c.name);
    const Limit l = CalendarLimit(c);
    const std::string key = prefix + c.name;
    auto one = [&](int64_t cost) { return DecideOne(store, key, l, cost); };
    ASSERT_LT(clock.WallNow(), c.start_s * s);
    clock.Advance(Nanos(c.start_s * s + 3600 * s - clock.WallNow()));
    const int64_t to_end = (c.end_s - c.start_s - 3600) * s;
    Decision d = one(c.count - 1);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 1);
    EXPECT_EQ(d.reset_after.count(), to_end);
    d = one(2);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after.count(), to_end);
    d = one(1);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    clock.Advance(Nanos(to_end - 1));  // the window's last nanosecond
    d = one(1);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after.count(), 1);
    clock.Advance(Nanos(1));  // the local boundary: the whole quota again
    d = one(c.count);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.reset_after.count(), (c.next_end_s - c.end_s) * s);
  }
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_PERIOD_CASES_H_
