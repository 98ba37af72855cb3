// RuleState: per-rule counters and the rollback guard, kept by rule name for
// the Enforcer's lifetime (so they survive reloads).
//
// The rollback guard (seed 000) counts a rule's samples in fixed windows of
// `window_ns` and trips the rule to shadow on the first of its configured
// triggers (RollbackConfig) to fire in a window holding at least
// `min_requests` samples of that trigger's kind:
//  - reject ratio: enforced decisions rejected / decided > max_reject_ratio;
//  - latency: more than 1% of the window's decisions took longer than
//    max_p99_ns, which is exactly "the window's p99 is above it" (no histogram);
//  - upstream errors: upstream 5xx / upstream answers of the window, minus the
//    previous window's ratio (when that window held min_requests answers,
//    else 0), > max_upstream_error_increase;
//  - upstream latency: more than 1% of the window's timed upstream answers
//    took longer than max_upstream_p99_ns (the upstream's p99 above it).
// A tripped rule stays in shadow until an operator clears it (here or, with a
// RollbackFleet, on another instance), a reload changes the rule, or (never
// by itself) time passes.
//
// Thread safety: counters and the guard are atomics (the window roll is a CAS:
// samples near a window edge may land in either window, which is fine for a
// ratio); `reason`, `fingerprint` and `rollback` are guarded by the Enforcer's
// mutex.
#ifndef TOLLGATE_SRC_POLICY_RULE_STATE_H_
#define TOLLGATE_SRC_POLICY_RULE_STATE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/policy_impl.h"
#include "tollgate/rule_counters.h"

namespace tollgate {

struct RuleState {
  explicit RuleState(std::string n) : name(std::move(n)) {}

  const std::string name;
  // Every per-rule counter of tollgate/rule_counters.h, one atomic each (allowed,
  // rejected, ..., leases_acquired, ..., rollback_adopted_clears). Leases held
  // now = acquired - released - expired, not counting leases handed to clients
  // that never release (/v1/auth, RLS).
#define TOLLGATE_RULE_STATE_COUNTER(field, label) std::atomic<uint64_t> field{0};
  TOLLGATE_ALL_RULE_COUNTERS(TOLLGATE_RULE_STATE_COUNTER)
#undef TOLLGATE_RULE_STATE_COUNTER
  void NoteRelease(bool live) {
    (live ? leases_released : leases_expired).fetch_add(1, std::memory_order_relaxed);
  }
  // Refunds by refund_on label (few labels a rule; refunds are rare next to
  // decisions, so a mutex is fine).
  std::mutex refunds_mu;
  std::vector<std::pair<std::string, uint64_t>> refunds;  // guarded by refunds_mu
  void CountRefund(std::string_view label);

  std::atomic<bool> tripped{false};
  std::atomic<RollbackTrigger> trigger{RollbackTrigger::kNone};  // why, while tripped
  // Trips by trigger (index = RollbackTrigger); clears and adopted transitions
  // (Enforcer::AdoptRollback) are counters above.
  std::array<std::atomic<uint64_t>, kRollbackTriggerCount> trips{};

  std::atomic<int64_t> window_start{INT64_MIN};
  std::atomic<int64_t> window_total{0};
  std::atomic<int64_t> window_rejected{0};
  std::atomic<int64_t> window_slow{0};
  std::atomic<int64_t> window_upstream{0};
  std::atomic<int64_t> window_upstream_errors{0};
  std::atomic<int64_t> window_upstream_timed{0};  // answers with a latency
  std::atomic<int64_t> window_upstream_slow{0};   // ... above max_upstream_p99_ns
  // The previous window's upstream 5xx ratio in parts per million; -1: none.
  std::atomic<int64_t> baseline_upstream_ppm{-1};

  std::string fingerprint;  // guarded by Enforcer::Impl::mu_
  std::string reason;       // guarded by Enforcer::Impl::mu_
  std::string origin;       // the instance whose trip was adopted; guarded by Enforcer::Impl::mu_
  std::optional<RollbackConfig> rollback;  // the live policy's; guarded by Enforcer::Impl::mu_

  // Records one enforced decision that took `latency_ns`; returns the trigger
  // when this call tripped the guard, else kNone.
  RollbackTrigger Record(const RollbackConfig& config, bool rejected_now, int64_t latency_ns,
                         int64_t now_ns);
  // Records one upstream answer (gateway mode, middleware) that took
  // `latency_ns` (negative: unknown); same return.
  RollbackTrigger RecordUpstream(const RollbackConfig& config, bool server_error,
                                 int64_t latency_ns, int64_t now_ns);
  // Trips the guard with `why` (admin); false if it was tripped already.
  bool Trip(RollbackTrigger why);
  void ResetGuard();

 private:
  void Roll(const RollbackConfig& config, int64_t now_ns);
};

// StableHash (policy_impl.h) of a rule's canonical text (Rule::fingerprint): the same on every
// instance running the same definition, never 0.
uint64_t RollbackFingerprintOf(std::string_view canonical);

}  // namespace tollgate

#endif  // TOLLGATE_SRC_POLICY_RULE_STATE_H_
