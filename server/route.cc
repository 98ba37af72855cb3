#include "server/route.h"

namespace tollgate::server {
namespace {

// Where a route is served: bits of a mask.
enum Where : uint8_t {
  kAdminListener = 1,
  kMainAlways = 2,
  kMainIfDecision = 4,  // Exposure::decision
  kMainIfMetrics = 8,   // Exposure::metrics
};

// The methods a route takes; GET also takes HEAD.
enum class Methods : uint8_t { kGet, kPost, kGetPut, kAny };

struct RouteEntry {
  std::string_view path;
  uint8_t where;
  Methods methods;
  Endpoint endpoint;
  Op op;
  bool needs_token;
  // The body is a JSON document: sent as Content-Type: application/json
  // (server/admin_guard.h), so a web page's simple request never carries one.
  bool json_body = false;
};

// Every endpoint tollgated serves itself (docs/operations.md, "Security model").
constexpr RouteEntry kRoutes[] = {
    {"/healthz", kAdminListener | kMainAlways, Methods::kGet, Endpoint::kHealth, Op::kHealthz,
     false},
    {"/readyz", kAdminListener | kMainAlways, Methods::kGet, Endpoint::kHealth, Op::kReadyz, false},
    // With an admin token, /metrics needs it on either listener (Prometheus sends it).
    {"/metrics", kAdminListener | kMainIfMetrics, Methods::kGet, Endpoint::kMetrics, Op::kMetrics,
     true},
    {"/v1/reload", kAdminListener, Methods::kPost, Endpoint::kAdmin, Op::kReload, true},
    {"/v1/policy", kAdminListener, Methods::kGetPut, Endpoint::kAdmin, Op::kPolicy, true, true},
    {"/v1/top", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kTop, true},
    {"/v1/explain", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kExplain, true},
    {"/v1/rollback", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kRollbackView, true},
    {"/v1/rollback/clear", kAdminListener, Methods::kPost, Endpoint::kAdmin, Op::kRollbackClear,
     true},
    {"/v1/rollback/trip", kAdminListener, Methods::kPost, Endpoint::kAdmin, Op::kRollbackTrip,
     true},
    // The status page (server/status_page.h): its files hold no data and need no token (a
    // browser's navigation cannot send one); the document it reads does.
    {"/ui", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kUi, false},
    {"/ui/app.js", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kUi, false},
    {"/ui/app.css", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kUi, false},
    {"/ui/icon.svg", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kUi, false},
    {"/v1/status", kAdminListener, Methods::kGet, Endpoint::kAdmin, Op::kStatus, true},
    {"/v1/keys/get", kAdminListener, Methods::kPost, Endpoint::kAdmin, Op::kKeyGet, true, true},
    {"/v1/keys/reset", kAdminListener, Methods::kPost, Endpoint::kAdmin, Op::kKeyReset, true, true},
    {"/v1/keys/set", kAdminListener, Methods::kPost, Endpoint::kAdmin, Op::kKeySet, true, true},
    // /v1/auth takes any method: nginx's auth_request sends the client's.
    {"/v1/auth", kMainIfDecision, Methods::kAny, Endpoint::kAuth, Op::kAuth, false},
    {"/v1/decide", kMainIfDecision, Methods::kPost, Endpoint::kDecide, Op::kDecide, false},
    // Gives back the concurrency leases a /v1/decide answer handed out.
    {"/v1/release", kMainIfDecision, Methods::kPost, Endpoint::kRelease, Op::kRelease, false},
};

// The admin operations that change state; the one list AdminScope::kRead is kept out of.
bool ChangesState(Op op, std::string_view method) {
  switch (op) {
    case Op::kReload:
    case Op::kRollbackClear:
    case Op::kRollbackTrip:
    case Op::kKeyReset:
    case Op::kKeySet:
      return true;
    case Op::kPolicy:
      return method == "PUT";
    default:
      return false;
  }
}

bool Serves(const RouteEntry& r, ListenerKind kind, const Exposure& exposure) {
  if (kind == ListenerKind::kAdmin) return r.where & kAdminListener;
  return (r.where & kMainAlways) || ((r.where & kMainIfDecision) && exposure.decision) ||
         ((r.where & kMainIfMetrics) && exposure.metrics);
}

// The value of Allow when `method` is not one of `methods`, else "".
std::string_view Disallowed(Methods methods, std::string_view method) {
  switch (methods) {
    case Methods::kGet:
      return method == "GET" || method == "HEAD" ? "" : "GET";
    case Methods::kPost:
      return method == "POST" ? "" : "POST";
    case Methods::kGetPut:
      return method == "GET" || method == "HEAD" || method == "PUT" ? "" : "GET, PUT";
    case Methods::kAny:
      return "";
  }
  return "";
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
  for (const RouteEntry& r : kRoutes) {
    if (r.path == path && Serves(r, kind, exposure)) {
      return {r.endpoint,  Disallowed(r.methods, method), r.op, r.needs_token,
              r.json_body, ChangesState(r.op, method)};
    }
  }
  if (kind == ListenerKind::kAdmin) {
    // 404 after the token check: no probing without it.
    return {Endpoint::kAdmin, {}, Op::kAdminNotFound, true};
  }
  if (exposure.gateway) return {Endpoint::kGateway, {}, Op::kGateway, false};
  return {Endpoint::kNotFound, {}, Op::kNotFound, false};
}

}  // namespace tollgate::server
