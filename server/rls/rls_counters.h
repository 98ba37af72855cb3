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
#ifndef TOLLGATE_SERVER_RLS_RLS_COUNTERS_H_
#define TOLLGATE_SERVER_RLS_RLS_COUNTERS_H_

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

namespace tollgate::rls {

// Hits (costs) of one rule, as envoyproxy/ratelimit counts them.
struct RuleHits {
  std::atomic<uint64_t> total_hits{0};
  std::atomic<uint64_t> over_limit{0};
  std::atomic<uint64_t> near_limit{0};
  std::atomic<uint64_t> within_limit{0};
  std::atomic<uint64_t> shadow_mode{0};
};

struct ServiceCounters {
  std::atomic<uint64_t> requests{0};         // ShouldRateLimit calls
  std::atomic<uint64_t> over_limit{0};       // answered OVER_LIMIT
  std::atomic<uint64_t> ok{0};               // answered OK
  std::atomic<uint64_t> invalid_request{0};  // INVALID_ARGUMENT (empty domain, bounds)
  std::atomic<uint64_t> store_errors{0};     // UNAVAILABLE: the store could not decide
  std::atomic<uint64_t> unknown_domain{0};   // requests for a domain not configured
  std::atomic<uint64_t> no_rule{0};          // descriptors that matched no rate limit
  std::atomic<uint64_t> unenforced{0};       // the store's failure mode answered
  std::atomic<uint64_t> config_reloads{0};
};

struct RuleCountersSnapshot {
  std::string rule;  // "domain.key_value.key2"
  uint64_t total_hits = 0, over_limit = 0, near_limit = 0, within_limit = 0, shadow_mode = 0;
  // Decisions (calls, not hits), from the Enforcer's tollgate::RuleCounters.
  uint64_t allowed = 0, rejected = 0, shadow_rejected = 0, unenforced = 0, unavailable = 0;
};

// Decision latency (a call's start to its answer, for calls that applied a
// rule) and store calls (those it could not decide: UNAVAILABLE or the failure
// mode answered), as tollgate_decision_duration_seconds and
// tollgate_store_calls_total / _errors_total count them.
using LatencySnapshot = LatencyCounts;

struct ServiceCountersSnapshot {
  uint64_t requests = 0, over_limit = 0, ok = 0, invalid_request = 0, store_errors = 0,
           unknown_domain = 0, no_rule = 0, unenforced = 0, config_reloads = 0;
};

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

#endif  // TOLLGATE_SERVER_RLS_RLS_COUNTERS_H_
