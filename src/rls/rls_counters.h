// Counters of the Envoy rate limit service: per rule (one configured
// rate_limit block, named by its envoyproxy/ratelimit stats key such as
// "domain.key_value.key2") and for the service as a whole.
//
// Rule counters count hits (the cost, i.e. hits_addend), as envoyproxy/ratelimit
// does: total_hits, over_limit, near_limit (allowed with less than 20% of the
// quota left), within_limit, shadow_mode (would have been over, shadow rule).
// Label values are configured names only, never request values, so the number
// of series is bounded by the configuration.
//
// Decisions (one per call and rule: allowed, rejected, shadow_rejected,
// unenforced, unavailable) are counted by the Enforcer that decides them
// (tollgate::RuleCounters, by the rule's stats key); RuleSnapshot() joins them
// to the hits through the decision source the RlsDecider installs. The
// decision latency histogram is the runtime's tollgate::DecisionLatency (the
// one HTTP uses), so tollgated renders the gRPC front end into its main
// decision metrics (label frontend="grpc") without a copy of the buckets.
//
// Thread safety: everything here is safe to use from any thread. Counters are
// relaxed atomics; RlsCounters::ForRule takes a mutex (configuration load and
// descriptor limit overrides). Pointers returned by ForRule stay valid as long
// as the registry lives, across configuration reloads.
#ifndef TOLLGATE_SRC_RLS_RLS_COUNTERS_H_
#define TOLLGATE_SRC_RLS_RLS_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tollgate/metrics.h"
#include "tollgate/policy.h"
#include "tollgate/rule_counters.h"

namespace tollgate::rls {

// The counters, declared once: each list calls COUNTER(field, metric, help)
// once per counter, in the order AppendPrometheus writes them. `field` names
// the atomic and the snapshot's member; `metric` is the Prometheus family
// (per-rule families carry label rule="..."). A new counter is one line here.

// Hits (costs) of one rule, as envoyproxy/ratelimit counts them.
#define TOLLGATE_RLS_HIT_COUNTERS(COUNTER)                                                    \
  COUNTER(total_hits, "tollgate_rls_rule_total_hits_total", "Hits (cost) asked of the rule.") \
  COUNTER(over_limit, "tollgate_rls_rule_over_limit_total", "Hits over the limit.")           \
  COUNTER(near_limit, "tollgate_rls_rule_near_limit_total",                                   \
          "Hits allowed with less than 20% quota left.")                                      \
  COUNTER(within_limit, "tollgate_rls_rule_within_limit_total", "Hits within the limit.")     \
  COUNTER(shadow_mode, "tollgate_rls_rule_shadow_mode_total",                                 \
          "Hits over a shadow-mode limit (not enforced).")

// The service as a whole: ShouldRateLimit calls; answered OK / OVER_LIMIT;
// INVALID_ARGUMENT (empty domain, bounds); UNAVAILABLE (the store could not
// decide); requests for a domain not configured; descriptors that matched no
// rate limit; the store's failure mode answered; configuration reloads.
#define TOLLGATE_RLS_SERVICE_COUNTERS(COUNTER)                                                     \
  COUNTER(requests, "tollgate_rls_requests_total", "ShouldRateLimit calls.")                       \
  COUNTER(ok, "tollgate_rls_ok_total", "Calls answered OK.")                                       \
  COUNTER(over_limit, "tollgate_rls_over_limit_total", "Calls answered OVER_LIMIT.")               \
  COUNTER(invalid_request, "tollgate_rls_invalid_requests_total",                                  \
          "Calls refused as INVALID_ARGUMENT.")                                                    \
  COUNTER(store_errors, "tollgate_rls_store_errors_total",                                         \
          "Calls failed with UNAVAILABLE (store error).")                                          \
  COUNTER(unknown_domain, "tollgate_rls_unknown_domain_total",                                     \
          "Calls for a domain not configured.")                                                    \
  COUNTER(no_rule, "tollgate_rls_no_rule_total", "Descriptors that matched no rate limit.")        \
  COUNTER(unenforced, "tollgate_rls_unenforced_total", "Calls the store's failure mode answered.") \
  COUNTER(config_reloads, "tollgate_rls_config_reloads_total", "Successful configuration reloads.")

#define TOLLGATE_RLS_ATOMIC(field, metric, help) std::atomic<uint64_t> field{0};
#define TOLLGATE_RLS_VALUE(field, ...) uint64_t field = 0;

struct RuleHits {
  TOLLGATE_RLS_HIT_COUNTERS(TOLLGATE_RLS_ATOMIC)
};

struct ServiceCounters {
  TOLLGATE_RLS_SERVICE_COUNTERS(TOLLGATE_RLS_ATOMIC)
};

struct RuleCountersSnapshot {
  std::string rule;  // "domain.key_value.key2"
  TOLLGATE_RLS_HIT_COUNTERS(TOLLGATE_RLS_VALUE)
  // Decisions (calls, not hits), from the Enforcer's tollgate::RuleCounters.
#define TOLLGATE_RLS_DECISION_VALUE(field, label) uint64_t field = 0;
  TOLLGATE_RULE_DECISION_COUNTERS(TOLLGATE_RLS_DECISION_VALUE)
#undef TOLLGATE_RLS_DECISION_VALUE
};

struct ServiceCountersSnapshot {
  TOLLGATE_RLS_SERVICE_COUNTERS(TOLLGATE_RLS_VALUE)
};

#undef TOLLGATE_RLS_ATOMIC
#undef TOLLGATE_RLS_VALUE

// Decision latency (a call's start to its answer, for calls that applied a
// rule) and store calls (those it could not decide: UNAVAILABLE or the failure
// mode answered), as tollgate_decision_duration_seconds and
// tollgate_store_calls_total / _errors_total count them.
using LatencySnapshot = LatencyCounts;

class RlsCounters {
 public:
  // The hit counters of `rule`, created on first use.
  RuleHits* ForRule(std::string_view rule);
  // Where RuleSnapshot() reads decisions from (the deciding Enforcer's
  // Counters()); none by default (decisions read as 0).
  using DecisionSource = std::function<std::vector<tollgate::RuleCounters>()>;
  void SetDecisionSource(DecisionSource source);
  ServiceCounters& service() { return service_; }

  std::vector<RuleCountersSnapshot> RuleSnapshot() const;  // sorted by rule
  ServiceCountersSnapshot ServiceSnapshot() const;

  void ObserveDecision(int64_t ns) { latency_.Observe(ns); }
  void ObserveStoreCall(bool store_error) { latency_.ObserveStoreCall(store_error); }
  LatencySnapshot Latency() const { return latency_.Snapshot(); }

  // Prometheus text exposition (protocols.md section 6): tollgate_rls_* families,
  // label rule="..." escaped. Appends to `out`.
  void AppendPrometheus(std::string* out) const;

 private:
  mutable std::mutex mu_;  // guards rules_ (the map, not the counters) and decisions_
  std::map<std::string, std::unique_ptr<RuleHits>, std::less<>> rules_;
  DecisionSource decisions_;
  ServiceCounters service_;
  DecisionLatency latency_;
};

}  // namespace tollgate::rls

#endif  // TOLLGATE_SRC_RLS_RLS_COUNTERS_H_
