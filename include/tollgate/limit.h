// Limit: a validated, immutable description of one rate limit, with the
// fixed-point constants every algorithm and every store needs precomputed.
//
// Arithmetic is exact integer arithmetic (see docs/architecture.md, "Exactness"):
//  - a bucket's rate is one token per interval_ns, in whole nanoseconds. Given
//    as a count per period (LimitSpec::count, ::period) it is
//    interval_ns = period / count, exact whenever count divides the period in
//    ns (1/hour, 3 per 30 days, 1e9 per day) and otherwise rounded up by less
//    than 1 ns a token (7 per 13 s: 1857142858 ns, 6 ns per 13 s slow). Given
//    as tokens per second (a double), interval_ns = 1e9 / rate, snapped to the
//    nearest whole ns when the double's own rounding is all that separates
//    them (1/3600.0 gives 3600 s exactly), else rounded up: never faster than
//    asked;
//  - time is int64 nanoseconds; `cost` tokens take cost * interval_ns, the
//    bucket holds burst * interval_ns, so a full bucket grants exactly `burst`.
// Create() refuses limits whose constants would not fit (and so could not be
// represented exactly in Redis' Lua doubles either).
//
// Thread safety: immutable after Create(); share freely.
#ifndef TOLLGATE_LIMIT_H_
#define TOLLGATE_LIMIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/calendar.h"
#include "tollgate/clock.h"
#include "tollgate/status.h"

namespace tollgate {

// The algorithms, declared once: enumerator, value, configuration name.
#define TOLLGATE_ALGORITHMS(X)                                                                 \
  X(kTokenBucket, 0, "token_bucket")     /* continuous lazy refill (GCRA form): the default */ \
  X(kLeakyBucket, 1, "leaky_bucket")     /* meter (max_delay 0) or shaper (max_delay > 0) */   \
  X(kFixedWindow, 2, "fixed_window")     /* `burst` per `window`, reset at boundaries */       \
  X(kSlidingWindow, 3, "sliding_window") /* weighted two-window counter (approximate) */       \
  X(kSlidingLog, 4, "sliding_log")       /* exact sliding window: a log of grants */

enum class Algorithm : uint8_t {
#define TOLLGATE_ALGORITHM_ENUM(e, v, name) e = v,
  TOLLGATE_ALGORITHMS(TOLLGATE_ALGORITHM_ENUM)
#undef TOLLGATE_ALGORITHM_ENUM
};

std::string_view AlgorithmName(Algorithm a);  // "token_bucket", "leaky_bucket", ...
// Every name, in declaration order, for error messages: "token_bucket, leaky_bucket, ...,
// sliding_log".
std::string_view AlgorithmNameList();

// True for the algorithms that count per window (fixed, sliding, sliding log): their limit is
// a count per period, the buckets' a rate and a burst.
constexpr bool IsWindowAlgorithm(Algorithm a) {
  return a == Algorithm::kFixedWindow || a == Algorithm::kSlidingWindow ||
         a == Algorithm::kSlidingLog;
}
// Parses the names above; returns false for an unknown name.
bool ParseAlgorithm(std::string_view name, Algorithm* out);

struct LimitSpec {
  Algorithm algorithm = Algorithm::kTokenBucket;
  // Tokens per second (token and leaky bucket). For window algorithms it is
  // derived as burst / window and need not be set.
  double rate = 0;
  // The exact alternative to `rate` (token and leaky bucket): `count` tokens
  // per `period`, one every period / count ns. Set both, and leave rate 0.
  int64_t count = 0;
  Nanos period{0};
  // Capacity in tokens: bucket size (token bucket), queue size (leaky bucket),
  // allowed cost per window (window algorithms).
  int64_t burst = 0;
  // Window length for the window algorithms.
  Nanos window{0};
  // A fixed window aligned to the calendar (day, week, month in a time zone)
  // instead of the Unix epoch's grid of `window`; leave window 0.
  std::shared_ptr<const Calendar> calendar = nullptr;
  // Leaky bucket shaper: the longest a request may be told to wait. Zero makes
  // the leaky bucket a meter. Negative means "burst * interval" (nginx-like).
  Nanos max_delay{0};
};

// One problem with a LimitSpec: which field and why, e.g.
// {"burst", "must be at least 1 (got 0)"}.
struct LimitError {
  std::string field;
  std::string message;
};

class Limit {
 public:
  static constexpr int64_t kMaxBurst = int64_t{1} << 40;
  static constexpr double kMinRate = 1e-6;  // one token in ~11.6 days (count/period: 366 days)
  static constexpr double kMaxRate = 1e9;   // one token per nanosecond
  // Counters of the window algorithms are packed into the 64-bit state word:
  // a sliding window keeps two, a fixed window (a quota) one of up to 2^40.
  static constexpr int64_t kMaxWindowBurst = (int64_t{1} << 20) - 1;
  static constexpr int64_t kMaxFixedWindowBurst = kMaxBurst;

  // Every problem with `spec`, empty when it is valid.
  static std::vector<LimitError> Validate(const LimitSpec& spec);
  // A Limit, or kInvalidArgument naming the first problem ("burst: must be ...").
  static Result<Limit> Create(const LimitSpec& spec);

  Algorithm algorithm() const { return algorithm_; }
  int64_t burst() const { return burst_; }
  // The rate in micro-tokens per second, 1e15 / interval_ns rounded to the
  // nearest: for display and for deriving other limits, never for deciding.
  int64_t rate_micro() const { return rate_micro_; }
  double rate() const { return static_cast<double>(rate_micro_) / 1e6; }
  // The count and period the limit was given as; 0 when given as a rate.
  int64_t count() const { return count_; }
  int64_t period_ns() const { return period_ns_; }
  // The window length; for a calendar quota its longest window (25 h a day).
  int64_t window_ns() const { return window_ns_; }
  // The calendar a fixed window is aligned to, or null (the epoch's grid).
  const Calendar* calendar() const { return calendar_.get(); }
  const std::shared_ptr<const Calendar>& shared_calendar() const { return calendar_; }
  // Emission interval of one token, ns (see the top of this file).
  int64_t interval_ns() const { return interval_ns_; }
  // The rate actually enforced: 1e9 / interval_ns() tokens per second.
  double effective_rate() const { return 1e9 / static_cast<double>(interval_ns_); }
  // Burst tolerance: burst * interval_ns, the time `burst` tokens take to refill.
  int64_t tolerance_ns() const { return tolerance_ns_; }
  int64_t max_delay_ns() const { return max_delay_ns_; }

  // cost * interval_ns: the time `cost` tokens take to refill. Saturates far
  // above any tolerance for absurd costs (callers reject cost > burst first).
  int64_t IncrementFor(int64_t cost) const {
    int64_t product;
    if (cost <= 0) return 0;
    if (__builtin_mul_overflow(cost, interval_ns_, &product)) return int64_t{1} << 62;
    return product;
  }
  // Whole tokens that refill in `ns` nanoseconds: floor(ns / interval_ns),
  // by a precomputed reciprocal (no hardware divide on the hot path).
  int64_t TokensIn(int64_t ns) const {
    if (ns <= 0) return 0;
    const uint64_t n = static_cast<uint64_t>(ns), d = static_cast<uint64_t>(interval_ns_);
    if (reciprocal_ == 0) return static_cast<int64_t>(n / d);  // d is a power of 2: a shift
    // q is floor(n / d) or at most 2 below it.
    uint64_t q = static_cast<uint64_t>((static_cast<unsigned __int128>(n) * reciprocal_) >> 64);
    while ((q + 1) * d <= n) ++q;
    return static_cast<int64_t>(q);
  }

  // "token_bucket rate=10/s burst=20", "token_bucket count=1 period=1h burst=1"
  // - for logs and explain output.
  std::string ToString() const;

  friend bool operator==(const Limit&, const Limit&) = default;

 private:
  Limit() = default;

  Algorithm algorithm_ = Algorithm::kTokenBucket;
  int64_t burst_ = 0;
  int64_t rate_micro_ = 0;
  int64_t window_ns_ = 0;
  int64_t interval_ns_ = 0;
  int64_t tolerance_ns_ = 0;
  int64_t max_delay_ns_ = 0;
  int64_t count_ = 0;
  int64_t period_ns_ = 0;
  uint64_t reciprocal_ = 0;  // floor(2^64 / interval_ns), 0 when interval_ns is a power of 2
  // Compared by identity: limits parsed from one rule share it.
  std::shared_ptr<const Calendar> calendar_;
};

}  // namespace tollgate

#endif  // TOLLGATE_LIMIT_H_
