#include "policy/rule_state.h"

namespace tollgate {

bool RuleState::Record(const RollbackConfig& config, bool rejected_now, int64_t now_ns) {
  int64_t start = window_start.load(std::memory_order_acquire);
  if (start == INT64_MIN || now_ns < start || now_ns - start >= config.window_ns) {
    if (window_start.compare_exchange_strong(start, now_ns, std::memory_order_acq_rel)) {
      window_total.store(0, std::memory_order_relaxed);
      window_rejected.store(0, std::memory_order_relaxed);
    }
  }
  const int64_t total = window_total.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!rejected_now) return false;
  const int64_t rejected_count = window_rejected.fetch_add(1, std::memory_order_relaxed) + 1;
  if (total < config.min_requests) return false;
  if (static_cast<double>(rejected_count) <= config.max_reject_ratio * static_cast<double>(total)) {
    return false;
  }
  bool expected = false;
  return tripped.compare_exchange_strong(expected, true, std::memory_order_acq_rel);
}

void RuleState::ResetGuard() {
  tripped.store(false, std::memory_order_release);
  window_start.store(INT64_MIN, std::memory_order_release);
  window_total.store(0, std::memory_order_relaxed);
  window_rejected.store(0, std::memory_order_relaxed);
}

}  // namespace tollgate
