// Route(): which endpoint each listener serves, and where decisions and
// metrics are exposed (server/route.h).
#include <gtest/gtest.h>

#include <utility>

#include "server/route.h"

namespace tollgate::server {
namespace {

Exposure Gateway() {
  return ExposureOf([] {
    ServerConfig c;
    c.upstream = "http://127.0.0.1:1";
    return c;
  }());
}

TEST(Route, ExposureDefaultsDependOnGatewayMode) {
  ServerConfig c;
  Exposure service = ExposureOf(c);
  EXPECT_FALSE(service.gateway);
  EXPECT_TRUE(service.decision);
  EXPECT_TRUE(service.metrics);
  Exposure gw = Gateway();
  EXPECT_TRUE(gw.gateway);
  EXPECT_FALSE(gw.decision);
  EXPECT_FALSE(gw.metrics);
  c.upstream = "http://127.0.0.1:1";
  c.decision_on_main = true;
  c.metrics_on_main = true;
  EXPECT_TRUE(ExposureOf(c).decision);
  EXPECT_TRUE(ExposureOf(c).metrics);
  c.upstream.clear();
  c.decision_on_main = false;
  c.metrics_on_main = false;
  EXPECT_FALSE(ExposureOf(c).decision);
  EXPECT_FALSE(ExposureOf(c).metrics);
}

TEST(Route, GatewayListenerServesOnlyTheGatewayAndHealthByDefault) {
  const Exposure gw = Gateway();
  for (const char* path : {"/v1/decide", "/v1/auth", "/metrics", "/v1/reload", "/v1/policy",
                           "/v1/top", "/v1/explain", "/v1/keys/get", "/v1/keys/reset",
                           "/v1/keys/set", "/", "/api/x", "/v1/Decide", "/metrics/"}) {
    for (const char* method : {"GET", "POST", "HEAD", "PUT"}) {
      RouteResult r = Route(ListenerKind::kMain, method, path, gw);
      EXPECT_EQ(r.endpoint, Endpoint::kGateway) << method << " " << path;
      EXPECT_TRUE(r.allow.empty());
    }
  }
  EXPECT_EQ(Route(ListenerKind::kMain, "GET", "/healthz", gw).endpoint, Endpoint::kHealth);
  EXPECT_EQ(Route(ListenerKind::kMain, "HEAD", "/readyz", gw).endpoint, Endpoint::kHealth);
}

TEST(Route, DecisionServiceListener) {
  const Exposure service = ExposureOf(ServerConfig{});
  EXPECT_EQ(Route(ListenerKind::kMain, "POST", "/v1/decide", service).endpoint, Endpoint::kDecide);
  RouteResult get_decide = Route(ListenerKind::kMain, "GET", "/v1/decide", service);
  EXPECT_EQ(get_decide.endpoint, Endpoint::kDecide);
  EXPECT_EQ(get_decide.allow, "POST");
  EXPECT_EQ(Route(ListenerKind::kMain, "PATCH", "/v1/auth", service).endpoint, Endpoint::kAuth);
  EXPECT_TRUE(Route(ListenerKind::kMain, "PATCH", "/v1/auth", service).allow.empty());
  EXPECT_EQ(Route(ListenerKind::kMain, "GET", "/metrics", service).endpoint, Endpoint::kMetrics);
  EXPECT_EQ(Route(ListenerKind::kMain, "POST", "/metrics", service).allow, "GET");
  EXPECT_EQ(Route(ListenerKind::kMain, "POST", "/healthz", service).allow, "GET");
  EXPECT_EQ(Route(ListenerKind::kMain, "GET", "/v1/reload", service).endpoint, Endpoint::kNotFound);
  EXPECT_EQ(Route(ListenerKind::kMain, "GET", "/x", service).endpoint, Endpoint::kNotFound);
}

TEST(Route, AdminListenerNeverDecides) {
  for (const Exposure& e : {Gateway(), ExposureOf(ServerConfig{})}) {
    EXPECT_EQ(Route(ListenerKind::kAdmin, "POST", "/v1/decide", e).endpoint, Endpoint::kAdmin);
    EXPECT_EQ(Route(ListenerKind::kAdmin, "GET", "/v1/auth", e).endpoint, Endpoint::kAdmin);
    EXPECT_EQ(Route(ListenerKind::kAdmin, "GET", "/metrics", e).endpoint, Endpoint::kMetrics);
    EXPECT_EQ(Route(ListenerKind::kAdmin, "POST", "/v1/reload", e).endpoint, Endpoint::kAdmin);
    EXPECT_EQ(Route(ListenerKind::kAdmin, "GET", "/v1/reload", e).allow, "POST");
    EXPECT_EQ(Route(ListenerKind::kAdmin, "POST", "/v1/policy", e).allow, "GET, PUT");
    EXPECT_EQ(Route(ListenerKind::kAdmin, "PUT", "/v1/policy", e).allow, "");
    EXPECT_EQ(Route(ListenerKind::kAdmin, "GET", "/healthz", e).endpoint, Endpoint::kHealth);
    EXPECT_EQ(Route(ListenerKind::kAdmin, "GET", "/api/x", e).endpoint, Endpoint::kAdmin);
    // Key administration: admin only, POST only, always behind the token.
    for (auto [path, op] :
         {std::pair{"/v1/keys/get", Op::kKeyGet}, std::pair{"/v1/keys/reset", Op::kKeyReset},
          std::pair{"/v1/keys/set", Op::kKeySet}}) {
      RouteResult r = Route(ListenerKind::kAdmin, "POST", path, e);
      EXPECT_EQ(r.op, op) << path;
      EXPECT_TRUE(r.needs_token) << path;
      EXPECT_EQ(Route(ListenerKind::kAdmin, "GET", path, e).allow, "POST") << path;
      EXPECT_NE(Route(ListenerKind::kMain, "POST", path, e).op, op) << path;
    }
  }
}

// The status page (issue 38): its files need no token (they hold no data), its
// data does; only GET; admin listener only; no other path under /ui is served.
TEST(Route, StatusPageFilesAreOpenItsDataNeedsTheToken) {
  for (const Exposure& e : {Gateway(), ExposureOf(ServerConfig{})}) {
    for (const char* path : {"/ui", "/ui/app.js", "/ui/app.css", "/ui/icon.svg"}) {
      RouteResult r = Route(ListenerKind::kAdmin, "GET", path, e);
      EXPECT_EQ(r.op, Op::kUi) << path;
      EXPECT_FALSE(r.needs_token) << path;
      EXPECT_FALSE(r.changes_state) << path;
      EXPECT_EQ(Route(ListenerKind::kAdmin, "POST", path, e).allow, "GET") << path;
      EXPECT_NE(Route(ListenerKind::kMain, "GET", path, e).op, Op::kUi) << path;
    }
    RouteResult status = Route(ListenerKind::kAdmin, "GET", "/v1/status", e);
    EXPECT_EQ(status.op, Op::kStatus);
    EXPECT_TRUE(status.needs_token);
    EXPECT_FALSE(status.changes_state);
    EXPECT_NE(Route(ListenerKind::kMain, "GET", "/v1/status", e).op, Op::kStatus);
    for (const char* path : {"/ui/", "/ui/../v1/policy", "/UI", "/ui/app.js/"}) {
      RouteResult r = Route(ListenerKind::kAdmin, "GET", path, e);
      EXPECT_EQ(r.op, Op::kAdminNotFound) << path;
      EXPECT_TRUE(r.needs_token) << path;
    }
  }
}

}  // namespace
}  // namespace tollgate::server
