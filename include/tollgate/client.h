// Client-side helpers: read what a rate-limited server said, and retry politely.
//
//   ParseRetryAfter()        Retry-After as delay-seconds or HTTP-date (RFC 9110 §10.2.3)
//   ParseRateLimitHeaders()  RateLimit / RateLimit-Policy
//   (draft-ietf-httpapi-ratelimit-headers-11),
//                            the older -07 dictionary and -03 trio, and the de-facto X-RateLimit-*
//   RetryPolicy              bounded retries with exponential backoff and full jitter that never
//                            retries earlier than the server's Retry-After
//   PaceDelay()              how long to wait before the next request so a client spreads its
//                            remaining quota instead of running into a 429
//
// Nothing here does I/O or reads a clock by itself: callers pass the wall time
// (for HTTP-dates) and RetryPolicy takes an injected Clock, so all of it is
// deterministic under a ManualClock. examples/client/ shows it driving libcurl.
//
// Thread safety: the free functions are pure and safe from any thread.
// RetryPolicy is a per-request object: not safe for concurrent use; make one per
// logical request (they are cheap).
// Ownership: parsers copy what they keep; inputs are borrowed for the call only.
// Errors: malformed or oversized fields are ignored (as the RateLimit draft asks
// of clients): the result then simply lacks that information. Nothing throws.
#ifndef TOLLGATE_CLIENT_H_
#define TOLLGATE_CLIENT_H_

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/request.h"

namespace tollgate {

// ---------------------------------------------------------------------------
// Dates and Retry-After

// Seconds since the Unix epoch for an HTTP-date: IMF-fixdate
// ("Sun, 06 Nov 1994 08:49:37 GMT") and, as RFC 9110 asks recipients, the
// obsolete RFC 850 and asctime forms. nullopt when malformed.
std::optional<int64_t> ParseHttpDate(std::string_view text);
// The IMF-fixdate form of `unix_seconds` (what servers should send).
std::string FormatHttpDate(int64_t unix_seconds);

// The wait a Retry-After value asks for, relative to `now_wall_ns` (Clock::WallNow).
// Delay-seconds are taken as is (capped at kMaxRetryAfter); an HTTP-date in the
// past yields zero. nullopt when the value is malformed.
inline constexpr Nanos kMaxRetryAfter = std::chrono::hours(24 * 365);
std::optional<Nanos> ParseRetryAfter(std::string_view value, int64_t now_wall_ns);

// ---------------------------------------------------------------------------
// RateLimit fields

enum class RateLimitSource {
  kNone,        // the response carried no rate-limit information
  kDraft11,     // RateLimit + RateLimit-Policy structured-field lists (draft -08 .. -11)
  kDraft07,     // RateLimit: limit=100, remaining=50, reset=5 (one dictionary)
  kDraft03,     // RateLimit-Limit / -Remaining / -Reset (drafts -00 .. -06)
  kXRateLimit,  // X-RateLimit-Limit / -Remaining / -Reset (GitHub and many others)
};
std::string_view RateLimitSourceName(RateLimitSource source);

// How X-RateLimit-Reset is encoded: vendors disagree. kAuto takes values above
// 10^12 as epoch milliseconds, above 10^9 as epoch seconds (GitHub), else delta seconds.
enum class ResetEncoding { kAuto, kDeltaSeconds, kEpochSeconds, kDeltaMillis, kEpochMillis };

struct RateLimitParseOptions {
  ResetEncoding x_reset = ResetEncoding::kAuto;
};

// One quota policy as the server described it. Fields the server did not send
// are nullopt / empty.
struct RateLimitQuota {
  std::string name;                       // the policy name ("default", "per-key"); may be empty
  std::optional<int64_t> quota;           // q / limit: quota units per window
  std::optional<int64_t> window_seconds;  // w
  std::string quota_unit = "requests";    // qu
  std::optional<int64_t> remaining;       // r / remaining
  std::optional<Nanos> reset;             // t / reset: until the quota is restored (<= 2^32 s)
  std::string partition_key;              // pk, decoded bytes
};

struct RateLimitInfo {
  RateLimitSource source = RateLimitSource::kNone;
  // One entry per policy, RateLimit and RateLimit-Policy members merged by name,
  // in the order the server listed them. Bounded to kMaxQuotas.
  std::vector<RateLimitQuota> quotas;
  // Retry-After, when present and well formed.
  std::optional<Nanos> retry_after;

  static constexpr size_t kMaxQuotas = 32;

  // The quota closest to running out (lowest remaining, then longest reset), or null.
  const RateLimitQuota* Tightest() const;
};

// Reads every rate-limit field of a response. Header names compare
// case-insensitively; several lines of one field are combined as RFC 9110 says.
// Fields longer than 8 KiB are ignored.
RateLimitInfo ParseRateLimitHeaders(std::span<const HeaderPair> headers, int64_t now_wall_ns,
                                    const RateLimitParseOptions& options = {});

// ---------------------------------------------------------------------------
// Retrying

struct RetryOptions {
  int max_attempts = 4;  // attempts in total, the first included (>= 1)
  Nanos base_delay = std::chrono::milliseconds(200);  // backoff of the first retry
  Nanos max_backoff = std::chrono::seconds(20);       // cap of one computed backoff
  Nanos max_total =
      std::chrono::seconds(60);        // no retry would start later than this after the first
  bool retry_transport_errors = true;  // connection refused / reset / timed out
  // Statuses worth retrying. 429 and 503 carry Retry-After; 502/504 are gateway hiccups.
  std::vector<int> retry_statuses = {429, 503, 502, 504};
};

struct RetryDecision {
  bool retry = false;
  Nanos delay{0};           // wait this long before the next attempt (when retry)
  std::string_view reason;  // "backoff", "retry-after", "quota-reset", or why we give up
};

// Decides, after each failed attempt, whether and when to try again.
//
// Delay = max(floor, full-jitter backoff), where backoff = uniform[0, min(max_backoff,
// base_delay * 2^(retry-1))] and floor is Retry-After when present, else the reset
// of an exhausted quota (RateLimit r=0), else zero. So a retry never starts earlier
// than the server asked, and clients that were told the same thing still spread out.
// It gives up when attempts run out, when the status is not retryable, when the
// server's wait would end past max_total, or when the wait is kNever-like (beyond
// kMaxRetryAfter).
class RetryPolicy {
 public:
  // `clock` is not owned and must outlive the policy. `seed` feeds the jitter.
  RetryPolicy(RetryOptions options, const Clock& clock, uint64_t seed);

  // Call after every attempt that got a response (any status).
  RetryDecision OnResponse(int http_status, const RateLimitInfo& info);
  // Call after an attempt that got no response.
  RetryDecision OnTransportError();

  int attempts() const { return attempts_; }
  // Starts a new logical request: attempt counter and time budget restart.
  void Reset();

 private:
  RetryDecision Next(Nanos floor, std::string_view floor_reason);

  RetryOptions options_;
  const Clock& clock_;
  std::mt19937_64 rng_;
  int attempts_ = 0;
  int64_t started_ns_ = 0;
};

// ---------------------------------------------------------------------------
// Pacing

struct PaceOptions {
  // Start spreading requests once remaining <= this fraction of the quota
  // (1.0 = always pace; 0 = only wait when nothing remains).
  double below_fraction = 0.5;
};

// How long to wait before the next request, judged by the tightest quota:
// nothing remaining -> its reset; remaining under the threshold -> reset / (remaining + 1),
// which spreads what is left evenly over the time to reset; otherwise zero.
// A Retry-After in `info` always wins as a floor.
Nanos PaceDelay(const RateLimitInfo& info, const PaceOptions& options = {});

}  // namespace tollgate

#endif  // TOLLGATE_CLIENT_H_
