// RetryPolicy and PaceDelay: when to send the next request.
#include <algorithm>

#include "tollgate/client.h"

namespace tollgate {

RetryPolicy::RetryPolicy(RetryOptions options, const Clock& clock, uint64_t seed)
    : options_(std::move(options)), clock_(clock), rng_(seed) {
  options_.max_attempts = std::max(1, options_.max_attempts);
  options_.base_delay = std::max(Nanos(0), options_.base_delay);
  options_.max_backoff = std::max(options_.base_delay, options_.max_backoff);
  Reset();
}

void RetryPolicy::Reset() {
  attempts_ = 0;
  started_ns_ = clock_.Now();
}

RetryDecision RetryPolicy::OnResponse(int http_status, const RateLimitInfo& info) {
  ++attempts_;
  if (http_status < 400) return {false, Nanos(0), "success"};
  const auto& statuses = options_.retry_statuses;
  if (std::find(statuses.begin(), statuses.end(), http_status) == statuses.end())
    return {false, Nanos(0), "status not retryable"};
  if (info.retry_after) return Next(*info.retry_after, "retry-after");
  // Without Retry-After, an exhausted quota's reset is the earliest useful time.
  if (const RateLimitQuota* q = info.Tightest(); q && *q->remaining == 0 && q->reset)
    return Next(*q->reset, "quota-reset");
  return Next(Nanos(0), "backoff");
}

RetryDecision RetryPolicy::OnTransportError() {
  ++attempts_;
  if (!options_.retry_transport_errors) return {false, Nanos(0), "transport error"};
  return Next(Nanos(0), "backoff");
}

RetryDecision RetryPolicy::Next(Nanos floor, std::string_view floor_reason) {
  if (attempts_ >= options_.max_attempts) return {false, Nanos(0), "attempts exhausted"};
  if (floor >= kMaxRetryAfter) return {false, Nanos(0), "server asked to wait too long"};
  // Full jitter: uniform in [0, min(cap, base * 2^(retry-1))].
  const int shift = std::min(attempts_ - 1, 40);
  Nanos ceiling = options_.max_backoff;
  if (options_.base_delay.count() > 0 &&
      options_.base_delay.count() <= (options_.max_backoff.count() >> shift))
    ceiling = Nanos(options_.base_delay.count() << shift);
  std::uniform_int_distribution<int64_t> jitter(0, ceiling.count());
  const Nanos backoff(jitter(rng_));
  RetryDecision d;
  d.retry = true;
  d.delay = std::max(floor, backoff);
  d.reason = floor > backoff ? floor_reason : "backoff";
  const Nanos elapsed(clock_.Now() - started_ns_);
  if (elapsed + d.delay > options_.max_total) return {false, Nanos(0), "time budget exhausted"};
  return d;
}

Nanos PaceDelay(const RateLimitInfo& info, const PaceOptions& options) {
  Nanos delay = info.retry_after.value_or(Nanos(0));
  const RateLimitQuota* q = info.Tightest();
  if (q == nullptr || !q->reset) return delay;
  const int64_t remaining = *q->remaining;
  if (remaining == 0) return std::max(delay, *q->reset);
  // Without a known quota, pace only when explicitly asked to always pace.
  const double quota = q->quota ? static_cast<double>(*q->quota) : 0.0;
  const bool low = quota > 0 ? static_cast<double>(remaining) <= options.below_fraction * quota
                             : options.below_fraction >= 1.0;
  if (!low) return delay;
  return std::max(delay, Nanos(q->reset->count() / (remaining + 1)));
}

}  // namespace tollgate
