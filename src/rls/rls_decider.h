// RlsDecider: the Envoy engine's decision. It answers
// envoy.service.ratelimit.v3 ShouldRateLimit requests from a compiled
// RlsConfig, without any networking (the gRPC transport is server/rls). It is
// an adapter onto tollgate's Enforcer: each request's descriptors become
// explicit items (ExplicitItem) decided by Enforcer::CheckItemsAsync, the
// decision path HTTP uses (all-or-nothing batch, shadow mode, failure modes,
// per-rule decision counters, rate-limit headers). It never calls the store.
//
// Who owns what: the decider creates no Enforcer and owns no configuration.
// It decides on a given Enforcer through an Enforcer::FrontEnd (its response
// options, from RlsDecideOptions, and its rules' counters, apart from the
// policy's). Each request reads the configuration from ONE PolicyStore
// snapshot (its attachment, an RlsAttached) with that snapshot's generation:
//  - in tollgated the Enforcer and PolicyStore are the Runtime's
//    (tollgate/runtime.h): the one Enforcer HTTP decides on, and the
//    configuration is the Runtime's companion (RlsCompanion) installed by the
//    same swap as the HTTP policy;
//  - standalone (tests, benchmarks, an RlsServer outside tollgated) the
//    caller's Enforcer (typically over an empty policy), whose PolicyStore
//    holds the configuration as its attachment; SetConfig swaps it.
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
//    a rejected request charges no bucket); shadow-mode descriptors never make
//    the answer OVER_LIMIT; quota-mode ones report OVER_LIMIT in their own
//    status and make the answer OVER_LIMIT only when every quota descriptor
//    of the call is over (envoyproxy/ratelimit's rule; ExplicitItem::quota);
//    `charge_only` descriptors with a cost are charged by the Enforcer's
//    settlement (into debt, never refused), settled before `done` runs;
//    `unlimited` and requests_per_unit 0 are decided without the store
//    (ExplicitItem::Storeless);
//  - dynamic_metadata only with RlsDecideOptions::response_metadata, in
//    upstream's shape (domain, descriptors, hitsAddend, merged metadata);
//  - a store error, or a fail-closed failure mode, answers UNAVAILABLE, so
//    Envoy's failure_mode_deny decides; a fail-open answer is OK.
//
// Thread safety: Decide() may run on any number of threads at once; a reload
// (the Runtime's, or SetConfig) swaps the configuration atomically and
// in-flight requests keep the one they started with.
// Ownership: the clock, PolicyStore and Enforcer given are borrowed and must
// outlive the decider and the readers of its counters registry.
#ifndef TOLLGATE_SRC_RLS_RLS_DECIDER_H_
#define TOLLGATE_SRC_RLS_RLS_DECIDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls/rls_config.h"
#include "rls/rls_counters.h"
#include "rls/rls_yaml.h"
#include "tollgate/clock.h"
#include "tollgate/envoy_rls.h"
#include "tollgate/policy.h"
#include "tollgate/runtime.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

namespace tollgate::rls {

namespace rlspb = ::envoy::service::ratelimit::v3;

// The compiled Envoy configuration as one swap publishes it (a PolicyStore
// attachment; Runtime::View::companion): the rule table and each rule's
// handle (RuleHandle) in the deciding front end's table, found once here so
// that no descriptor takes the Enforcer's lock to find its rule.
struct RlsAttached {
  std::shared_ptr<const RlsConfig> config;
  std::vector<RuleHandle> handles;  // by RlsRule::index; empty: look up by name
};

// `config` compiled for `front_end` of `enforcer` (its counters registry then
// reads its decisions from there: Enforcer::Counters(front_end); `enforcer`
// is borrowed and must outlive that use).
std::shared_ptr<const RlsAttached> AttachRlsConfig(Enforcer& enforcer,
                                                   Enforcer::FrontEnd* front_end,
                                                   std::shared_ptr<const RlsConfig> config,
                                                   bool resolve_handles = true);

// tollgated's Envoy rule files as the Runtime's companion: `compile` loads
// `paths` for `front_end` of `enforcer` (the Runtime's one Enforcer), keeping
// the counters registry of the configuration `policies` holds; `installed`
// counts a reload (tollgate_rls_config_reloads_total). `policies`, `enforcer`
// and `front_end` are borrowed.
CompanionConfig RlsCompanion(const PolicyStore& policies, Enforcer& enforcer,
                             Enforcer::FrontEnd* front_end, std::vector<std::string> paths,
                             RlsCompileOptions options, bool resolve_handles = true);

// RlsDecideOptions, EnvoyResponseOptions and CheckRlsConfigFiles are public
// (tollgate/envoy_rls.h).

class RlsDecider final : public EnvoyDecider {
 public:
  // `done` receives Ok (response filled), kInvalidArgument (bad request) or
  // kUnavailable (the store could not decide). It runs exactly once, inline or
  // on a store thread.
  using Done = EnvoyDecider::Done;

  // The engine's (tollgated): decides on `enforcer` through `front_end`
  // (made for these options: EnvoyResponseOptions) with the RlsAttached
  // `policies` publishes. None may be null.
  RlsDecider(const PolicyStore* policies, Enforcer* enforcer, Enforcer::FrontEnd* front_end,
             const Clock* clock, RlsDecideOptions options = {});
  // Standalone: decides on `enforcer` (borrowed; its PolicyStore carries no
  // other attachment) through a front end of its own, with `config` attached
  // to the Enforcer's PolicyStore. kInvalidArgument when the response options
  // are refused (ValidateResponseOptions). None may be null.
  static Result<std::unique_ptr<RlsDecider>> Standalone(Enforcer* enforcer,
                                                        std::shared_ptr<const RlsConfig> config,
                                                        const Clock* clock,
                                                        RlsDecideOptions options = {});
  ~RlsDecider() override;

  // `request` and `response` must stay valid until `done` has run.
  // `*generation` (optional) is set, before Decide returns, to the generation
  // of the snapshot whose configuration decides the request.
  void Decide(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response, Done done,
              uint64_t* generation = nullptr) override;
  // Blocks until decided.
  Status DecideSync(const rlspb::RateLimitRequest& request, rlspb::RateLimitResponse* response,
                    uint64_t* generation = nullptr);

  // Standalone only (the engine's configuration reloads with its Runtime):
  // installs `config`, one swap.
  void SetConfig(std::shared_ptr<const RlsConfig> config) override;
  std::shared_ptr<const RlsConfig> config() const override;
  // Standalone only: loads `paths` (rls_yaml.h) with the counters registry
  // kept, and installs them when they compile.
  std::vector<ConfigError> LoadFiles(const std::vector<std::string>& paths,
                                     const RlsCompileOptions& options) override;
  // The counters registry (shared by every configuration compiled with it).
  RlsCounters& counters() const override { return config()->counters(); }
  void AppendMetrics(std::string* out) const override;
  std::vector<RuleCounters> DecisionCounters() const override;
  LatencyCounts DecisionLatency() const override;
  const RlsDecideOptions& options() const { return options_; }

 private:
  const PolicyStore* policies_;
  Enforcer* enforcer_;
  Enforcer::FrontEnd* front_end_;
  const Clock* clock_;
  RlsDecideOptions options_;
  bool standalone_ = false;  // SetConfig swaps the attachment (a Runtime's reloads with it)
};

}  // namespace tollgate::rls

#endif  // TOLLGATE_SRC_RLS_RLS_DECIDER_H_
