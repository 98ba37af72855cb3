// RuleState: per-rule counters and the rollback guard, kept by rule name for
// the Enforcer's lifetime (so they survive reloads).
//
// The rollback guard counts a rule's enforced decisions and rejections in
// fixed windows of `window_ns`; once a window holds at least `min_requests`
// decisions and rejected / decided > max_reject_ratio, the rule trips to
// shadow until an operator resets it or a reload changes the rule.
//
// Thread safety: counters and the guard are atomics (the window reset is a
// CAS: counts near a window edge may land in either window, which is fine for
// a ratio); `reason` and `fingerprint` are guarded by the Enforcer's mutex.
#ifndef TOLLGATE_SRC_POLICY_RULE_STATE_H_
#define TOLLGATE_SRC_POLICY_RULE_STATE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "policy/policy_impl.h"

namespace tollgate {

struct RuleState {
  explicit RuleState(std::string n) : name(std::move(n)) {}

  const std::string name;
  std::atomic<uint64_t> allowed{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> shadow_rejected{0};
  std::atomic<uint64_t> unenforced{0};
  std::atomic<uint64_t> unavailable{0};
  std::atomic<uint64_t> missing_key{0};
  // Concurrency rules: leases taken, released while live, and released after
  // they had expired (or twice): held now = taken - released - expired, not
  // counting leases handed to clients that never release (/v1/auth, RLS).
  std::atomic<uint64_t> leases_held{0};
  std::atomic<uint64_t> leases_released{0};
  std::atomic<uint64_t> leases_expired{0};
  void NoteRelease(bool live) {
    (live ? leases_released : leases_expired).fetch_add(1, std::memory_order_relaxed);
  }

  std::atomic<bool> tripped{false};
  std::atomic<int64_t> window_start{INT64_MIN};
  std::atomic<int64_t> window_total{0};
  std::atomic<int64_t> window_rejected{0};

  std::string fingerprint;  // guarded by Enforcer::Impl::mu_
  std::string reason;       // guarded by Enforcer::Impl::mu_

  // Records one enforced decision; returns true when this call tripped the guard.
  bool Record(const RollbackConfig& config, bool rejected_now, int64_t now_ns);
  void ResetGuard();
};

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_RULE_STATE_H_
