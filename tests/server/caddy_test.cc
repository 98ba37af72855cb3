// Caddy (Debian package) in front, running the shipped examples/caddy/Caddyfile
// as shipped (from its folder, addresses from the environment): forward_auth to
// tollgated's /v1/auth; allowed requests reach the upstream and their answers
// carry the RateLimit fields; a refused one is 429 with Retry-After and the
// fields, never reaching the upstream.
#include <gtest/gtest.h>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "testing/caddy_server.h"
#include "testing/nginx_server.h"

namespace tollgate::testing {
namespace {

TEST(CaddyForwardAuth, ShippedCaddyfileMapsRefusalsTo429WithHeaders) {
  if (CaddyServer::BinaryPath().empty()) GTEST_SKIP() << "caddy is not installed";
  server::ServerConfig cfg = TestServer::DefaultConfig();
  cfg.trusted_proxies = {"127.0.0.1"};
  std::string error;
  auto tollgated = TestServer::Start(cfg, TightPolicy(), &error);
  ASSERT_TRUE(tollgated) << error;
  TestUpstream app;
  const int port = NginxServer::FreePort();
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  auto caddy =
      CaddyServer::Start(std::string(src ? src : ".") + "/examples/caddy/Caddyfile",
                         {{"CADDY_PORT", std::to_string(port)},
                          {"TOLLGATE_HTTP", "127.0.0.1:" + std::to_string(tollgated->port)},
                          {"UPSTREAM", "127.0.0.1:" + std::to_string(app.port())}},
                         port);
  ASSERT_TRUE(caddy) << caddy.error;

  HttpConnection c(port);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Request("GET", "/api/items?page=2", {{"X-Api-Key", "caddy-key"}});
    ASSERT_TRUE(r.ok) << r.error << caddy->Output();
    ASSERT_EQ(r.status, 200) << r.body << caddy->Output();
    EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=" + std::to_string(2 - i)), std::string::npos)
        << r.Header("ratelimit");
    EXPECT_NE(r.Header("ratelimit-policy").find("\"keyed\";q=3"), std::string::npos);
    EXPECT_FALSE(r.Has("retry-after"));
  }
  auto r = c.Request("GET", "/api/items", {{"X-Api-Key", "caddy-key"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 429) << r.body << caddy->Output();
  EXPECT_GE(std::atoi(r.Header("retry-after").c_str()), 1) << r.Header("retry-after");
  EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=0"), std::string::npos)
      << r.Header("ratelimit");
  EXPECT_NE(r.Header("x-ratelimit-reason").find("keyed"), std::string::npos);
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  EXPECT_EQ(app.requests(), 3);
  // Without a key only the per-address rule applies: its own field.
  r = c.Request("GET", "/api/items");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.Header("ratelimit").find("\"per-ip\""), std::string::npos) << r.Header("ratelimit");
  EXPECT_EQ(r.Header("ratelimit").find("keyed"), std::string::npos) << r.Header("ratelimit");
}

}  // namespace
}  // namespace tollgate::testing
