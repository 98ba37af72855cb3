// The per-rule families of /metrics (tollgate/runtime.h), written from the
// Enforcer's counters snapshot with the X-macro lists of tollgate/rule_counters.h.
#include <vector>

#include "tollgate/metrics.h"
#include "tollgate/policy.h"
#include "tollgate/rule_counters.h"
#include "tollgate/runtime.h"

namespace tollgate {

// Per-rule decisions and concurrency leases.
void WriteRuleDecisionMetrics(PrometheusWriter& w, const std::vector<RuleCounters>& counters) {
  w.Family("tollgate_decisions_total", "counter",
           "Rule decisions by rule and outcome (allowed, rejected, shadow_rejected, unenforced, "
           "unavailable, blocked, soft_exceeded).");
  for (const auto& c : counters) {
#define TOLLGATE_DECISION_SAMPLE(field, label) \
  w.Sample("tollgate_decisions_total", {"rule", c.rule, "outcome", #label}, c.field);
    TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_DECISION_SAMPLE)
#undef TOLLGATE_DECISION_SAMPLE
  }
  // Concurrency rules only (a rule that never took a lease has no series).
  w.Family("tollgate_leases_total", "counter",
           "Concurrency leases by rule: acquired, released (while live), expired (released "
           "after expiry, twice, or unknown).");
  for (const auto& c : counters) {
    if (c.leases_acquired == 0) continue;
#define TOLLGATE_LEASE_SAMPLE(field, label) \
  w.Sample("tollgate_leases_total", {"rule", c.rule, "outcome", #label}, c.field);
    TOLLGATE_RULE_LEASE_COUNTERS(TOLLGATE_LEASE_SAMPLE)
#undef TOLLGATE_LEASE_SAMPLE
  }
  w.Family("tollgate_leases_in_flight", "gauge",
           "Concurrency leases this process took and has not given back (acquired - released "
           "- expired); leases handed to /v1/auth, /v1/decide and RLS callers count until "
           "released.");
  for (const auto& c : counters) {
    if (c.leases_acquired == 0) continue;
    const uint64_t back = c.leases_released + c.leases_expired;
    w.Sample("tollgate_leases_in_flight", {"rule", c.rule},
             c.leases_acquired > back ? c.leases_acquired - back : 0);
  }
}

// Per-rule missing keys and the rollback guard.
void WriteRuleGuardMetrics(PrometheusWriter& w, const std::vector<RuleCounters>& counters) {
  w.Family("tollgate_missing_key_total", "counter",
           "Decisions where a rule's key source was absent, by rule.");
  for (const auto& c : counters)
    w.Sample("tollgate_missing_key_total", {"rule", c.rule}, c.missing_key);
  w.Family("tollgate_rule_rolled_back", "gauge",
           "1 when the rollback guard switched the rule to shadow mode.");
  for (const auto& c : counters) {
    w.Sample("tollgate_rule_rolled_back", {"rule", c.rule}, c.rolled_back ? 1.0 : 0.0);
  }
  w.Family("tollgate_rollback_trips_total", "counter",
           "Rollback guard trips by rule and trigger (reject_ratio, latency_p99, "
           "upstream_errors, upstream_latency_p99, admin).");
  for (const auto& c : counters) {
    for (size_t t = 1; t < kRollbackTriggerCount; ++t) {
      w.Sample("tollgate_rollback_trips_total",
               {"rule", c.rule, "trigger", RollbackTriggerName(RollbackTrigger(t))},
               c.rollback_trips[t]);
    }
  }
  w.Family("tollgate_rollback_clears_total", "counter",
           "Tripped rollback guards cleared by an operator (POST /v1/rollback/clear).");
  for (const auto& c : counters) {
    w.Sample("tollgate_rollback_clears_total", {"rule", c.rule}, c.rollback_clears);
  }
  w.Family("tollgate_rollback_adopted_total", "counter",
           "Rollback guard trips and clears adopted from another instance of the fleet.");
  for (const auto& c : counters) {
#define TOLLGATE_ADOPTED_SAMPLE(field, label) \
  w.Sample("tollgate_rollback_adopted_total", {"rule", c.rule, "transition", #label}, c.field);
    TOLLGATE_RULE_ADOPTED_COUNTERS(TOLLGATE_ADOPTED_SAMPLE)
#undef TOLLGATE_ADOPTED_SAMPLE
  }
}

// Settlements (cost after the response, refunds), for rules that settled
// anything (docs/operations.md, "Metrics").
void WriteRuleSettlementMetrics(PrometheusWriter& w, const std::vector<RuleCounters>& counters) {
  w.Family("tollgate_settlements_total", "counter",
           "Requests whose charges were settled when the response ended, by rule.");
  for (const auto& c : counters) {
    if (c.settled > 0) w.Sample("tollgate_settlements_total", {"rule", c.rule}, c.settled);
  }
  w.Family("tollgate_settled_cost_total", "counter",
           "Tokens charged after the response (beyond the up-front estimate), by rule.");
  for (const auto& c : counters) {
    if (c.settled > 0) w.Sample("tollgate_settled_cost_total", {"rule", c.rule}, c.settled_cost);
  }
  w.Family("tollgate_response_cost_invalid_total", "counter",
           "Responses whose cost was missing, malformed or above max_response_cost, by rule.");
  for (const auto& c : counters) {
    if (c.settled > 0 || c.response_cost_invalid > 0) {
      w.Sample("tollgate_response_cost_invalid_total", {"rule", c.rule}, c.response_cost_invalid);
    }
  }
  w.Family("tollgate_settle_failures_total", "counter",
           "Settlements the store failed (the up-front charge stays), by rule.");
  for (const auto& c : counters) {
    if (c.settle_failures > 0) {
      w.Sample("tollgate_settle_failures_total", {"rule", c.rule}, c.settle_failures);
    }
  }
  w.Family("tollgate_refunds_total", "counter",
           "Charges refunded for an upstream outcome (the refund_on entry), by rule.");
  for (const auto& c : counters) {
    for (const auto& [outcome, n] : c.refunds) {
      w.Sample("tollgate_refunds_total", {"rule", c.rule, "outcome", outcome}, n);
    }
  }
}

}  // namespace tollgate
