// RlsDecider: answers envoy.service.ratelimit.v3 ShouldRateLimit requests
// from an RlsConfig, without any networking (the gRPC server in rls_server.h
// is a thin adapter around it). It is an adapter onto tollgate's Enforcer:
// each request's descriptors become explicit items (ExplicitItem) decided by
// Enforcer::CheckItemsAsync, the decision path HTTP uses (all-or-nothing
// batch, shadow mode, failure modes, per-rule decision counters, rate-limit
// headers). It never calls the store itself.
//
// Per request (docs/envoy.md has the full semantics and where they follow
// envoyproxy/ratelimit):
//  - an empty domain or no descriptors is INVALID_ARGUMENT (upstream errors too);
//    an unknown domain is OK with one OK status per descriptor and no limits;
//  - each descriptor selects a rule (RlsConfig::MatchForKey, or its own `limit`
//    override, bucketed by its count and unit); rules named in another
//    matched rule's `replaces` drop out;
//  - cost = the descriptor's hits_addend when set (0 = check only), else
//    max(1, the request's hits_addend);
//  - all descriptors are decided together as one Enforcer call (all-or-nothing:
//    a rejected request charges no bucket); shadow- and quota-mode descriptors
//    never make the answer OVER_LIMIT (quota mode lists them in
//    dynamic_metadata, with the `metadata` of descriptors within their limit); `unlimited` and
//    requests_per_unit 0 are decided without the store (ExplicitItem::Storeless);
//  - a store error, or a fail-closed failure mode, answers UNAVAILABLE, so
//    Envoy's failure_mode_deny decides; a fail-open answer is OK.
//
// Thread safety: Decide() may run on any number of threads at once; SetConfig()
// swaps the configuration atomically and in-flight requests keep the one they
// started with.
// Ownership: the store and clock are borrowed and must outlive the decider;
// the decider owns its Enforcer (one per decider: its rule names are the
// configuration's stats keys, apart from the HTTP policy's).
#ifndef TOLLGATE_SERVER_RLS_RLS_DECIDER_H_
#define TOLLGATE_SERVER_RLS_RLS_DECIDER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls/rls_config.h"
#include "rls/rls_counters.h"
#include "tollgate/clock.h"
#include "tollgate/policy.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

namespace tollgate::rls {

namespace rlspb = ::envoy::service::ratelimit::v3;

struct AttachedConfig;  // a configuration with its rules' Enforcer handles (rls_decider.cc)

struct RlsDecideOptions {
  // Rate-limit headers to put in response_headers_to_add, rendered by the
  // policy layer (tollgate/policy_headers.h), each style once
  // (ParseHeaderStyles): kDraft11 gives RateLimit-Policy and RateLimit. Empty
  // by default: Envoy can render its own x-ratelimit-* headers from the statuses.
  std::vector<HeaderStyle> header_styles;
  // Retry-After in response_headers_to_add on OVER_LIMIT (Envoy adds it to
  // its 429), whatever header_styles says.
  bool retry_after = true;
  // Retry-After = ceil(wait * (1 + jitter * u)), u in [0,1) fixed per
  // descriptor value (EnforcerOptions::retry_after_jitter); the reset of the
  // header styles on OVER_LIMIT equals it. duration_until_reset in the
  // statuses stays the bucket's own time, without jitter. [0, 10].
  double retry_after_jitter = 0.5;
  uint64_t jitter_seed = 0;
  // Request bounds (INVALID_ARGUMENT beyond them).
  size_t max_descriptors = 64;
  size_t max_entries = 32;  // per descriptor
  // Algorithm for descriptors that carry their own `limit` override.
  Algorithm override_algorithm = Algorithm::kTokenBucket;
  // Find each configured rule's Enforcer state once, when the configuration is
  // attached (the default); false looks it up by name under the Enforcer's
  // lock for every descriptor (the baseline `rls_bench --direct` compares with).
  bool resolve_rule_handles = true;
};

class RlsDecider {
 public:
  // `done` receives Ok (response filled), kInvalidArgument (bad request) or
  // kUnavailable (the store could not decide). It runs exactly once, inline or
  // on a store thread.
  using Done = std::function<void(Status)>;

  // `store` and `clock` must not be null.
  RlsDecider(Store* store, std::shared_ptr<const RlsConfig> config, const Clock* clock,
             RlsDecideOptions options = {});
  ~RlsDecider();

  // `request` and `response` must stay valid until `done` has run.
  void Decide(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response,
              Done done);
  // Blocks until decided.
  Status DecideSync(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response);

  void SetConfig(std::shared_ptr<const RlsConfig> config);
  std::shared_ptr<const RlsConfig> config() const;
  // The counters registry (shared by every configuration compiled with it).
  RlsCounters& counters() const { return config()->counters(); }
  const RlsDecideOptions& options() const { return options_; }

 private:
  const Clock* clock_;
  RlsDecideOptions options_;
  std::shared_ptr<Enforcer> enforcer_;  // shared with the counters' decision source
  // A mutex, not std::atomic<std::shared_ptr>: libstdc++ 12's lock-bit
  // implementation of the latter is invisible to TSan. Held for a pointer copy.
  mutable std::mutex config_mu_;
  // The configuration and a handle (RuleHandle) per rule, resolved once when
  // it is attached, so that no descriptor takes the Enforcer's lock to find its rule.
  std::shared_ptr<const AttachedConfig> attached_;
  std::shared_ptr<const AttachedConfig> attached() const;
};

}  // namespace tollgate::rls

#endif  // TOLLGATE_SERVER_RLS_RLS_DECIDER_H_
