// nginx (Debian package) in front, running the shipped examples/nginx/tollgate.conf:
// client -> nginx -> auth_request -> tollgated /v1/auth; allowed -> upstream.
// Runs once per store: local, and a real redis-server when Redis is in the build.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "server/server_fixture.h"
#include "server/test_http.h"
#include "testing/nginx_server.h"
#if TOLLGATE_TEST_REDIS
#include "testing/redis_server.h"
#endif

namespace tollgate::testing {
namespace {

using json = nlohmann::json;

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

std::string ExampleConfig() {
  const char* src = std::getenv("TOLLGATE_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : ".") + "/examples/nginx/tollgate.conf");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class NginxAuthRequest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (NginxServer::BinaryPath().empty()) GTEST_SKIP() << "nginx is not installed";
    if (GetParam() == "redis") {
#if TOLLGATE_TEST_REDIS
      redis_ = RedisServer::Start();
      if (redis_.missing) GTEST_SKIP() << redis_.error;
      ASSERT_TRUE(redis_.server != nullptr) << redis_.error;
      store_ = redis_->url();
#else
      GTEST_SKIP() << "the Redis store is not part of this build";
#endif
    }
  }
  std::string store_ = "local";
#if TOLLGATE_TEST_REDIS
  RedisServer::StartResult redis_;
#endif
};

TEST_P(NginxAuthRequest, ShippedConfigMapsRejectionsTo429WithHeaders) {
  std::string conf = ExampleConfig();
  ASSERT_NE(conf.find("127.0.0.1:8080"), std::string::npos) << "example config not found";

  server::ServerConfig cfg = TestServer::DefaultConfig();
  cfg.store = store_;
  cfg.trusted_proxies = {"127.0.0.1"};
  std::string error;
  auto tollgated = TestServer::Start(cfg, TightPolicy(), &error);
  ASSERT_TRUE(tollgated) << error;
  TestUpstream app;
  int port = NginxServer::FreePort();
  conf = ReplaceAll(conf, "127.0.0.1:8080", "127.0.0.1:" + std::to_string(tollgated->port));
  conf = ReplaceAll(conf, "127.0.0.1:3000", "127.0.0.1:" + std::to_string(app.port()));
  conf = ReplaceAll(conf, "127.0.0.1:8000", "127.0.0.1:" + std::to_string(port));
  auto nginx = NginxServer::Start(conf, port);
  ASSERT_TRUE(nginx) << nginx.error;

  HttpConnection c(port);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Request("POST", "/api/items?page=2", {{"X-Api-Key", "nginx-key"}}, "payload");
    ASSERT_TRUE(r.ok) << r.error << nginx->ErrorLog();
    ASSERT_EQ(r.status, 200) << r.body << nginx->ErrorLog();
    EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=" + std::to_string(2 - i)), std::string::npos)
        << r.Header("ratelimit");
    EXPECT_NE(r.Header("ratelimit-policy").find("\"keyed\";q=3"), std::string::npos);
    EXPECT_FALSE(r.Has("retry-after"));
    json j = json::parse(r.body);
    EXPECT_EQ(j["target"], "/api/items?page=2");
    EXPECT_EQ(j["body_bytes"], 7);  // the body reached the app (never tollgated)
  }
  auto r = c.Request("POST", "/api/items", {{"X-Api-Key", "nginx-key"}}, "payload");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 429) << r.body << nginx->ErrorLog();
  EXPECT_GE(std::atoi(r.Header("retry-after").c_str()), 1);
  EXPECT_NE(r.Header("ratelimit").find("\"keyed\";r=0"), std::string::npos);
  EXPECT_EQ(r.Header("cache-control"), "no-store");
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  EXPECT_EQ(json::parse(r.body)["status"], 429);
  EXPECT_EQ(app.requests(), 3);

  // The app's own errors still carry the headers (add_header ... always).
  r = c.Request("GET", "/status?code=404", {{"X-Api-Key", "other-key"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(r.Has("ratelimit"));
  EXPECT_EQ(nginx->ErrorLog().find("auth request unexpected status"), std::string::npos);
#if TOLLGATE_TEST_REDIS
  // The Redis run really decided in Redis: the bucket keys live there.
  if (redis_) {
    EXPECT_NE(redis_->Command({"DBSIZE"}), "0");
  }
#endif
}

// A rule's own status (issue 34's per-rule answers) reaches the client
// through the shipped config: /v1/auth answers 403 with X-RateLimit-Status,
// which the config maps back (451 and 403 here; 429 for the default answer).
TEST_P(NginxAuthRequest, ShippedConfigMapsARulesOwnStatus) {
  std::string conf = ExampleConfig();
  server::ServerConfig cfg = TestServer::DefaultConfig();
  cfg.store = store_;
  cfg.trusted_proxies = {"127.0.0.1"};
  std::string error;
  auto tollgated = TestServer::Start(cfg, R"({"rules": [
    {"name": "legal", "match": {"path": {"prefix": "/legal/"}}, "limit_keys": ["ip"],
     "algorithm_config": {"count": 1, "period": "1h", "burst": 1},
     "response": {"status": 451}},
    {"name": "forbidden", "match": {"path": {"prefix": "/forbidden/"}}, "limit_keys": ["ip"],
     "algorithm_config": {"count": 1, "period": "1h", "burst": 1},
     "response": {"status": 403}},
    {"name": "plain", "match": {"path": {"prefix": "/plain/"}}, "limit_keys": ["ip"],
     "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}
  ]})",
                                     &error);
  ASSERT_TRUE(tollgated) << error;
  TestUpstream app;
  int port = NginxServer::FreePort();
  conf = ReplaceAll(conf, "127.0.0.1:8080", "127.0.0.1:" + std::to_string(tollgated->port));
  conf = ReplaceAll(conf, "127.0.0.1:3000", "127.0.0.1:" + std::to_string(app.port()));
  conf = ReplaceAll(conf, "127.0.0.1:8000", "127.0.0.1:" + std::to_string(port));
  auto nginx = NginxServer::Start(conf, port);
  ASSERT_TRUE(nginx) << nginx.error;
  for (const auto& [prefix, status] : std::vector<std::pair<std::string, int>>{
           {"/legal/", 451}, {"/forbidden/", 403}, {"/plain/", 429}}) {
    HttpConnection c(port);
    auto first = c.Request("GET", prefix + "a");
    ASSERT_EQ(first.status, 200) << prefix << " " << first.body << nginx->ErrorLog();
    auto r = c.Request("GET", prefix + "b");
    EXPECT_EQ(r.status, status) << prefix << " " << r.body << nginx->ErrorLog();
    EXPECT_EQ(r.Header("content-type"), "application/problem+json") << prefix;
    EXPECT_EQ(json::parse(r.body)["status"], status) << prefix;
    EXPECT_GE(std::atoi(r.Header("retry-after").c_str()), 1) << prefix;
  }
  EXPECT_EQ(app.requests(), 3);
}

INSTANTIATE_TEST_SUITE_P(Stores, NginxAuthRequest, ::testing::Values("local", "redis"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tollgate::testing
