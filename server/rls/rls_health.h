// HealthService: grpc.health.v1.Health (gRPC's health checking protocol) on
// the RLS listener, for Envoy's gRPC health checker, Kubernetes' grpc probes
// and grpc_health_probe. Transport only: what "serving" means is the
// caller's (RlsServerOptions::serving; in tollgated: the Runtime's policy and
// Envoy configuration are installed, the store is ready, and the process is
// not draining).
//
// Check answers SERVING or NOT_SERVING for the service names "" (the whole
// server) and "envoy.service.ratelimit.v3.RateLimitService", and NOT_FOUND for
// any other name (as the protocol asks). Watch answers UNIMPLEMENTED, which
// the protocol's clients take as "no health watching" (docs/envoy.md).
// Service names longer than 256 bytes are INVALID_ARGUMENT.
//
// Thread safety: calls run on gRPC's threads at any time; `serving` must be
// safe to call from any thread and must not block. Ownership: `serving` is
// copied; what it reads must outlive the server.
#ifndef TOLLGATE_SERVER_RLS_RLS_HEALTH_H_
#define TOLLGATE_SERVER_RLS_RLS_HEALTH_H_

#include <functional>
#include <utility>

#include "grpc/health/v1/health.grpc.pb.h"

namespace tollgate::rls {

class HealthService final : public ::grpc::health::v1::Health::CallbackService {
 public:
  // `serving` null: serving whenever the server runs.
  explicit HealthService(std::function<bool()> serving) : serving_(std::move(serving)) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const ::grpc::health::v1::HealthCheckRequest* request,
                                  ::grpc::health::v1::HealthCheckResponse* response) override;

 private:
  const std::function<bool()> serving_;
};

}  // namespace tollgate::rls

#endif  // TOLLGATE_SERVER_RLS_RLS_HEALTH_H_
