// The per-rule counters, declared once (as Envoy's ALL_..._STATS(COUNTER)).
//
// Each list below calls COUNTER(field, label) once per counter, in the order
// tollgated's /metrics writes them: `field` is the member's name in the
// Enforcer's atomics (src/policy/rule_state.h), in the public snapshot
// RuleCounters (tollgate/policy.h) and in the copy between them; `label` is
// the Prometheus label value of the counter within its family, where the
// family has one (tollgate_decisions_total{outcome=...},
// tollgate_leases_total{outcome=...}, tollgate_rollback_adopted_total{transition=...}).
// A new counter of a labelled family is one line here.
//
// Every counter is a uint64_t that only grows, kept by rule name for the
// Enforcer's lifetime (across reloads). Thread safety: macros only.
#ifndef TOLLGATE_RULE_COUNTERS_H_
#define TOLLGATE_RULE_COUNTERS_H_

// Decisions by outcome (tollgate_decisions_total, and the Envoy front end's):
//  - allowed: enforced decisions that allowed;
//  - rejected: enforced decisions that denied (this rule denied);
//  - shadow_rejected: shadow decisions that would have denied;
//  - unenforced: answered by a failure mode without a store decision;
//  - unavailable: the store failed (503);
//  - blocked: refused because the key's penalty box (block_for) was closed;
//  - soft_exceeded: a soft rule over its limit (also when another rule refused).
#define TOLLGATE_RULE_DECISION_COUNTERS(COUNTER) \
  COUNTER(allowed, allowed)                      \
  COUNTER(rejected, rejected)                    \
  COUNTER(shadow_rejected, shadow_rejected)      \
  COUNTER(unenforced, unenforced)                \
  COUNTER(unavailable, unavailable)              \
  COUNTER(blocked, blocked)                      \
  COUNTER(soft_exceeded, soft_exceeded)

// Concurrency rules (this process; tollgate_leases_total): leases taken, given
// back while live, and given back after they had expired (or twice, or unknown
// ids).
#define TOLLGATE_RULE_LEASE_COUNTERS(COUNTER) \
  COUNTER(leases_acquired, acquired)          \
  COUNTER(leases_released, released)          \
  COUNTER(leases_expired, expired)

// Settlements (cost after the response, refunds) of this rule's charges, each
// its own family:
//  - settled: charges settled;
//  - settled_cost: tokens charged by settlements (beyond the estimate);
//  - response_cost_invalid: response cost missing or bad (default_cost charged);
//  - settle_failures: settlements the store failed (the estimate stays).
#define TOLLGATE_RULE_SETTLEMENT_COUNTERS(COUNTER)      \
  COUNTER(settled, settled)                             \
  COUNTER(settled_cost, settled_cost)                   \
  COUNTER(response_cost_invalid, response_cost_invalid) \
  COUNTER(settle_failures, settle_failures)

// Rollback guard transitions adopted from another instance of the fleet
// (tollgate_rollback_adopted_total): trips and clears.
#define TOLLGATE_RULE_ADOPTED_COUNTERS(COUNTER) \
  COUNTER(rollback_adopted_trips, trip)         \
  COUNTER(rollback_adopted_clears, clear)

// Every per-rule counter:
//  - missing_key: decisions where the rule's key source was absent (rule
//    skipped or shared bucket used);
//  - rollback_clears: tripped rollback guards cleared by an operator.
// (Trips by trigger are an array, RuleCounters::rollback_trips.)
#define TOLLGATE_ALL_RULE_COUNTERS(COUNTER)  \
  TOLLGATE_RULE_DECISION_COUNTERS(COUNTER)   \
  COUNTER(missing_key, missing_key)          \
  TOLLGATE_RULE_LEASE_COUNTERS(COUNTER)      \
  TOLLGATE_RULE_SETTLEMENT_COUNTERS(COUNTER) \
  COUNTER(rollback_clears, rollback_clears)  \
  TOLLGATE_RULE_ADOPTED_COUNTERS(COUNTER)

#endif  // TOLLGATE_RULE_COUNTERS_H_
