// GrpcFrontend: the Envoy rate limit service (gRPC, server/rls/) inside tollgated.
//
// When `grpc_listen` is set, tollgated also serves
// envoy.service.ratelimit.v3.RateLimitService on it, deciding on the same store
// as the HTTP side, with envoyproxy/ratelimit YAML files (`rls_config`) as its
// configuration (docs/envoy.md). The engine is the Runtime's: the YAML is its
// companion (rls::RlsCompanion), published with the policy by one swap and
// reloaded with it (SIGHUP, admin reload, PUT); decisions run on its one
// Enforcer, HTTP's, through the decider's own front end (grpc_header_styles,
// grpc_retry_after_jitter; Enforcer::FrontEnd). This class owns only the
// transport and the decider reading that snapshot. Counters
// appended to /metrics, and its decisions are rendered into
// tollgate_decisions_total and tollgate_decision_duration_seconds with the label
// frontend="grpc" (rule = the YAML's stats key). Builds without the gRPC library get a
// stub whose Start fails with "grpc not available in this build".
//
// The listener also serves Envoy's Rate Limit Quota Service (RLQS,
// server/rls/rlqs_service.h) over the same rule files, Enforcer and store
// (docs/envoy.md, "Rate Limit Quota Service"); its metrics are appended with
// the RLS ones. It also serves grpc.health.v1.Health (server/rls/rls_health.h):
// SERVING while the Runtime is Ready() with its Envoy configuration installed,
// NOT_SERVING once the process drains (Drain).
//
// With `grpc.tls`, tls() is the port's certificates (server/grpc_tls.h),
// reloaded with the other listeners' on SIGHUP and when their files change.
//
// Thread safety: Reload/AppendMetrics/Drain may be called from any thread.
#ifndef TOLLGATE_SERVER_GRPC_FRONTEND_H_
#define TOLLGATE_SERVER_GRPC_FRONTEND_H_

#include <memory>
#include <string>
#include <vector>

#include "server/config.h"
#include "server/metrics.h"
#include "server/tls_reload.h"
#include "tollgate/clock.h"
#include "tollgate/policy.h"
#include "tollgate/runtime.h"
#include "tollgate/status.h"
#include "tollgate/trace.h"

namespace tollgate::server {

class GrpcFrontend {
 public:
  // Attaches the rule files to `engine` (created with RuntimeOptions::envoy)
  // and serves. `engine`, `clock` and `tracer` (null: tracing off; RLQS rounds
  // are its decision spans) are borrowed and must outlive the frontend.
  static Result<std::unique_ptr<GrpcFrontend>> Start(const ServerConfig& config,
                                                     tollgate::Runtime& engine, const Clock* clock,
                                                     trace::DecisionTracer* tracer = nullptr);
  // What Start would refuse in `config`'s rls_config YAML, compiled for the
  // configured store as Start does (e.g. sliding_log is an error on Redis):
  // every error, each with its file and path. For `tollgated --check`.
  static std::vector<ConfigError> CheckConfig(const ServerConfig& config);
  virtual ~GrpcFrontend() = default;
  virtual std::string address() const = 0;
  virtual void AppendMetrics(std::string* out) const = 0;
  // Decisions per rule (RuleCounters::rule = the stats key, e.g.
  // "domain.key_value"; missing_key and rollback unused) and their latency.
  virtual std::vector<RuleCounters> DecisionCounters() const = 0;
  virtual ServerMetrics::LatencyCounts DecisionLatency() const = 0;
  // grpc.health.v1.Health answers NOT_SERVING from now on (the process is
  // draining); calls are still served until Shutdown.
  virtual void Drain() = 0;
  virtual void Shutdown() = 0;
  // The port's certificates; null without grpc.tls.
  virtual TlsReloadable* tls() = 0;
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_GRPC_FRONTEND_H_
