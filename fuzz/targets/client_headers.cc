// Fuzz target: the client side's reading of a server's answer
// (src/client: HTTP-date, Retry-After, RateLimit / RateLimit-Policy and the
// older drafts, X-RateLimit-*, RFC 9651 structured fields), then the retry
// and pacing decisions taken from it.
//
// Input: response header lines "Name: value" (a server's, so anything).
// Properties: an HTTP-date that parses re-formats to a date that parses to
// the same second; Retry-After is within [0, kMaxRetryAfter]; at most
// kMaxQuotas quotas, none with negative numbers or reset; structured-field
// members and parameters within their bounds; PaceDelay and RetryPolicy
// never wait a negative time or past the policy's limits.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/structured_fields.h"
#include "fuzz_input.h"
#include "tollgate/client.h"

namespace {

using tollgate::Nanos;
using tollgate::fuzz::Quote;

constexpr int64_t kNowNs = 1'700'000'000'000'000'000LL;

void CheckDate(std::string_view text) {
  const auto t = tollgate::ParseHttpDate(text);
  if (!t) return;
  const std::string formatted = tollgate::FormatHttpDate(*t);
  const auto again = tollgate::ParseHttpDate(formatted);
  FUZZ_CHECK(again && *again == *t,
             "date does not round-trip: " + Quote(text) + " -> " + Quote(formatted));
}

void CheckRetryAfter(std::string_view text) {
  const auto wait = tollgate::ParseRetryAfter(text, kNowNs);
  if (!wait) return;
  FUZZ_CHECK(wait->count() >= 0 && *wait <= tollgate::kMaxRetryAfter,
             "Retry-After out of range for " + Quote(text));
}

void CheckStructured(std::string_view text) {
  if (auto list = tollgate::sf::ParseList(text)) {
    FUZZ_CHECK(list->size() <= tollgate::sf::kMaxMembers, "too many list members");
    for (const auto& item : *list) {
      FUZZ_CHECK(item.params.size() <= tollgate::sf::kMaxParams, "too many parameters");
    }
  }
  if (auto dict = tollgate::sf::ParseDictionary(text)) {
    FUZZ_CHECK(dict->size() <= tollgate::sf::kMaxMembers, "too many dictionary members");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::fuzz::Input in(data, size);
  std::vector<std::string> names, values;
  while (!in.empty() && names.size() < 32) {
    const std::string_view line = in.Until('\n');
    const size_t colon = line.find(':');
    std::string_view value = colon == std::string_view::npos ? line : line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    names.emplace_back(colon == std::string_view::npos ? std::string_view("RateLimit")
                                                       : line.substr(0, colon));
    values.emplace_back(value);
  }
  std::vector<tollgate::HeaderPair> headers;
  for (size_t i = 0; i < names.size(); ++i) {
    headers.emplace_back(names[i], values[i]);
    CheckDate(values[i]);
    CheckRetryAfter(values[i]);
    CheckStructured(values[i]);
  }
  for (auto encoding : {tollgate::ResetEncoding::kAuto, tollgate::ResetEncoding::kEpochMillis}) {
    tollgate::RateLimitParseOptions options;
    options.x_reset = encoding;
    const tollgate::RateLimitInfo info = tollgate::ParseRateLimitHeaders(headers, kNowNs, options);
    FUZZ_CHECK(info.quotas.size() <= tollgate::RateLimitInfo::kMaxQuotas, "too many quotas");
    for (const auto& q : info.quotas) {
      FUZZ_CHECK(!q.quota || *q.quota >= 0, "negative quota");
      FUZZ_CHECK(!q.remaining || *q.remaining >= 0, "negative remaining");
      FUZZ_CHECK(!q.window_seconds || *q.window_seconds >= 0, "negative window");
      FUZZ_CHECK(!q.reset || q.reset->count() >= 0, "negative reset");
    }
    if (info.retry_after) {
      FUZZ_CHECK(info.retry_after->count() >= 0 && *info.retry_after <= tollgate::kMaxRetryAfter,
                 "Retry-After out of range");
    }
    const Nanos pace = tollgate::PaceDelay(info);
    FUZZ_CHECK(pace.count() >= 0, "negative pacing delay");

    tollgate::ManualClock clock;
    tollgate::RetryOptions retry;
    tollgate::RetryPolicy policy(retry, clock, 42);
    for (int status : {429, 503, 200}) {
      const tollgate::RetryDecision d = policy.OnResponse(status, info);
      FUZZ_CHECK(d.delay.count() >= 0, "negative retry delay");
      if (d.retry) {
        FUZZ_CHECK(d.delay <= retry.max_total, "a retry later than max_total");
        if (info.retry_after) {
          FUZZ_CHECK(d.delay >= *info.retry_after, "a retry before Retry-After");
        }
      }
    }
  }
  return 0;
}
