// Counts per period in policies: `"count": N, "period": "1h"` beside rps,
// validated with path-named errors, and the RateLimit / Retry-After headers
// of issue 17's cases to the second. Calendar quotas: `"calendar": "day" |
// "week" | "month"` and `"time_zone"` on fixed_window, and their headers at a
// DST change (a 23-hour day in Berlin).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "period_cases.h"
#include "policy/policy_impl.h"
#include "policy_test_util.h"
#include "tollgate/period.h"
#include "tollgate/policy.h"
#include "tollgate/time_zone.h"

namespace tollgate {
namespace {

using testing::FindHeader;
using testing::Harness;
using testing::TestRequest;

std::string Rule(const std::string& config, const std::string& algorithm = "token_bucket") {
  return R"({"rules": [{"name": "r", "limit_keys": ["ip:address"], "algorithm": ")" + algorithm +
         R"(", "algorithm_config": )" + config + "}]}";
}

std::string AllErrors(std::string_view text) {
  ParsedPolicy p = ParsePolicy(text);
  std::string all;
  for (const auto& e : p.errors) all += e.ToString() + "\n";
  return all;
}

const Limit& OnlyLimit(const ParsedPolicy& p) { return p.policy->rules.at(0).limit; }

TEST(CountPerPeriodPolicy, ParsesBesideRpsAndMeansTheSameExactInterval) {
  ParsedPolicy hour = ParsePolicy(Rule(R"({"count": 1, "period": "1h"})"));
  ASSERT_TRUE(hour.errors.empty()) << AllErrors(Rule(R"({"count": 1, "period": "1h"})"));
  EXPECT_EQ(OnlyLimit(hour).interval_ns(), 3'600'000'000'000);
  EXPECT_EQ(OnlyLimit(hour).burst(), 1);  // burst defaults to the count
  ParsedPolicy seconds = ParsePolicy(Rule(R"({"count": 7, "period": 13, "burst": 3})"));
  ASSERT_TRUE(seconds.errors.empty());
  EXPECT_EQ(OnlyLimit(seconds).interval_ns(), 1'857'142'858);
  EXPECT_EQ(OnlyLimit(seconds).burst(), 3);
  // rps still works, and 1/3600 of a token per second is the same hour.
  ParsedPolicy rps = ParsePolicy(Rule(R"({"rps": 0.0002777777777777778, "burst": 1})"));
  ASSERT_TRUE(rps.errors.empty());
  EXPECT_EQ(OnlyLimit(rps).interval_ns(), 3'600'000'000'000);
  // A window algorithm reads count and period as its quota and window.
  ParsedPolicy window = ParsePolicy(Rule(R"({"count": 1000, "period": "30d"})", "fixed_window"));
  ASSERT_TRUE(window.errors.empty())
      << AllErrors(Rule(R"({"count": 1000, "period": "30d"})", "fixed_window"));
  EXPECT_EQ(OnlyLimit(window).burst(), 1000);
  EXPECT_EQ(OnlyLimit(window).window_ns(), 30LL * 86400 * 1'000'000'000);
}

TEST(CountPerPeriodPolicy, ErrorsNameThePathAndWhy) {
  struct Case {
    std::string json;
    std::string expected;
  };
  const std::string cfg = "rules[0].algorithm_config.";
  const std::vector<Case> cases = {
      {Rule(R"({"count": 1, "period": "1x"})"), cfg + "period: at byte 1: unknown unit \"x\""},
      {Rule(R"({"count": 1, "period": "1.5h"})"), cfg + "period: at byte 1: only whole numbers"},
      {Rule(R"({"count": 1, "period": "400d"})"), cfg + "period: at byte 0: longer than 366 days"},
      {Rule(R"({"count": 1, "period": 1.5})"), cfg + "period: must be a whole number of seconds"},
      {Rule(R"({"count": 1, "period": true})"), cfg + "period: must be a period string"},
      {Rule(R"({"count": 1})"), cfg + "period: is required with count"},
      {Rule(R"({"period": "1h"})"), cfg + "count: is required with period"},
      {Rule(R"({"count": 0, "period": "1h"})"), cfg + "count: must be > 0"},
      {Rule(R"({"count": 2.5, "period": "1h"})"), cfg + "count: must be a whole number"},
      {Rule(R"({"count": 11, "period": "10ns"})"), cfg + "count: more than one per nanosecond"},
      {Rule(R"({"count": 1, "period": "366d", "burst": 40})"), cfg + "burst: refilling 40 tokens"},
      {Rule(R"({"count": 1, "period": "1h", "rps": 1, "burst": 1})"),
       cfg + "count: set count and period, or rps, not both"},
      {Rule(R"({"count": 1, "period": "1h", "window": "1h"})"),
       cfg + "window: is only used by the window algorithms"},
      {Rule(R"({"count": 5, "period": "1h", "burst": 5})", "fixed_window"),
       cfg + "burst: set count (the quota per period) or burst, not both"},
      {Rule(R"({"count": 5, "period": "1h", "window": "1h"})", "fixed_window"),
       cfg + "window: set period or window, not both"},
      {Rule(R"({"count": 5, "period": "1h"})", "sliding_log"), ""},  // valid
  };
  for (const Case& c : cases) {
    const std::string all = AllErrors(c.json);
    if (c.expected.empty()) {
      EXPECT_EQ(all, "") << c.json;
    } else {
      EXPECT_NE(all.find(c.expected), std::string::npos)
          << c.json << "\nexpected: " << c.expected << "\ngot:\n"
          << all;
    }
  }
}

int64_t CeilSeconds(int64_t ns) { return (ns + 999'999'999) / 1'000'000'000; }

// Headers to the second: the drained bucket's RateLimit reset and policy
// window, then the 429's Retry-After, 1 ns before and at the refill.
TEST(CountPerPeriodPolicy, HeadersReportResetAndRetryAfterToTheSecond) {
  for (const testing::PeriodCase& c : testing::PeriodCases()) {
    SCOPED_TRACE(c.name);
    const std::string policy =
        Rule(R"({"count": )" + std::to_string(c.count) + R"(, "period": ")" +
             FormatPeriod(Nanos(c.period_ns)) + R"(", "burst": )" + std::to_string(c.burst) +
             R"(, "cost_source": "header:x-cost"})");
    EnforcerOptions o;
    o.retry_after_jitter = 0;
    Harness h(policy, o);
    TestRequest drain;
    drain.Peer("192.0.2.1").Header("x-cost", std::to_string(c.burst));
    CheckOutcome first = h.Check(drain);
    ASSERT_TRUE(first.allowed());
    // The exact period, not the integer intervals' sum rounded up: 7 per
    // 13 s reports 13 s (7 * 1857142858 ns is 13 s + 6 ns, once reported 14).
    const int64_t window =
        CeilSeconds(static_cast<int64_t>(static_cast<__int128>(c.burst) * c.period_ns / c.count));
    if (c.count == 7) {
      EXPECT_EQ(window, 13);
    }
    EXPECT_EQ(FindHeader(first, "RateLimit-Policy"),
              "\"r\";q=" + std::to_string(c.burst) + ";w=" + std::to_string(window));
    EXPECT_EQ(FindHeader(first, "RateLimit"), "\"r\";r=0;t=" + std::to_string(window));
    TestRequest one;
    one.Peer("192.0.2.1");
    CheckOutcome denied = h.Check(one);
    ASSERT_EQ(denied.http_status, 429);
    EXPECT_EQ(FindHeader(denied, "Retry-After"),
              std::to_string(std::max<int64_t>(1, CeilSeconds(c.interval_ns))));
    EXPECT_EQ(FindHeader(denied, "RateLimit"),
              "\"r\";r=0;t=" + std::to_string(std::max<int64_t>(1, CeilSeconds(c.interval_ns))));
    h.clock.Advance(Nanos(c.interval_ns - 1));
    EXPECT_EQ(FindHeader(h.Check(one), "Retry-After"), "1");
    h.clock.Advance(Nanos(1));
    CheckOutcome refilled = h.Check(one);
    EXPECT_TRUE(refilled.allowed());
    EXPECT_EQ(FindHeader(refilled, "RateLimit"), "\"r\";r=0;t=" + std::to_string(window));
  }
}

constexpr int64_t kNs = 1'000'000'000;

TEST(CalendarPolicy, Parses) {
  const std::string text = Rule(
      R"({"count": 1000, "calendar": "month", "time_zone": "America/New_York"})", "fixed_window");
  ParsedPolicy p = ParsePolicy(text);
  ASSERT_TRUE(p.errors.empty()) << AllErrors(text);
  const Limit& l = p.policy->rules.at(0).limit;
  ASSERT_NE(l.calendar(), nullptr);
  EXPECT_EQ(l.calendar()->ToString(), "month@America/New_York");
  EXPECT_EQ(l.burst(), 1000);
  EXPECT_EQ(l.ToString(), "fixed_window limit=1000 calendar=month@America/New_York");
  // The zone defaults to UTC.
  ParsedPolicy utc = ParsePolicy(Rule(R"({"burst": 5, "calendar": "week"})", "fixed_window"));
  ASSERT_TRUE(utc.errors.empty());
  EXPECT_EQ(utc.policy->rules.at(0).limit.calendar()->ToString(), "week@UTC");
}

TEST(CalendarPolicy, ErrorsNameThePathAndWhy) {
  const std::string cfg = "rules[0].algorithm_config.";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Rule(R"({"count": 5, "calendar": "day"})"),
       cfg + "calendar: is only used by fixed_window (got token_bucket)"},
      {Rule(R"({"count": 5, "calendar": "year"})", "fixed_window"),
       cfg + "calendar: must be \"day\", \"week\" or \"month\" (got \"year\")"},
      {Rule(R"({"count": 5, "calendar": 1})", "fixed_window"), cfg + "calendar: must be a string"},
      {Rule(R"({"count": 5, "calendar": "day", "time_zone": "Mars/Olympus_Mons"})", "fixed_window"),
       cfg + "time_zone: time zone \"Mars/Olympus_Mons\": no such zone"},
      {Rule(R"({"count": 5, "calendar": "day", "time_zone": "../../etc/passwd"})", "fixed_window"),
       cfg + "time_zone: time zone \"../../etc/passwd\": a component starts with '.'"},
      {Rule(R"({"count": 5, "calendar": "day", "time_zone": "right/UTC"})", "fixed_window"),
       cfg + "time_zone: time zone \"right/UTC\": right/UTC: at byte 0: leap-second zones"},
      {Rule(R"({"count": 5, "period": "1d", "time_zone": "UTC"})", "fixed_window"),
       cfg + "time_zone: is only used with calendar"},
      {Rule(R"({"count": 5, "period": "1d", "calendar": "day"})", "fixed_window"),
       cfg + "calendar: set calendar or a period / window, not both"},
      {Rule(R"({"calendar": "day"})", "fixed_window"),
       cfg + "burst: is required (the quota per window)"},
  };
  for (const auto& [json, expected] : cases) {
    const std::string all = AllErrors(json);
    EXPECT_NE(all.find(expected), std::string::npos)
        << json << "\nexpected: " << expected << "\ngot:\n"
        << all;
  }
}

// 2026-03-29 in Berlin has 23 hours: from 00:00 CET (23:00 UTC the day
// before) to 00:00 CEST (22:00 UTC). An hour in, the quota is gone: the
// reset and Retry-After are the 22 real hours left, not 23.
TEST(CalendarPolicy, HeadersReportTheRealTimeToTheLocalMidnight) {
  EnforcerOptions o;
  o.retry_after_jitter = 0;
  Harness h(Rule(R"({"count": 3, "calendar": "day", "time_zone": "Europe/Berlin",
                     "cost_source": "header:x-cost"})",
                 "fixed_window"),
            o);
  const int64_t midnight = (DaysFromCivil(2026, 3, 28) * 86400 + 23 * 3600) * kNs;
  h.clock.Advance(Nanos(midnight + 3600 * kNs - h.clock.WallNow()));
  TestRequest drain;
  drain.Peer("192.0.2.1").Header("x-cost", "3");
  CheckOutcome first = h.Check(drain);
  ASSERT_TRUE(first.allowed());
  EXPECT_EQ(FindHeader(first, "RateLimit-Policy"), "\"r\";q=3;w=86400");
  EXPECT_EQ(FindHeader(first, "RateLimit"), "\"r\";r=0;t=79200");
  TestRequest one;
  one.Peer("192.0.2.1");
  CheckOutcome denied = h.Check(one);
  ASSERT_EQ(denied.http_status, 429);
  EXPECT_EQ(FindHeader(denied, "Retry-After"), "79200");
  h.clock.Advance(Nanos(22 * 3600 * kNs - 1));
  EXPECT_EQ(FindHeader(h.Check(one), "Retry-After"), "1");
  h.clock.Advance(Nanos(1));
  CheckOutcome next_day = h.Check(one);
  EXPECT_TRUE(next_day.allowed());
  EXPECT_EQ(FindHeader(next_day, "RateLimit"), "\"r\";r=2;t=86400");
}

}  // namespace
}  // namespace tollgate
