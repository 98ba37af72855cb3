// grpc.health.v1.Health: Check from the caller's readiness (rls_health.h).
#include "rls/rls_health.h"

#include <string_view>

namespace tollgate::rls {

namespace {
namespace health = ::grpc::health::v1;
constexpr size_t kMaxServiceName = 256;
}  // namespace

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const health::HealthCheckRequest* request,
                                               health::HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const std::string_view service = request->service();
  if (service.size() > kMaxServiceName) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "service name longer than 256 bytes"));
    return reactor;
  }
  if (!service.empty() && service != "envoy.service.ratelimit.v3.RateLimitService") {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
    return reactor;
  }
  const bool serving = !serving_ || serving_();
  response->set_status(serving ? health::HealthCheckResponse::SERVING
                               : health::HealthCheckResponse::NOT_SERVING);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace tollgate::rls
