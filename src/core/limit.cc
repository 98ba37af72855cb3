#include "tollgate/limit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "tollgate/period.h"

namespace tollgate {
namespace {

constexpr int64_t kFemto = 1'000'000'000'000'000LL;  // ns per second * micro-tokens per token
// Every time constant must stay below this, so TAT + constants never overflow
// and Redis can hold them exactly in two 2^53 limbs.
constexpr int64_t kMaxTimeConstant = int64_t{1} << 60;
constexpr int64_t kMinWindowNs = 1'000'000;                            // 1 ms
constexpr int64_t kMaxWindowNs = 366LL * 24 * 3600 * 1'000'000'000LL;  // a year
constexpr int64_t kMaxLogBurst = 1'000'000;

using u128 = unsigned __int128;

int64_t CeilDiv(u128 num, u128 den) { return static_cast<int64_t>((num + den - 1) / den); }

// The emission interval of `rate` tokens per second (kMinRate..kMaxRate):
// 1e9 / rate ns, rounded up (never faster than asked) unless it lies within
// the double's own rounding of a whole number, which is what the user meant
// (1 / 3600.0 -> 3600 s, not 3600 s + 1 ns). In 64-bit-mantissa long double,
// the quotient (<= 1e15) is off by at most ~2e-16 relative from the double's
// error, well inside the 1e-15 snap.
int64_t RateInterval(double rate) {
  const long double x = 1e9L / static_cast<long double>(rate);
  const long double nearest = std::nearbyint(x);
  if (std::fabs(x - nearest) <= x * 1e-15L) return static_cast<int64_t>(nearest);
  return static_cast<int64_t>(std::ceil(x));
}

bool HasCountPeriod(const LimitSpec& spec) { return spec.count != 0 || spec.period.count() != 0; }

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// floor(2^64 / d) for TokensIn's multiply-high division; 0 for powers of 2,
// where the plain division is a shift.
uint64_t Reciprocal(int64_t d) {
  const uint64_t u = static_cast<uint64_t>(d);
  if ((u & (u - 1)) == 0) return 0;
  return static_cast<uint64_t>((static_cast<u128>(1) << 64) / u);
}

}  // namespace

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
#define TOLLGATE_ALGORITHM_NAME(e, v, name) \
  case Algorithm::e:                        \
    return name;
    TOLLGATE_ALGORITHMS(TOLLGATE_ALGORITHM_NAME)
#undef TOLLGATE_ALGORITHM_NAME
  }
  return "unknown";
}

std::string_view AlgorithmNameList() {
  static const std::string list = [] {
    std::string out;
#define TOLLGATE_ALGORITHM_LIST(e, v, name) out += (out.empty() ? "" : ", ") + std::string(name);
    TOLLGATE_ALGORITHMS(TOLLGATE_ALGORITHM_LIST)
#undef TOLLGATE_ALGORITHM_LIST
    return out;
  }();
  return list;
}

bool ParseAlgorithm(std::string_view name, Algorithm* out) {
#define TOLLGATE_ALGORITHM_PARSE(e, v, text) \
  if (name == text) {                        \
    *out = Algorithm::e;                     \
    return true;                             \
  }
  TOLLGATE_ALGORITHMS(TOLLGATE_ALGORITHM_PARSE)
#undef TOLLGATE_ALGORITHM_PARSE
  return false;
}

std::vector<LimitError> Limit::Validate(const LimitSpec& spec) {
  std::vector<LimitError> errors;
  auto add = [&](std::string field, std::string message) {
    errors.push_back({std::move(field), std::move(message)});
  };
  const int64_t burst = spec.burst;
  if (burst < 1) add("burst", "must be at least 1 (got " + std::to_string(burst) + ")");

  if (spec.calendar != nullptr && spec.algorithm != Algorithm::kFixedWindow) {
    add("calendar",
        "is only used by fixed_window (got " + std::string(AlgorithmName(spec.algorithm)) + ")");
  }
  if (IsWindowAlgorithm(spec.algorithm)) {
    if (HasCountPeriod(spec)) {
      add(spec.count != 0 ? "count" : "period",
          "is for token_bucket and leaky_bucket; " + std::string(AlgorithmName(spec.algorithm)) +
              " takes burst (the count) and window (the period)");
    }
    const int64_t w = spec.window.count();
    if (spec.calendar != nullptr) {
      if (w != 0) add("window", "set a window or a calendar, not both");
    } else if (w < kMinWindowNs || w > kMaxWindowNs) {
      add("window", "must be between 1ms and 366 days (got " + std::to_string(w) + "ns)");
    }
    const int64_t max_burst = spec.algorithm == Algorithm::kSlidingLog    ? kMaxLogBurst
                              : spec.algorithm == Algorithm::kFixedWindow ? kMaxFixedWindowBurst
                                                                          : kMaxWindowBurst;
    if (burst > max_burst) {
      add("burst", "must be at most " + std::to_string(max_burst) + " for " +
                       std::string(AlgorithmName(spec.algorithm)) + " (got " +
                       std::to_string(burst) + ")");
    }
    return errors;
  }

  u128 interval = 0;
  std::string rate_text;
  if (HasCountPeriod(spec)) {
    const int64_t count = spec.count, period = spec.period.count();
    bool ok = true;
    if (spec.rate != 0) {
      add("rate", "set a rate or a count and period, not both");
      ok = false;
    }
    if (count < 1 || count > kMaxBurst) {
      add("count", "must be between 1 and 2^40 (got " + std::to_string(count) + ")");
      ok = false;
    }
    if (period < 1 || period > kMaxPeriod.count()) {
      add("period", "must be between 1ns and 366 days (got " + std::to_string(period) + "ns)");
      ok = false;
    } else if (ok && count > period) {
      add("count", "more than one per nanosecond (" + std::to_string(count) + " per " +
                       FormatPeriod(spec.period) + ")");
      ok = false;
    }
    if (!ok) return errors;
    interval = CeilDiv(static_cast<u128>(period), static_cast<u128>(count));
    rate_text = std::to_string(count) + " per " + FormatPeriod(spec.period);
  } else {
    if (!std::isfinite(spec.rate) || spec.rate < kMinRate || spec.rate > kMaxRate) {
      add("rate", "must be a number between 0.000001 and 1e9 tokens per second (got " +
                      Num(spec.rate) + ")");
      return errors;
    }
    interval = static_cast<u128>(RateInterval(spec.rate));
    rate_text = Num(spec.rate) + "/s";
  }
  if (burst > kMaxBurst) {
    add("burst", "must be at most 2^40 (got " + std::to_string(burst) + ")");
    return errors;
  }
  if (burst >= 1 && static_cast<u128>(burst) * interval >= static_cast<u128>(kMaxTimeConstant)) {
    add("burst", "refilling " + std::to_string(burst) + " tokens at " + rate_text +
                     " takes longer than 36 years; lower burst or raise the rate");
  }
  if (spec.algorithm == Algorithm::kLeakyBucket && spec.max_delay.count() >= kMaxTimeConstant) {
    add("max_delay", "must be below 36 years");
  }
  return errors;
}

Result<Limit> Limit::Create(const LimitSpec& spec) {
  auto errors = Validate(spec);
  if (!errors.empty()) {
    return InvalidArgument(errors.front().field + ": " + errors.front().message);
  }
  Limit l;
  l.algorithm_ = spec.algorithm;
  l.burst_ = spec.burst;
  if (IsWindowAlgorithm(spec.algorithm)) {
    l.calendar_ = spec.calendar;
    l.window_ns_ = spec.calendar ? spec.calendar->max_window_ns() : spec.window.count();
    // The average rate burst/window, for headers and explain output.
    const u128 rm = static_cast<u128>(spec.burst) * 1'000'000u * 1'000'000'000u /
                    static_cast<u128>(l.window_ns_);
    l.rate_micro_ = rm < 1 ? 1 : static_cast<int64_t>(rm);
    l.interval_ns_ = CeilDiv(kFemto, static_cast<u128>(l.rate_micro_));
    l.tolerance_ns_ = l.window_ns_;
    l.reciprocal_ = Reciprocal(l.interval_ns_);
    return l;
  }
  if (HasCountPeriod(spec)) {
    l.count_ = spec.count;
    l.period_ns_ = spec.period.count();
    l.interval_ns_ = CeilDiv(static_cast<u128>(l.period_ns_), static_cast<u128>(l.count_));
  } else {
    l.interval_ns_ = RateInterval(spec.rate);
  }
  // For display: 1e15 / interval to the nearest, at least 1.
  l.rate_micro_ = std::max<int64_t>(
      1, static_cast<int64_t>((kFemto + static_cast<u128>(l.interval_ns_) / 2) / l.interval_ns_));
  // Whole multiples of the interval: a full bucket grants exactly `burst`.
  l.tolerance_ns_ = spec.burst * l.interval_ns_;
  l.reciprocal_ = Reciprocal(l.interval_ns_);
  if (spec.algorithm == Algorithm::kLeakyBucket) {
    l.max_delay_ns_ = spec.max_delay.count() < 0
                          ? static_cast<int64_t>(static_cast<u128>(spec.burst - 1) *
                                                 static_cast<u128>(l.interval_ns_))
                          : spec.max_delay.count();
  }
  return l;
}

std::string Limit::ToString() const {
  std::string s(AlgorithmName(algorithm_));
  if (calendar_ != nullptr) {
    s += " limit=" + std::to_string(burst_) + " calendar=" + calendar_->ToString();
  } else if (window_ns_ > 0) {
    s += " limit=" + std::to_string(burst_) + " window=" + Num(window_ns_ / 1e9) + "s";
  } else {
    if (count_ > 0) {
      s += " count=" + std::to_string(count_) + " period=" + FormatPeriod(Nanos(period_ns_)) +
           " burst=" + std::to_string(burst_);
    } else {
      s += " rate=" + Num(rate()) + "/s burst=" + std::to_string(burst_);
    }
    if (max_delay_ns_ > 0) s += " max_delay=" + Num(max_delay_ns_ / 1e9) + "s";
  }
  return s;
}

}  // namespace tollgate
