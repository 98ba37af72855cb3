// Calendar quotas in policies: `"calendar": "day" | "week" | "month"` and
// `"time_zone"` on fixed_window, validated with path-named errors, and the
// RateLimit / Retry-After headers at a DST change (a 23-hour day in Berlin).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "policy/policy_impl.h"
#include "policy_test_util.h"
#include "tollgate/policy.h"
#include "tollgate/time_zone.h"

namespace tollgate {
namespace {

using testing::FindHeader;
using testing::Harness;
using testing::TestRequest;

constexpr int64_t kNs = 1'000'000'000;

std::string Rule(const std::string& config, const std::string& algorithm = "fixed_window") {
  return R"({"rules": [{"name": "r", "limit_keys": ["ip:address"], "algorithm": ")" + algorithm +
         R"(", "algorithm_config": )" + config + "}]}";
}

std::string AllErrors(std::string_view text) {
  ParsedPolicy p = ParsePolicy(text);
  std::string all;
  for (const auto& e : p.errors) all += e.ToString() + "\n";
  return all;
}

TEST(CalendarPolicy, Parses) {
  const std::string text =
      Rule(R"({"count": 1000, "calendar": "month", "time_zone": "America/New_York"})");
  ParsedPolicy p = ParsePolicy(text);
  ASSERT_TRUE(p.errors.empty()) << AllErrors(text);
  const Limit& l = p.policy->rules.at(0).limit;
  ASSERT_NE(l.calendar(), nullptr);
  EXPECT_EQ(l.calendar()->ToString(), "month@America/New_York");
  EXPECT_EQ(l.burst(), 1000);
  EXPECT_EQ(l.ToString(), "fixed_window limit=1000 calendar=month@America/New_York");
  // The zone defaults to UTC.
  ParsedPolicy utc = ParsePolicy(Rule(R"({"burst": 5, "calendar": "week"})"));
  ASSERT_TRUE(utc.errors.empty());
  EXPECT_EQ(utc.policy->rules.at(0).limit.calendar()->ToString(), "week@UTC");
}

TEST(CalendarPolicy, ErrorsNameThePathAndWhy) {
  const std::string cfg = "rules[0].algorithm_config.";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Rule(R"({"count": 5, "calendar": "day"})", "token_bucket"),
       cfg + "calendar: is only used by fixed_window (got token_bucket)"},
      {Rule(R"({"count": 5, "calendar": "year"})"),
       cfg + "calendar: must be \"day\", \"week\" or \"month\" (got \"year\")"},
      {Rule(R"({"count": 5, "calendar": 1})"), cfg + "calendar: must be a string"},
      {Rule(R"({"count": 5, "calendar": "day", "time_zone": "Mars/Olympus_Mons"})"),
       cfg + "time_zone: time zone \"Mars/Olympus_Mons\": no such zone"},
      {Rule(R"({"count": 5, "calendar": "day", "time_zone": "../../etc/passwd"})"),
       cfg + "time_zone: time zone \"../../etc/passwd\": a component starts with '.'"},
      {Rule(R"({"count": 5, "calendar": "day", "time_zone": "right/UTC"})"),
       cfg + "time_zone: time zone \"right/UTC\": right/UTC: at byte 0: leap-second zones"},
      {Rule(R"({"count": 5, "period": "1d", "time_zone": "UTC"})"),
       cfg + "time_zone: is only used with calendar"},
      {Rule(R"({"count": 5, "period": "1d", "calendar": "day"})"),
       cfg + "calendar: set calendar or a period / window, not both"},
      {Rule(R"({"calendar": "day"})"), cfg + "burst: is required (the quota per window)"},
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
                     "cost_source": "header:x-cost"})"),
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
