#include "policy/rule_state.h"

#include <algorithm>

namespace tollgate {

void RuleState::Roll(const RollbackConfig& config, int64_t now_ns) {
  int64_t start = window_start.load(std::memory_order_acquire);
  if (start != INT64_MIN && now_ns >= start && now_ns - start < config.window_ns) return;
  if (!window_start.compare_exchange_strong(start, now_ns, std::memory_order_acq_rel)) return;
  // The window that ends now is the next one's upstream baseline, if it saw enough.
  const int64_t answered = window_upstream.exchange(0, std::memory_order_relaxed);
  const int64_t errors = window_upstream_errors.exchange(0, std::memory_order_relaxed);
  if (start != INT64_MIN && answered >= config.min_requests && answered > 0) {
    baseline_upstream_ppm.store(errors * 1'000'000 / answered, std::memory_order_relaxed);
  }
  window_total.store(0, std::memory_order_relaxed);
  window_rejected.store(0, std::memory_order_relaxed);
  window_slow.store(0, std::memory_order_relaxed);
  window_upstream_timed.store(0, std::memory_order_relaxed);
  window_upstream_slow.store(0, std::memory_order_relaxed);
}

bool RuleState::Trip(RollbackTrigger why) {
  bool expected = false;
  if (!tripped.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return false;
  trigger.store(why, std::memory_order_release);
  trips[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  return true;
}

RollbackTrigger RuleState::Record(const RollbackConfig& config, bool rejected_now,
                                  int64_t latency_ns, int64_t now_ns) {
  Roll(config, now_ns);
  const int64_t total = window_total.fetch_add(1, std::memory_order_relaxed) + 1;
  const int64_t rejected_count = rejected_now
                                     ? window_rejected.fetch_add(1, std::memory_order_relaxed) + 1
                                     : window_rejected.load(std::memory_order_relaxed);
  const bool slow_now = config.max_p99_ns > 0 && latency_ns > config.max_p99_ns;
  const int64_t slow = slow_now ? window_slow.fetch_add(1, std::memory_order_relaxed) + 1
                                : window_slow.load(std::memory_order_relaxed);
  if (total < config.min_requests) return RollbackTrigger::kNone;
  if (rejected_now && config.max_reject_ratio > 0 &&
      static_cast<double>(rejected_count) > config.max_reject_ratio * static_cast<double>(total)) {
    return Trip(RollbackTrigger::kRejectRatio) ? RollbackTrigger::kRejectRatio
                                               : RollbackTrigger::kNone;
  }
  // p99 > max  <=>  more than 1% of the samples exceed max.
  if (slow_now && slow * 100 > total) {
    return Trip(RollbackTrigger::kLatencyP99) ? RollbackTrigger::kLatencyP99
                                              : RollbackTrigger::kNone;
  }
  return RollbackTrigger::kNone;
}

RollbackTrigger RuleState::RecordUpstream(const RollbackConfig& config, bool server_error,
                                          int64_t latency_ns, int64_t now_ns) {
  if (config.max_upstream_error_increase <= 0 && config.max_upstream_p99_ns <= 0) {
    return RollbackTrigger::kNone;
  }
  Roll(config, now_ns);
  if (config.max_upstream_p99_ns > 0 && latency_ns >= 0) {
    const int64_t timed = window_upstream_timed.fetch_add(1, std::memory_order_relaxed) + 1;
    const bool slow_now = latency_ns > config.max_upstream_p99_ns;
    const int64_t slow = slow_now ? window_upstream_slow.fetch_add(1, std::memory_order_relaxed) + 1
                                  : window_upstream_slow.load(std::memory_order_relaxed);
    // p99 > max  <=>  more than 1% of the answers exceed max.
    if (slow_now && timed >= config.min_requests && slow * 100 > timed &&
        Trip(RollbackTrigger::kUpstreamLatencyP99)) {
      return RollbackTrigger::kUpstreamLatencyP99;
    }
  }
  if (config.max_upstream_error_increase <= 0) return RollbackTrigger::kNone;
  const int64_t answered = window_upstream.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!server_error) return RollbackTrigger::kNone;
  const int64_t errors = window_upstream_errors.fetch_add(1, std::memory_order_relaxed) + 1;
  if (answered < config.min_requests) return RollbackTrigger::kNone;
  const int64_t base_ppm = std::max<int64_t>(0, baseline_upstream_ppm.load());
  const double ratio = static_cast<double>(errors) / static_cast<double>(answered);
  if (ratio - static_cast<double>(base_ppm) / 1e6 <= config.max_upstream_error_increase) {
    return RollbackTrigger::kNone;
  }
  return Trip(RollbackTrigger::kUpstreamErrors) ? RollbackTrigger::kUpstreamErrors
                                                : RollbackTrigger::kNone;
}

uint64_t RollbackFingerprintOf(std::string_view canonical) {
  constexpr uint64_t kFingerprintSeed = 0x66696e6765727072ULL;  // "fingerpr"
  const uint64_t h = StableHash(canonical, kFingerprintSeed);
  return h == 0 ? 1 : h;
}

void RuleState::ResetGuard() {
  tripped.store(false, std::memory_order_release);
  trigger.store(RollbackTrigger::kNone, std::memory_order_release);
  window_start.store(INT64_MIN, std::memory_order_release);
  window_total.store(0, std::memory_order_relaxed);
  window_rejected.store(0, std::memory_order_relaxed);
  window_slow.store(0, std::memory_order_relaxed);
  window_upstream.store(0, std::memory_order_relaxed);
  window_upstream_errors.store(0, std::memory_order_relaxed);
  window_upstream_timed.store(0, std::memory_order_relaxed);
  window_upstream_slow.store(0, std::memory_order_relaxed);
}

}  // namespace tollgate
