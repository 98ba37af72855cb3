// Retry-After, HTTP-date and the RateLimit fields of every vintage.
#include <gtest/gtest.h>

#include <vector>

#include "client/structured_fields.h"
#include "tollgate/client.h"

namespace tollgate {
namespace {

using std::chrono::seconds;

// 1994-11-06 08:49:37 UTC, RFC 9110's example date.
constexpr int64_t kExample = 784111777;
constexpr int64_t kSec = 1'000'000'000;

TEST(HttpDateTest, ParsesAllThreeForms) {
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), kExample);
  EXPECT_EQ(ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT"), kExample);
  EXPECT_EQ(ParseHttpDate("Sun Nov  6 08:49:37 1994"), kExample);
}

TEST(HttpDateTest, RejectsMalformedDates) {
  for (const char* bad : {"", "Sun, 06 Nov 1994 08:49:37", "Sun, 6 Nov 1994 08:49:37 GMT",
                          "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                          "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMTX",
                          "Sun, 06 Nov 1969 08:49:37 GMT", "06 Nov 1994 08:49:37 GMT"}) {
    EXPECT_FALSE(ParseHttpDate(bad).has_value()) << bad;
  }
}

TEST(HttpDateTest, FormatRoundTrips) {
  EXPECT_EQ(FormatHttpDate(kExample), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(FormatHttpDate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(FormatHttpDate(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  for (int64_t t = 0; t < 4'000'000'000; t += 7'777'777) {
    ASSERT_EQ(ParseHttpDate(FormatHttpDate(t)), t) << FormatHttpDate(t);
  }
}

TEST(RetryAfterTest, DelaySeconds) {
  EXPECT_EQ(ParseRetryAfter("120", 0), Nanos(seconds(120)));
  EXPECT_EQ(ParseRetryAfter(" 0 ", 0), Nanos(0));
  EXPECT_EQ(ParseRetryAfter("99999999999999999999999", 0), kMaxRetryAfter);
  EXPECT_FALSE(ParseRetryAfter("-1", 0).has_value());
  EXPECT_FALSE(ParseRetryAfter("1.5", 0).has_value());
  EXPECT_FALSE(ParseRetryAfter("", 0).has_value());
}

TEST(RetryAfterTest, HttpDateIsRelativeToNow) {
  const int64_t now = (kExample - 3) * kSec + 250'000'000;  // 2.75 s before the date
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now), Nanos(2'750'000'000));
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", (kExample + 10) * kSec), Nanos(0));
}

// Found by fuzz/targets/client_headers.cc: a date thousands of years away was
// multiplied into nanoseconds and overflowed int64 (UBSan).
TEST(RetryAfterTest, DatesFarFromNowAreCappedNotOverflowed) {
  const int64_t now = kExample * kSec;
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 3994 08:49:37 GMT", now), kMaxRetryAfter);
  EXPECT_EQ(ParseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", now), kMaxRetryAfter);
  EXPECT_EQ(ParseRetryAfter("Thu, 01 Jan 1970 00:00:00 GMT", now), Nanos(0));
  EXPECT_EQ(ParseRetryAfter("Sun Nov  6 08:49:37 9994", now), kMaxRetryAfter);
}

std::vector<HeaderPair> H(std::initializer_list<HeaderPair> l) { return l; }

TEST(RateLimitHeadersTest, Draft11ListsMergeByName) {
  const auto h =
      H({{"RateLimit-Policy", R"("permin";q=50;w=60, "perhr";q=1000;w=3600;qu="requests")"},
         {"ratelimit", R"("permin";r=3;t=20, "perhr";r=700;t=1800)"},
         {"Retry-After", "7"}});
  const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
  EXPECT_EQ(info.source, RateLimitSource::kDraft11);
  ASSERT_EQ(info.quotas.size(), 2u);
  EXPECT_EQ(info.quotas[0].name, "permin");
  EXPECT_EQ(info.quotas[0].quota, 50);
  EXPECT_EQ(info.quotas[0].window_seconds, 60);
  EXPECT_EQ(info.quotas[0].remaining, 3);
  EXPECT_EQ(info.quotas[0].reset, Nanos(seconds(20)));
  EXPECT_EQ(info.quotas[1].remaining, 700);
  ASSERT_NE(info.Tightest(), nullptr);
  EXPECT_EQ(info.Tightest()->name, "permin");
  EXPECT_EQ(info.retry_after, Nanos(seconds(7)));
}

TEST(RateLimitHeadersTest, SeveralFieldLinesAreCombined) {
  const auto h = H({{"RateLimit", R"("a";r=5)"}, {"RateLimit", R"("b";r=1;t=2)"}});
  const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
  ASSERT_EQ(info.quotas.size(), 2u);
  EXPECT_EQ(info.Tightest()->name, "b");
}

TEST(RateLimitHeadersTest, PartitionKeyIsDecoded) {
  const auto h = H({{"RateLimit", R"("default";r=1;pk=:dXNlcjE=:)"}});
  const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
  ASSERT_EQ(info.quotas.size(), 1u);
  EXPECT_EQ(info.quotas[0].partition_key, "user1");
}

TEST(RateLimitHeadersTest, MalformedFieldsAreIgnored) {
  for (const char* bad : {R"("a";t=5)", R"("a";r=-1)", R"("a";r=1,)", R"("a;r=1)", R"(("a");r=1)",
                          R"("a";r=1.5)", R"("a";r=1 junk)"}) {
    const auto h = H({{"RateLimit", bad}});
    const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
    EXPECT_EQ(info.source, RateLimitSource::kNone) << bad;
    EXPECT_TRUE(info.quotas.empty()) << bad;
  }
  const auto oversized = std::string(9000, 'a');
  const auto h = H({{"RateLimit-Remaining", "3"}, {"X-Junk", oversized}, {"RateLimit", oversized}});
  EXPECT_EQ(ParseRateLimitHeaders(h, 0).source, RateLimitSource::kDraft03);
}

TEST(RateLimitHeadersTest, Draft07Dictionary) {
  const auto h = H({{"RateLimit", "limit=100, remaining=50, reset=5"}});
  const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
  EXPECT_EQ(info.source, RateLimitSource::kDraft07);
  ASSERT_EQ(info.quotas.size(), 1u);
  EXPECT_EQ(info.quotas[0].quota, 100);
  EXPECT_EQ(info.quotas[0].remaining, 50);
  EXPECT_EQ(info.quotas[0].reset, Nanos(seconds(5)));
}

TEST(RateLimitHeadersTest, Draft03Trio) {
  const auto h = H(
      {{"RateLimit-Limit", "10, 10;w=1"}, {"RateLimit-Remaining", "4"}, {"RateLimit-Reset", "2"}});
  const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
  EXPECT_EQ(info.source, RateLimitSource::kDraft03);
  ASSERT_EQ(info.quotas.size(), 1u);
  EXPECT_EQ(info.quotas[0].quota, 10);
  EXPECT_EQ(info.quotas[0].window_seconds, 1);
  EXPECT_EQ(info.quotas[0].remaining, 4);
  EXPECT_EQ(info.quotas[0].reset, Nanos(seconds(2)));
}

TEST(RateLimitHeadersTest, Draft04PolicyWithTrio) {
  const auto h = H({{"RateLimit-Limit", "100"},
                    {"RateLimit-Remaining", "0"},
                    {"RateLimit-Reset", "9"},
                    {"RateLimit-Policy", "100;w=10"}});
  const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
  EXPECT_EQ(info.source, RateLimitSource::kDraft03);
  EXPECT_EQ(info.quotas[0].window_seconds, 10);
  EXPECT_EQ(info.quotas[0].remaining, 0);
}

TEST(RateLimitHeadersTest, XRateLimitResetEncodings) {
  const int64_t now = 1'700'000'000 * kSec;
  auto reset_for = [&](const char* value, ResetEncoding e) {
    const auto h = H({{"X-RateLimit-Limit", "60"},
                      {"X-RateLimit-Remaining", "0"},
                      {"X-RateLimit-Reset", value},
                      {"X-RateLimit-Resource", "core"}});
    const RateLimitInfo info = ParseRateLimitHeaders(h, now, {.x_reset = e});
    EXPECT_EQ(info.source, RateLimitSource::kXRateLimit);
    EXPECT_EQ(info.quotas.at(0).name, "core");
    EXPECT_EQ(info.quotas.at(0).quota, 60);
    return info.quotas.at(0).reset.value_or(Nanos(-1));
  };
  EXPECT_EQ(reset_for("30", ResetEncoding::kAuto), Nanos(seconds(30)));
  EXPECT_EQ(reset_for("1700000042", ResetEncoding::kAuto), Nanos(seconds(42)));  // GitHub
  EXPECT_EQ(reset_for("1700000001500", ResetEncoding::kAuto), Nanos(1'500'000'000));
  EXPECT_EQ(reset_for("1500", ResetEncoding::kDeltaMillis), Nanos(1'500'000'000));
  EXPECT_EQ(reset_for("1699999999", ResetEncoding::kEpochSeconds), Nanos(0));  // in the past
  // Found by fuzz/targets/client_headers.cc: a far reset (up to 2^52 ms) was
  // converted to nanoseconds past int64 (UBSan); it is capped like the
  // delta-seconds forms, at 2^32 s.
  const Nanos cap = seconds(int64_t{1} << 32);
  EXPECT_EQ(reset_for("14315121585000", ResetEncoding::kAuto), cap);
  EXPECT_EQ(reset_for("999999999999999999", ResetEncoding::kEpochMillis), cap);
  EXPECT_EQ(reset_for("999999999999999999", ResetEncoding::kEpochSeconds), cap);
  EXPECT_EQ(reset_for("999999999999999999", ResetEncoding::kDeltaMillis), cap);
}

TEST(RateLimitHeadersTest, NewestVintageWins) {
  const auto h = H({{"X-RateLimit-Remaining", "99"},
                    {"RateLimit-Remaining", "50"},
                    {"RateLimit", R"("default";r=7;t=3)"}});
  const RateLimitInfo info = ParseRateLimitHeaders(h, 0);
  EXPECT_EQ(info.source, RateLimitSource::kDraft11);
  EXPECT_EQ(info.Tightest()->remaining, 7);
}

TEST(StructuredFieldsTest, ParsesBareItemTypes) {
  auto list = sf::ParseList(R"(12, -3.5, "s\"q", tok/x:y, :AQI=:, ?0, @1659578233, (1 2);a;b=?0)");
  ASSERT_TRUE(list.has_value());
  ASSERT_EQ(list->size(), 8u);
  EXPECT_EQ((*list)[0].value.integer, 12);
  EXPECT_DOUBLE_EQ((*list)[1].value.decimal, -3.5);
  EXPECT_EQ((*list)[2].value.text, "s\"q");
  EXPECT_EQ((*list)[3].value.text, "tok/x:y");
  EXPECT_EQ((*list)[4].value.text, std::string("\x01\x02"));
  EXPECT_EQ((*list)[5].value.type, sf::BareItem::Type::kBoolean);
  EXPECT_EQ((*list)[6].value.type, sf::BareItem::Type::kDate);
  EXPECT_TRUE((*list)[7].inner_list);
  ASSERT_NE((*list)[7].Param("a"), nullptr);
  EXPECT_EQ((*list)[7].Param("b")->integer, 0);
}

TEST(StructuredFieldsTest, RejectsSyntaxErrorsAndOverlongMembers) {
  for (const char* bad : {"1,", ",1", "1;A=2", "1234567890123456", "1.2345", "\"\x01\"",
                          ":not base64!:", "?2", "(1 2", "a=1"}) {
    EXPECT_FALSE(sf::ParseList(bad).has_value()) << bad;
  }
  std::string many;
  for (int i = 0; i < 100; ++i) many += (i ? ", " : "") + std::to_string(i);
  EXPECT_FALSE(sf::ParseList(many).has_value());
}

}  // namespace
}  // namespace tollgate
