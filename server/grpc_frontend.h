// GrpcFrontend: the Envoy rate limit service (gRPC, server/rls/) inside tollgated.
//
// When `grpc_listen` is set, tollgated also serves
// envoy.service.ratelimit.v3.RateLimitService on it, deciding on the same store
// as the HTTP side, with envoyproxy/ratelimit YAML files (`rls_config`) as its
// configuration (docs/envoy.md). Reloaded with the policy (SIGHUP, admin
// reload); counters appended to /metrics. Builds without the gRPC library get a
// stub whose Start fails with "grpc not available in this build".
//
// Thread safety: Reload/AppendMetrics may be called from any thread.
#ifndef TOLLGATE_SERVER_GRPC_FRONTEND_H_
#define TOLLGATE_SERVER_GRPC_FRONTEND_H_

#include <memory>
#include <string>
#include <vector>

#include "server/config.h"
#include "tollgate/clock.h"
#include "tollgate/status.h"
#include "tollgate/store.h"

namespace tollgate::server {

class GrpcFrontend {
 public:
  // `store` and `clock` are borrowed and must outlive the frontend.
  static Result<std::unique_ptr<GrpcFrontend>> Start(const ServerConfig& config, Store* store,
                                                     const Clock* clock);
  virtual ~GrpcFrontend() = default;
  virtual std::string address() const = 0;
  virtual std::vector<ConfigError> Reload() = 0;
  virtual void AppendMetrics(std::string* out) const = 0;
  virtual void Shutdown() = 0;
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_GRPC_FRONTEND_H_
