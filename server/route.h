// Internal: which endpoint of tollgated a request reaches, as a pure function.
//
// Exposure (what each listener serves; docs/operations.md, "Security model"):
//
//   endpoint                     main listener                      admin listener
//   /healthz, /readyz            always                             always
//   /v1/decide, /v1/auth,        decision_on_main (default: on      never
//   /v1/release                  without a gateway, off with one)
//   /metrics                     metrics_on_main (same default)     always (admin token)
//   /v1/reload, /v1/policy       never                              always (admin token)
//   (GET, PUT), /v1/top,
//   /v1/explain, /v1/rollback,
//   /v1/keys/get,
//   /v1/keys/reset, /v1/keys/set,
//   /v1/rollback/clear,
//   /v1/rollback/trip (POST),
//   /v1/status
//   /ui, /ui/app.js, /ui/app.css never                              always (no token: the
//   /ui/icon.svg                                                    page's files, no data)
//   anything else                the gateway (gateway mode), else   404 (admin token)
//                                404
//
// The routes are one table (route.cc, kRoutes): path, the listeners that
// serve it, the methods it takes, its endpoint (for metrics and logs), its
// operation (the handler the session dispatches to, server/endpoints.h),
// whether it needs the admin token and whether its body is JSON (which the
// admin guard, server/admin_guard.h, holds to Content-Type: application/json).
// A path is compared byte for byte (no
// decoding, no case folding): "/v1/Decide" or "/v1/decide/" on the main
// listener of a gateway is proxied like any path. Route also answers which
// methods the endpoint takes, so the session can answer 405 with Allow before
// reading any body, and whether the admin token is needed, which the session
// checks in one place (CheckAdminRequest) for every route that says so, with
// the admin listener's Host and the checks that keep a web page out.
//
// Thread safety: pure functions of their arguments.
#ifndef TOLLGATE_SERVER_ROUTE_H_
#define TOLLGATE_SERVER_ROUTE_H_

#include <string_view>

#include "server/config.h"
#include "server/metrics.h"

namespace tollgate::server {

enum class ListenerKind { kMain, kAdmin };

// What the main listener serves besides the gateway and the health checks.
struct Exposure {
  bool gateway = false;   // gateway mode: unknown paths go upstream
  bool decision = false;  // /v1/decide, /v1/release and /v1/auth
  bool metrics = false;   // /metrics
};
Exposure ExposureOf(const ServerConfig& config);

// What the session does with a routed request: a handler of its own
// (server/endpoints.h), or the gateway (decide, then proxy).
enum class Op : uint8_t {
  kHealthz,
  kReadyz,
  kMetrics,
  kReload,
  kPolicy,
  kTop,
  kExplain,
  kRollbackView,   // GET /v1/rollback
  kRollbackClear,  // POST /v1/rollback/clear
  kRollbackTrip,   // POST /v1/rollback/trip
  kKeyGet,         // key administration (server/key_admin.h)
  kKeyReset,
  kKeySet,
  kAuth,
  kDecide,
  kRelease,
  kUi,             // GET /ui and its files /ui/*: the status page (server/status_page.h)
  kStatus,         // GET /v1/status: the document the status page reads
  kAdminNotFound,  // any other path on the admin listener (after the token check)
  kNotFound,       // any other path on a main listener without a gateway
  kGateway,        // any other path on a gateway's main listener
  kCount
};

struct RouteResult {
  Endpoint endpoint = Endpoint::kNotFound;
  // Non-empty: the method is not allowed here; the value of the Allow field.
  std::string_view allow;
  Op op = Op::kNotFound;
  bool needs_token = false;  // the admin token, when one is configured
  bool json_body = false;    // its body (PUT, POST) is JSON: Content-Type application/json
  // The request changes state (reload, PUT /v1/policy, key set and reset,
  // rollback trip and clear): a read-scoped admin token may not send it
  // (server/secrets.h, AdminScope). Every other admin route only reads.
  bool changes_state = false;
};

// `method` is the request's method token as sent ("GET", "HEAD", "POST"...),
// `path` the target's path (before any '?').
RouteResult Route(ListenerKind kind, std::string_view method, std::string_view path,
                  const Exposure& exposure);

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_ROUTE_H_
