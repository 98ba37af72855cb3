// tollgate/envoy_rls.h: the Envoy rate limit service's engine, as a transport serves it.
//
// The engine (src/rls) compiles envoyproxy/ratelimit YAML rule files and
// decides envoy.service.ratelimit.v3 ShouldRateLimit requests on an Enforcer,
// without networking; a transport (server/rls: gRPC) only moves requests and
// responses to an EnvoyDecider. The decider never creates an Enforcer: it
// decides on the one it is given, through an Enforcer::FrontEnd of its own
// (its response options, EnvoyResponseOptions, and its rules' counters, apart
// from the policy's). Two ways to get one:
//  - on a Runtime (tollgated): AttachEnvoyDecider compiles the rule files as
//    the Runtime's companion configuration, reloaded and checked with the
//    policy in its one swap, and decides on Runtime::enforcer(), the
//    Enforcer HTTP decides on (RuntimeOptions::envoy = true keeps the Envoy
//    rules' entries of a local state file);
//  - standalone (tests, benchmarks, a service outside tollgated):
//    MakeEnvoyDecider over the caller's Enforcer (typically over an empty
//    policy) and a compiled RlsConfig (src/rls/rls_yaml.h), attached to that
//    Enforcer's PolicyStore; SetConfig / LoadFiles swap it.
// docs/envoy.md has the request semantics (matching, `replaces`, shadow and
// quota mode, hits_addend, status mapping).
//
// Errors: Decide's `done` receives Ok (response filled), kInvalidArgument (a bad
// request) or kUnavailable (the store could not decide); rule-file errors are
// returned whole (every error, with its file and path), never just the first.
// Ownership: the Runtime, Enforcer and clock are borrowed and must outlive
// the decider. Thread safety: every EnvoyDecider method may be called from any
// thread; a reload swaps the configuration atomically and a request keeps the
// one it started with.
#ifndef TOLLGATE_ENVOY_RLS_H_
#define TOLLGATE_ENVOY_RLS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tollgate/clock.h"
#include "tollgate/config_error.h"
#include "tollgate/limit.h"
#include "tollgate/metrics.h"
#include "tollgate/policy.h"
#include "tollgate/rule_counters.h"
#include "tollgate/runtime.h"
#include "tollgate/status.h"
#include "tollgate/store.h"
#include "tollgate/store_spec.h"

namespace envoy::service::ratelimit::v3 {
class RateLimitRequest;
class RateLimitResponse;
}  // namespace envoy::service::ratelimit::v3

namespace tollgate::rls {

class RlsConfig;    // the compiled rule files (src/rls/rls_config.h)
class RlsCounters;  // upstream's hit counters and the decisions (src/rls/rls_counters.h)

// How rule files compile.
struct RlsCompileOptions {
  // For rate_limit blocks without `algorithm`. The token bucket works on every
  // store (the Redis stores run every algorithm but sliding_log); fixed_window
  // reproduces envoyproxy/ratelimit's counters exactly (docs/envoy.md, "Units").
  Algorithm default_algorithm = Algorithm::kTokenBucket;
  // Algorithms the store can run (empty = all); others are configuration
  // errors naming `store_name`, instead of UNAVAILABLE on every request.
  std::vector<Algorithm> supported_algorithms;
  std::string store_name = "the store";
  // Several specs with one domain: merge their trees (envoyproxy/ratelimit's
  // MERGE_DOMAIN_CONFIG) or reject the duplicate (the default, as upstream).
  bool merge_domains = false;
  size_t max_depth = 32;  // nesting bound
};

// How requests are answered.
struct RlsDecideOptions {
  // Rate-limit headers to put in response_headers_to_add, rendered by the
  // policy layer (tollgate/policy_headers.h), each style once
  // (ParseHeaderStyles): kDraft11 gives RateLimit-Policy and RateLimit. Empty
  // by default: Envoy can render its own x-ratelimit-* headers from the
  // statuses. The decider's front end renders them (EnvoyResponseOptions).
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
  // envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA (off by default, as
  // upstream): the response's dynamic_metadata carries the request (`domain`,
  // `descriptors`, `hitsAddend`) and the merged `metadata` of the descriptors
  // within their limit (docs/envoy.md). Off: no dynamic_metadata at all.
  bool response_metadata = false;
  // Algorithm for descriptors that carry their own `limit` override.
  Algorithm override_algorithm = Algorithm::kTokenBucket;
  // Find each configured rule's Enforcer state once, when the configuration is
  // attached (the default); false looks it up by name under the Enforcer's
  // lock for every descriptor (the baseline `rls_bench --direct` compares with).
  // Standalone only (RlsCompanion has its own).
  bool resolve_rule_handles = true;
};

// The decision a transport serves (RlsDecider, src/rls, is the implementation).
class EnvoyDecider {
 public:
  // Runs exactly once, inline or on a store thread.
  using Done = std::function<void(Status)>;
  virtual ~EnvoyDecider() = default;

  // `request` and `response` must stay valid until `done` has run.
  // `*generation` (optional) is set, before Decide returns, to the generation
  // of the snapshot whose configuration decides the request.
  virtual void Decide(const envoy::service::ratelimit::v3::RateLimitRequest& request,
                      envoy::service::ratelimit::v3::RateLimitResponse* response, Done done,
                      uint64_t* generation = nullptr) = 0;

  // The counters registry (shared by every configuration compiled with it).
  virtual RlsCounters& counters() const = 0;
  // Upstream's hit counters and the service's, in Prometheus text.
  virtual void AppendMetrics(std::string* out) const = 0;
  // Decisions per rule (RuleCounters::rule = the stats key, e.g.
  // "domain.key_value"; missing_key and rollback unused) and their latency.
  virtual std::vector<RuleCounters> DecisionCounters() const = 0;
  virtual LatencyCounts DecisionLatency() const = 0;

  // Standalone only (a Runtime's configuration reloads with its policy):
  // installs `config`, one swap.
  virtual void SetConfig(std::shared_ptr<const RlsConfig> config) = 0;
  virtual std::shared_ptr<const RlsConfig> config() const = 0;
  // Standalone only: loads rule files and swaps them in; on errors the
  // running configuration stays and the errors are returned.
  virtual std::vector<ConfigError> LoadFiles(const std::vector<std::string>& paths,
                                             const RlsCompileOptions& options) = 0;
};

// The response options of a decider's Enforcer::FrontEnd for `options`: its
// header styles and Retry-After jitter; no reason or unenforced header (Envoy
// forwards only the rate-limit headers and Retry-After).
ResponseOptions EnvoyResponseOptions(const RlsDecideOptions& options);

// What rule files may ask of a store of `scheme`: the Redis stores run every
// algorithm but sliding_log, so it is a load error there instead of
// UNAVAILABLE on every call.
RlsCompileOptions RlsCompileOptionsFor(StoreScheme scheme, Algorithm default_algorithm);

// What loading `paths` with `options` would refuse: every error of every file
// (the files that parsed are compiled even when another did not).
std::vector<ConfigError> CheckRlsConfigFiles(const std::vector<std::string>& paths,
                                             const RlsCompileOptions& options);

// tollgated's: `paths` compiled with `compile` as `runtime`'s companion, decided
// on its enforcer() through a front end of its own. kInvalidArgument when a
// file does not compile (every error in the message) or `decide`'s response
// options are refused.
Result<std::unique_ptr<EnvoyDecider>> AttachEnvoyDecider(Runtime& runtime,
                                                         std::vector<std::string> paths,
                                                         const RlsCompileOptions& compile,
                                                         const Clock* clock,
                                                         RlsDecideOptions decide);

// Standalone: decides on `enforcer` (borrowed; its PolicyStore carries no
// other attachment) with `config`. kInvalidArgument when one is null or
// `options`' response options are refused.
Result<std::unique_ptr<EnvoyDecider>> MakeEnvoyDecider(Enforcer* enforcer,
                                                       std::shared_ptr<const RlsConfig> config,
                                                       const Clock* clock,
                                                       RlsDecideOptions options = {});

}  // namespace tollgate::rls

#endif  // TOLLGATE_ENVOY_RLS_H_
