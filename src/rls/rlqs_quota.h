// RlqsQuota: the Rate Limit Quota Service's assignment logic (Envoy's RLQS,
// envoy.service.rate_limit_quota.v3), without gRPC: the transport
// (server/rls/rlqs_service.h) hands it each stream's decoded usage reports and
// sends back the RateLimitQuotaResponse it fills.
//
// Rules are the Envoy rule files' (RlsConfig, the same configuration the RLS
// service decides with): a report's BucketId entries, sorted by key, are
// matched as the entries of one descriptor of the stream's domain
// (RlsConfig::MatchForKey), so a BucketId {name: api, user: alice} matches the
// rule a descriptor [(name, api), (user, alice)] would, and shares its bucket
// in the store (the same bucket key). No second rule model: the rule's limit
// is the one the RLS service applies.
//
// Shares (docs/envoy.md, "Rate Limit Quota Service"):
//  - each (stream, bucket) reports its demand: (allowed + denied) / time_elapsed;
//  - the rule's rate (count / period) is split among this process's live
//    reporters of the same store bucket max-min fairly by demand: a reporter
//    asking less than an equal split gets what it asks, the rest share the
//    remainder equally (so a hostile report of absurd demand cannot take an
//    honest reporter's share);
//  - every round (a report, at most one acquisition per min_round of the
//    server's clock) the share for the time since the last round is ACQUIRED
//    from the rule's bucket through the Enforcer (Enforcer::CheckItems, on
//    the configured store: local or Redis): when the bucket holds fewer
//    tokens, what remains is acquired instead. So every data plane of every
//    tollgated sharing the store is assigned at most the rule's limit per
//    period in total (the store's exact arithmetic); what they admit can
//    exceed that by one assignment per stream plus one per assignment that
//    replaced a data plane's bucket (Envoy refills a replaced bucket to full:
//    docs/envoy.md, "Differences and limits");
//  - the answer is a token_bucket {max_tokens = tokens_per_fill = granted,
//    fill_interval = the round} with assignment_time_to_live = ttl_rounds
//    rounds, or blanket_rule DENY_ALL when nothing could be granted;
//    unlimited rules, shadow-mode rules and buckets no rule matches (an
//    unknown domain too) get `no_rule_action` (default ALLOW_ALL), rules of
//    requests_per_unit 0 DENY_ALL;
//  - a (stream, bucket) that has not reported for ttl_rounds rounds leaves
//    the split (its share returns to the others), as does a closed stream;
//  - with RlqsOptions::tracer, each round's acquisition is a decision span.
//
// Bounds: max_streams open streams (OpenStream refuses more), max_buckets
// per stream (later buckets of a report are refused with DENY_ALL, not
// tracked), max_bucket_entries per BucketId, counts clamped to
// max_reported_count, time_elapsed missing / <= 0 ignored (the bucket is still
// answered, its demand unchanged), a domain other than the stream's first
// refused (kInvalidArgument: the transport ends the stream).
//
// Errors: OnReports returns kInvalidArgument for a protocol violation (no
// domain in the first message, a changed domain); store errors do not fail
// the stream (the bucket is answered with nothing granted: DENY_ALL for one
// round, or the failure mode's answer the Enforcer gives).
// Thread safety: every method may be called from any thread; one mutex
// guards the streams and the split; store calls run outside it.
// Ownership: the Enforcer and clock are borrowed and must outlive this.
#ifndef TOLLGATE_SRC_RLS_RLQS_QUOTA_H_
#define TOLLGATE_SRC_RLS_RLQS_QUOTA_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"
#include "rls/rls_config.h"
#include "tollgate/clock.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"

namespace tollgate::trace {
class DecisionTracer;  // tollgate/trace.h
}  // namespace tollgate::trace

namespace tollgate::rls {

namespace rlqspb = ::envoy::service::rate_limit_quota::v3;

struct RlqsOptions {
  size_t max_streams = 1024;
  size_t max_buckets = 1024;  // tracked per stream
  size_t max_bucket_entries = 32;
  uint64_t max_reported_count = 1'000'000'000;  // per bucket per report
  // A round is at least this long (more frequent reports re-send the current
  // assignment without acquiring) and at most this long (a longer
  // time_elapsed counts as this much).
  Nanos min_round = std::chrono::milliseconds(100);
  Nanos max_round = std::chrono::seconds(60);
  // assignment_time_to_live = ttl_rounds rounds; also how long a silent
  // reporter keeps its place in the split. >= 1.
  int ttl_rounds = 2;
  // For buckets no rule limits: allow (Envoy's behaviour without a server)
  // or deny.
  enum class NoRuleAction { kAllowAll, kDenyAll };
  NoRuleAction no_rule_action = NoRuleAction::kAllowAll;
  // A span per assignment round: the round's acquisition is a decision span
  // ("tollgate.decision": tollgate.rule = the rule's stats key, tollgate.cost =
  // the tokens asked, tollgate.verdict; with its EVALSHA child on Redis), a new
  // trace each (a round has no request to continue). Borrowed; null: none.
  trace::DecisionTracer* tracer = nullptr;
};

// Per-rule counters, declared once (rule = the rule's stats key).
#define TOLLGATE_RLQS_RULE_COUNTERS(COUNTER)                                         \
  COUNTER(assigned, "tollgate_rlqs_assigned_tokens_total",                           \
          "Tokens acquired from the rule's bucket and assigned to data planes.")     \
  COUNTER(reported_allowed, "tollgate_rlqs_reported_allowed_total",                  \
          "Requests data planes reported as allowed.")                               \
  COUNTER(reported_denied, "tollgate_rlqs_reported_denied_total",                    \
          "Requests data planes reported as denied.")                                \
  COUNTER(rounds, "tollgate_rlqs_rounds_total", "Assignment rounds (acquisitions).") \
  COUNTER(store_errors, "tollgate_rlqs_store_errors_total",                          \
          "Rounds whose acquisition the store could not decide.")

struct RlqsRuleCounters {
  std::string rule;
#define TOLLGATE_RLQS_VALUE(field, metric, help) uint64_t field = 0;
  TOLLGATE_RLQS_RULE_COUNTERS(TOLLGATE_RLQS_VALUE)
#undef TOLLGATE_RLQS_VALUE
  uint64_t streams = 0;  // live (stream, bucket) reporters in the split now
};

class RlqsQuota {
 public:
  using ConfigSource = std::function<std::shared_ptr<const RlsConfig>()>;

  // `config` is read at every round (a reload applies from the next one).
  // kInvalidArgument when an argument is null or an option out of range.
  static Result<std::unique_ptr<RlqsQuota>> Create(Enforcer* enforcer, ConfigSource config,
                                                   const Clock* clock, RlqsOptions options = {});
  ~RlqsQuota();

  // A new stream's id, or kOverflow beyond max_streams.
  Result<uint64_t> OpenStream();
  // Drops the stream's reporters from the split. Idempotent.
  void CloseStream(uint64_t stream);

  // One message of `stream`: answers every reported bucket in `response`
  // (one BucketAction each, in key order). kInvalidArgument on a protocol
  // violation (above); the response is then empty.
  Status OnReports(uint64_t stream, const rlqspb::RateLimitQuotaUsageReports& reports,
                   rlqspb::RateLimitQuotaResponse* response);

  // A fresh assignment for every bucket `stream` tracks (a configuration
  // reload: the new rules apply at once). Acquires as a round does.
  void Reassign(uint64_t stream, rlqspb::RateLimitQuotaResponse* response);

  // The configuration the next round reads (the transport compares it to
  // push a reload's assignments).
  std::shared_ptr<const RlsConfig> CurrentConfig() const;
  size_t open_streams() const;
  std::vector<RlqsRuleCounters> Counters() const;  // sorted by rule
  void AppendPrometheus(std::string* out) const;
  const RlqsOptions& options() const { return options_; }

  struct Impl;

 private:
  explicit RlqsQuota(std::unique_ptr<Impl> impl, RlqsOptions options);
  std::unique_ptr<Impl> impl_;
  RlqsOptions options_;
};

// Max-min fair split of `capacity` among `demands` (same units): each gets
// min(demand, level) where the level fills the capacity (or every demand is
// met). Exposed for tests.
std::vector<double> MaxMinShares(const std::vector<double>& demands, double capacity);

}  // namespace tollgate::rls

#endif  // TOLLGATE_SRC_RLS_RLQS_QUOTA_H_
