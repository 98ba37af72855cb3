#include "server/route.h"

namespace tollgate::server {
namespace {

bool IsGet(std::string_view method) { return method == "GET" || method == "HEAD"; }

RouteResult Allow(Endpoint e, bool allowed, std::string_view allow) {
  return {e, allowed ? std::string_view() : allow};
}

}  // namespace

Exposure ExposureOf(const ServerConfig& c) {
  Exposure e;
  e.gateway = !c.upstream.empty();
  e.decision = c.decision_on_main.value_or(!e.gateway);
  e.metrics = c.metrics_on_main.value_or(!e.gateway);
  return e;
}

RouteResult Route(ListenerKind kind, std::string_view method, std::string_view path,
                  const Exposure& exposure) {
  if (path == "/healthz" || path == "/readyz")
    return Allow(Endpoint::kHealth, IsGet(method), "GET");
  if (kind == ListenerKind::kAdmin) {
    if (path == "/metrics") return Allow(Endpoint::kMetrics, IsGet(method), "GET");
    if (path == "/v1/reload") return Allow(Endpoint::kAdmin, method == "POST", "POST");
    if (path == "/v1/policy" || path == "/v1/top" || path == "/v1/explain") {
      return Allow(Endpoint::kAdmin, IsGet(method), "GET");
    }
    return {Endpoint::kAdmin, {}};  // 404 after the token check: no probing without it
  }
  if (exposure.decision) {
    // /v1/auth takes any method: nginx's auth_request sends the client's.
    if (path == "/v1/auth") return {Endpoint::kAuth, {}};
    if (path == "/v1/decide") return Allow(Endpoint::kDecide, method == "POST", "POST");
  }
  if (exposure.metrics && path == "/metrics") {
    return Allow(Endpoint::kMetrics, IsGet(method), "GET");
  }
  return {exposure.gateway ? Endpoint::kGateway : Endpoint::kNotFound, {}};
}

}  // namespace tollgate::server
