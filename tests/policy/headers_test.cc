// Header rendering parsed back with an RFC 9651 List parser, compat styles,
// Retry-After jitter determinism and spread, problem+json bodies.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "policy_test_util.h"
#include "tollgate/policy_headers.h"

namespace tollgate {
namespace {

// A strict parser for the subset of RFC 9651 Lists we emit: members are
// sf-string Items with parameters whose values are sf-integers, sf-strings or
// tokens. Returns nullopt on any syntax error.
struct SfMember {
  std::string value;
  std::map<std::string, std::string> params;  // integers as their digits
};

std::optional<std::vector<SfMember>> ParseSfList(std::string_view s) {
  std::vector<SfMember> out;
  size_t i = 0;
  auto sp = [&] {
    while (i < s.size() && s[i] == ' ') ++i;
  };
  auto ows = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  };
  auto string = [&](std::string* v) -> bool {
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    while (i < s.size()) {
      const char c = s[i++];
      if (c == '\\') {
        if (i >= s.size() || (s[i] != '"' && s[i] != '\\')) return false;
        v->push_back(s[i++]);
      } else if (c == '"') {
        return true;
      } else if (c < 0x20 || c > 0x7e) {
        return false;
      } else {
        v->push_back(c);
      }
    }
    return false;
  };
  auto key = [&](std::string* k) -> bool {
    if (i >= s.size() || !((s[i] >= 'a' && s[i] <= 'z') || s[i] == '*')) return false;
    while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
                            s[i] == '_' || s[i] == '-' || s[i] == '.' || s[i] == '*')) {
      k->push_back(s[i++]);
    }
    return true;
  };
  sp();
  if (i == s.size()) return out;
  while (true) {
    SfMember m;
    if (!string(&m.value)) return std::nullopt;
    while (i < s.size() && s[i] == ';') {
      ++i;
      sp();
      std::string k;
      if (!key(&k)) return std::nullopt;
      std::string v = "?1";
      if (i < s.size() && s[i] == '=') {
        ++i;
        v.clear();
        if (i < s.size() && s[i] == '"') {
          if (!string(&v)) return std::nullopt;
        } else {
          const size_t start = i;
          if (i < s.size() && s[i] == '-') ++i;
          while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
          const size_t digits = i - start - (s[start] == '-' ? 1 : 0);
          if (digits == 0 || digits > 15) return std::nullopt;  // sf-integer: at most 15 digits
          v = std::string(s.substr(start, i - start));
        }
      }
      m.params[k] = v;
    }
    out.push_back(std::move(m));
    ows();
    if (i == s.size()) return out;
    if (s[i] != ',') return std::nullopt;
    ++i;
    ows();
    if (i == s.size()) return std::nullopt;  // trailing comma
  }
}

TEST(SfParser, SelfCheck) {
  EXPECT_TRUE(ParseSfList(R"("a";q=1;w=2, "b";r=0)"));
  EXPECT_FALSE(ParseSfList(R"(a;q=1)"));
  EXPECT_FALSE(ParseSfList(R"("a";q=1,)"));
  EXPECT_FALSE(ParseSfList(R"("a";Q=1)"));
  EXPECT_FALSE(ParseSfList(R"("a\x")"));
  EXPECT_FALSE(ParseSfList(R"("a";q=1234567890123456)"));
}

Limit Bucket(double rate, int64_t burst) {
  return *Limit::Create({.algorithm = Algorithm::kTokenBucket, .rate = rate, .burst = burst});
}

TEST(Headers, Draft11ParsesBack) {
  const Limit a = Bucket(5, 10);
  const Limit b = *Limit::Create(
      {.algorithm = Algorithm::kFixedWindow, .burst = 1000, .window = std::chrono::hours(1)});
  Decision da{.allowed = true, .limit = 10, .remaining = 9, .reset_after = Nanos(200'000'000)};
  Decision db{
      .allowed = true, .limit = 1000, .remaining = 10, .reset_after = std::chrono::seconds(1800)};
  const QuotaReport reports[] = {MakeQuotaReport("global-rps", a, da),
                                 MakeQuotaReport("quota \"q\\1\"", b, db)};
  auto headers = RenderRateLimitHeaders(HeaderStyle::kDraft11, reports, 0);
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[0].name, "RateLimit-Policy");
  EXPECT_EQ(headers[0].value, R"("global-rps";q=10;w=2, "quota \"q\\1\"";q=1000;w=3600)");
  EXPECT_EQ(headers[1].name, "RateLimit");
  EXPECT_EQ(headers[1].value, R"("global-rps";r=9;t=1, "quota \"q\\1\"";r=10;t=1800)");
  auto policy = ParseSfList(headers[0].value);
  auto state = ParseSfList(headers[1].value);
  ASSERT_TRUE(policy);
  ASSERT_TRUE(state);
  ASSERT_EQ(policy->size(), 2u);
  EXPECT_EQ((*policy)[1].value, "quota \"q\\1\"");
  EXPECT_EQ((*policy)[0].params.at("q"), "10");
  EXPECT_EQ((*policy)[0].params.at("w"), "2");
  EXPECT_EQ((*state)[0].params.at("r"), "9");
  EXPECT_EQ((*state)[0].params.at("t"), "1");
  EXPECT_EQ((*state)[1].params.at("t"), "1800");
}

TEST(Headers, NonPrintableNamesStayValidSyntax) {
  const QuotaReport r{.name = "caf\xc3\xa9\n", .quota = 1, .window_seconds = 1};
  auto headers = RenderRateLimitHeaders(HeaderStyle::kDraft11, std::span(&r, 1), 0);
  ASSERT_TRUE(ParseSfList(headers[0].value));
  EXPECT_EQ(headers[0].value.find('\n'), std::string::npos);
}

TEST(Headers, RejectReportsTheWaitNotTheRefill) {
  Decision d{.allowed = false,
             .limit = 10,
             .remaining = 0,
             .retry_after = Nanos(1'500'000'000),
             .reset_after = std::chrono::seconds(2)};
  QuotaReport r = MakeQuotaReport("p", Bucket(5, 10), d);
  EXPECT_EQ(r.remaining, 0);
  EXPECT_EQ(r.reset_seconds, 2);  // ceil(1.5)
  Decision never{.allowed = false,
                 .limit = 10,
                 .remaining = 4,
                 .retry_after = Decision::kNever,
                 .reset_after = Nanos(1'200'000'000)};
  EXPECT_EQ(MakeQuotaReport("p", Bucket(5, 10), never).reset_seconds, 2);
}

TEST(Headers, CompatStyles) {
  const QuotaReport reports[] = {
      {.name = "a", .quota = 100, .window_seconds = 10, .remaining = 50, .reset_seconds = 5},
      {.name = "b", .quota = 10, .window_seconds = 1, .remaining = 3, .reset_seconds = 1}};
  auto d03 = RenderRateLimitHeaders(HeaderStyle::kDraft03, reports, 0);
  ASSERT_EQ(d03.size(), 3u);
  EXPECT_EQ(d03[0], (HeaderField{"RateLimit-Limit", "10"}));
  EXPECT_EQ(d03[1], (HeaderField{"RateLimit-Remaining", "3"}));
  EXPECT_EQ(d03[2], (HeaderField{"RateLimit-Reset", "1"}));
  auto x = RenderRateLimitHeaders(HeaderStyle::kXRateLimit, reports, 0);
  EXPECT_EQ(x[0], (HeaderField{"X-RateLimit-Limit", "10"}));
  EXPECT_EQ(x[2], (HeaderField{"X-RateLimit-Reset", "1"}));
  // Epoch: rounded up from the wall clock, never before the real reset.
  auto e =
      RenderRateLimitHeaders(HeaderStyle::kXRateLimitEpoch, reports, 1'700'000'000'400'000'000);
  EXPECT_EQ(e[2], (HeaderField{"X-RateLimit-Reset", "1700000002"}));
  EXPECT_TRUE(RenderRateLimitHeaders(HeaderStyle::kNone, reports, 0).empty());
  EXPECT_TRUE(RenderRateLimitHeaders(HeaderStyle::kDraft11, {}, 0).empty());
  HeaderStyle s;
  for (HeaderStyle want : {HeaderStyle::kDraft11, HeaderStyle::kDraft03, HeaderStyle::kXRateLimit,
                           HeaderStyle::kXRateLimitEpoch, HeaderStyle::kNone}) {
    ASSERT_TRUE(ParseHeaderStyle(HeaderStyleName(want), &s));
    EXPECT_EQ(s, want);
  }
  EXPECT_FALSE(ParseHeaderStyle("draft99", &s));
}

TEST(HeaderStyles, ListsParseAndConflictsAreRefused) {
  std::vector<HeaderStyle> styles;
  std::string why;
  ASSERT_TRUE(ParseHeaderStyles(" draft11 ,draft03,x-ratelimit", &styles, &why)) << why;
  EXPECT_EQ(styles, (std::vector<HeaderStyle>{HeaderStyle::kDraft11, HeaderStyle::kDraft03,
                                              HeaderStyle::kXRateLimit}));
  EXPECT_EQ(HeaderStylesName(styles), "draft11,draft03,x-ratelimit");
  ASSERT_TRUE(ParseHeaderStyles("none", &styles, &why));
  EXPECT_TRUE(styles.empty());
  EXPECT_EQ(HeaderStylesName(styles), "none");
  struct {
    const char* list;
    const char* why;
  } bad[] = {{"", "empty"},
             {"draft11,", "empty"},
             {"draft11,draft99", "unknown style \"draft99\""},
             {"draft03,draft03", "twice"},
             {"none,draft11", "cannot be combined"},
             {"x-ratelimit,x-ratelimit-epoch", "X-RateLimit-Reset"}};
  for (const auto& b : bad) {
    styles = {HeaderStyle::kDraft11};
    EXPECT_FALSE(ParseHeaderStyles(b.list, &styles, &why)) << b.list;
    EXPECT_NE(why.find(b.why), std::string::npos) << b.list << ": " << why;
    EXPECT_EQ(styles.size(), 1u) << "unchanged on error";
  }
}

TEST(HeaderStyles, RenderingAListNeverRepeatsAField) {
  const QuotaReport r{"p", 10, 2, 3, 1};
  const HeaderStyle unchecked[] = {HeaderStyle::kXRateLimit, HeaderStyle::kXRateLimitEpoch,
                                   HeaderStyle::kDraft11, HeaderStyle::kDraft11};
  auto fields = RenderRateLimitHeaders(unchecked, std::span(&r, 1), 5'000'000'000);
  std::map<std::string, int> seen;
  for (const auto& f : fields) ++seen[f.name];
  for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(seen.size(), 5u);  // X-RateLimit trio + RateLimit-Policy + RateLimit
  EXPECT_EQ(seen.count("X-RateLimit-Reset"), 1u);
}

TEST(RetryAfter, DeterministicPerIdentity) {
  const Nanos wait = std::chrono::seconds(10);
  for (int i = 0; i < 50; ++i) {
    const std::string id = "free\x1ftb\x1fkey" + std::to_string(i);
    EXPECT_EQ(RetryAfterSeconds(wait, id, 0.5, 0), RetryAfterSeconds(wait, id, 0.5, 0));
  }
  // A different seed moves clients to different offsets.
  int moved = 0;
  for (int i = 0; i < 50; ++i) {
    const std::string id = "k" + std::to_string(i);
    moved += RetryAfterSeconds(wait, id, 0.5, 0) != RetryAfterSeconds(wait, id, 0.5, 99);
  }
  EXPECT_GT(moved, 10);
}

TEST(RetryAfter, SpreadsClientsWithinTheJitterRange) {
  const Nanos wait = std::chrono::seconds(10);
  std::map<int64_t, int> histogram;
  double sum = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t s = RetryAfterSeconds(wait, "client-" + std::to_string(i), 0.5, 0);
    ASSERT_GE(s, 10);
    ASSERT_LE(s, 15);
    ++histogram[s];
    sum += static_cast<double>(s);
  }
  // ceil(10 s + up to 5 s): 11..15 (10 only when the offset is exactly 0).
  EXPECT_GE(histogram.size(), 5u);
  const double mean = sum / 2000;
  EXPECT_GT(mean, 12.5);
  EXPECT_LT(mean, 13.5);
  for (int i = 0; i < 1000; ++i) {
    const double u = JitterUnit("x" + std::to_string(i), 0);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(RetryAfter, NeverEarlierThanTheRealWait) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 5000; ++i) {
    const Nanos wait(static_cast<int64_t>(rng() % 100'000'000'000ULL));
    const double jitter = static_cast<double>(rng() % 100) / 100.0;
    const int64_t s = RetryAfterSeconds(wait, std::to_string(rng()), jitter, 0);
    ASSERT_GE(s * 1'000'000'000, wait.count());
    ASSERT_LE(static_cast<double>(s),
              std::ceil(static_cast<double>(wait.count()) * (1 + jitter) / 1e9) + 1);
  }
  EXPECT_EQ(RetryAfterSeconds(Nanos(300'000'000), "a", 0, 0), 1);
  EXPECT_EQ(RetryAfterSeconds(std::chrono::seconds(7), "a", 0, 0), 7);
  EXPECT_EQ(RetryAfterSeconds(Nanos(0), "a", 0.5, 0), 0);
  EXPECT_EQ(RetryAfterSeconds(Decision::kNever, "a", 0.5, 0), -1);
  EXPECT_GT(RetryAfterSeconds(Nanos(INT64_MAX - 1), "a", 10, 0), 0);  // saturates, no overflow
}

TEST(Problem, QuotaExceededBody) {
  const std::string violated[] = {"free"};
  auto body = nlohmann::json::parse(ProblemJson(ProblemKind::kQuotaExceeded,
                                                "https://iana.org/assignments/http-problem-types#",
                                                violated, "slow down", 3));
  EXPECT_EQ(body["type"], "https://iana.org/assignments/http-problem-types#quota-exceeded");
  EXPECT_EQ(body["status"], 429);
  EXPECT_EQ(body["violated-policies"], nlohmann::json::array({"free"}));
  EXPECT_EQ(body["detail"], "slow down");
  EXPECT_EQ(body["retry-after"], 3);
  EXPECT_TRUE(body.contains("title"));
  auto unavailable = nlohmann::json::parse(
      ProblemJson(ProblemKind::kTemporaryReducedCapacity, "urn:x#", {}, "", 0));
  EXPECT_EQ(unavailable["type"], "urn:x#temporary-reduced-capacity");
  EXPECT_EQ(unavailable["status"], 503);
  EXPECT_FALSE(unavailable.contains("violated-policies"));
}

// ProblemJson's body as the nlohmann tree it replaced rendered it (issue 32):
// the same bytes for every kind and for text that needs escaping.
std::string ProblemJsonReference(ProblemKind kind, std::string_view type_base,
                                 std::span<const std::string> violated, std::string_view detail,
                                 int64_t retry_after_seconds) {
  nlohmann::json body;
  if (kind == ProblemKind::kForbidden) {
    body["type"] = "about:blank";
    body["title"] = "Forbidden";
    body["status"] = 403;
    if (!detail.empty()) body["detail"] = std::string(detail);
    auto& list = body["violated-policies"] = nlohmann::json::array();
    for (const std::string& p : violated) list.push_back(p);
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  const bool quota = kind == ProblemKind::kQuotaExceeded;
  body["type"] = std::string(type_base) + (quota ? "quota-exceeded" : "temporary-reduced-capacity");
  body["title"] = quota ? "Request cannot be satisfied as assigned quota has been exceeded"
                        : "Temporary reduced capacity";
  body["status"] = quota ? 429 : 503;
  if (!detail.empty()) body["detail"] = std::string(detail);
  if (!violated.empty()) {
    auto& list = body["violated-policies"] = nlohmann::json::array();
    for (const std::string& p : violated) list.push_back(p);
  }
  if (retry_after_seconds > 0) body["retry-after"] = retry_after_seconds;
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(Problem, BodyBytesMatchTheJsonTree) {
  const std::vector<std::string> texts = {"",
                                          "slow down",
                                          "quote \" and back\\slash",
                                          "tab\tnew\nline\r\b\f",
                                          std::string("nul\0and\x01\x1f\x7f", 10),
                                          "caf\xc3\xa9 \xe2\x82\xac",
                                          "bad \xff\xfe utf-8",
                                          "policy 'per-ip' exceeded; retry after 3 s"};
  for (ProblemKind kind : {ProblemKind::kQuotaExceeded, ProblemKind::kTemporaryReducedCapacity,
                           ProblemKind::kForbidden}) {
    for (const std::string& text : texts) {
      for (const std::string_view base :
           {"https://iana.org/assignments/http-problem-types#", "urn:\"odd\"\\#"}) {
        for (const int64_t retry : {int64_t{0}, int64_t{7}}) {
          const std::vector<std::string> none;
          const std::vector<std::string> some = {"free", text, "b\"c"};
          for (const std::vector<std::string>* violated : {&none, &some}) {
            SCOPED_TRACE(::testing::Message() << static_cast<int>(kind) << " [" << text << "] "
                                              << base << " " << retry << " " << violated->size());
            EXPECT_EQ(ProblemJson(kind, base, *violated, text, retry),
                      ProblemJsonReference(kind, base, *violated, text, retry));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tollgate
