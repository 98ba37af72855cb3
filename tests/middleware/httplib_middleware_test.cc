// The cpp-httplib middleware end to end over real loopback sockets: 429 path,
// headers on allowed responses, cost from a header, shadow mode, auth ordering.
#include "tollgate/middleware/httplib.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "middleware_fixture.h"

namespace tollgate {
namespace {

using testing::CountersFor;
using testing::Pairs;

class HttplibMiddlewareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    middleware::HttplibOptions options;
    options.skip_paths = {"/healthz"};
    options.wait = [this](Nanos d) { waited_ns_ += d.count(); };
    // Authentication runs after the limiter: it must never see a throttled request.
    middleware::InstallHttplib(server_, *f_.enforcer, options,
                               [this](const httplib::Request& req, httplib::Response& res) {
                                 ++auth_calls_;
                                 if (req.get_header_value("x-api-key") == "bad") {
                                   res.status = 401;
                                   return httplib::Server::HandlerResponse::Handled;
                                 }
                                 return httplib::Server::HandlerResponse::Unhandled;
                               });
    auto handler = [this](const httplib::Request&, httplib::Response& res) {
      ++handler_calls_;
      res.set_content("ok", "text/plain");
    };
    server_.Get("/api/items", handler);
    server_.Post("/api/items", handler);
    server_.Get("/shadow/items", handler);
    // While this handler runs, a second request of its key is over the limit.
    server_.Get("/inflight/x", [this](const httplib::Request&, httplib::Response& res) {
      auto inner = Get("/inflight/x", {{"X-Api-Key", "k1"}});
      res.set_content(inner ? std::to_string(inner->status) : "error", "text/plain");
    });
    server_.Get("/healthz", handler);
    // A handler that sets a field tollgate owns (differently cased) and one of its own.
    server_.Get("/api/own-headers", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("ratelimit", "\"app\";r=99");
      res.set_header("X-App", "1");
      res.set_content("ok", "text/plain");
    });
    // An LLM-like route: the handler reports what the request cost (cost_source
    // "handler") or sets it as a response header (cost_source "response_header").
    auto llm = [](const httplib::Request& req, httplib::Response& res) {
      const int64_t tokens = std::stoll(req.get_param_value("tokens"));
      if (req.has_param("status")) res.status = std::stoi(req.get_param_value("status"));
      if (req.path.rfind("/llm", 0) == 0) {
        middleware::ReportHttplibCost(tokens);
      } else {
        res.set_header("X-LLM-Tokens", std::to_string(tokens));
      }
      res.set_content("ok", "text/plain");
    };
    server_.Get("/llm/chat", llm);
    server_.Get("/gen/chat", llm);
    // bind_to_any_port listens at once: clients may connect before the accept loop runs.
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  httplib::Result Get(const std::string& path, httplib::Headers headers) {
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(5);
    client.set_read_timeout(5);
    return client.Get(path, headers);
  }

  testing::EnforcerFixture f_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> auth_calls_{0};
  std::atomic<int> handler_calls_{0};
  std::atomic<int64_t> waited_ns_{0};
};

TEST_F(HttplibMiddlewareTest, AllowedResponsesCarryRateLimitHeaders) {
  auto res = Get("/api/items", {{"X-Api-Key", "k1"}});
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");
  const auto pairs = Pairs(res->headers);
  const RateLimitInfo info = ParseRateLimitHeaders(pairs, f_.clock.WallNow());
  EXPECT_EQ(info.source, RateLimitSource::kDraft11);
  ASSERT_NE(info.Tightest(), nullptr);
  EXPECT_EQ(info.Tightest()->name, "per-key");
  EXPECT_EQ(info.Tightest()->remaining, 1);
  EXPECT_EQ(info.Tightest()->quota, 2);
  EXPECT_FALSE(info.retry_after.has_value());
}

// A concurrency rule's lease is held while the handler runs and given back
// by FinishHttplib (post-routing) when it returned.
TEST_F(HttplibMiddlewareTest, ConcurrencyLeaseIsHeldWhileTheHandlerRuns) {
  for (int i = 0; i < 2; ++i) {
    auto res = Get("/inflight/x", {{"X-Api-Key", "k1"}});
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "429") << "the inner request, while the outer one held the slot";
  }
}

TEST_F(HttplibMiddlewareTest, OverTheLimitIs429BeforeAuthAndHandler) {
  for (int i = 0; i < 2; ++i) {
    auto res = Get("/api/items", {{"X-Api-Key", "k2"}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
  }
  auto res = Get("/api/items", {{"X-Api-Key", "k2"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/problem+json");
  EXPECT_EQ(res->get_header_value("Cache-Control"), "no-store");
  EXPECT_NE(res->body.find("quota-exceeded"), std::string::npos) << res->body;
  const auto pairs = Pairs(res->headers);
  const RateLimitInfo info = ParseRateLimitHeaders(pairs, f_.clock.WallNow());
  ASSERT_TRUE(info.retry_after.has_value());
  EXPECT_EQ(*info.retry_after, std::chrono::seconds(1));
  EXPECT_EQ(handler_calls_.load(), 2);
  EXPECT_EQ(auth_calls_.load(), 2) << "auth must not run for a throttled request";
  // Another key is unaffected; once the clock moves, k2 is allowed again.
  EXPECT_EQ(Get("/api/items", {{"X-Api-Key", "k3"}})->status, 200);
  f_.clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Get("/api/items", {{"X-Api-Key", "k2"}})->status, 200);
}

TEST_F(HttplibMiddlewareTest, HandlerCannotDuplicateTheFieldsTollgateOwns) {
  auto res = Get("/api/own-headers", {{"X-Api-Key", "k10"}});
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  ASSERT_EQ(res->get_header_value_count("RateLimit"), 1u);
  EXPECT_EQ(res->get_header_value_count("RateLimit-Policy"), 1u);
  EXPECT_NE(res->get_header_value("RateLimit").find("\"per-key\";r=1"), std::string::npos)
      << res->get_header_value("RateLimit");
  EXPECT_EQ(res->get_header_value("X-App"), "1");
  // Unmatched routes (404) carry them once too.
  res = Get("/api/nowhere", {{"X-Api-Key", "k11"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(res->get_header_value_count("RateLimit"), 1u);
}

TEST_F(HttplibMiddlewareTest, CostComesFromTheHeader) {
  auto res = Get("/api/items", {{"X-Api-Key", "k4"}, {"X-Cost", "2"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const auto pairs = Pairs(res->headers);
  EXPECT_EQ(ParseRateLimitHeaders(pairs, 0).Tightest()->remaining, 0);
  EXPECT_EQ(Get("/api/items", {{"X-Api-Key", "k4"}})->status, 429);
  // A cost above the burst can never fit.
  EXPECT_EQ(Get("/api/items", {{"X-Api-Key", "k5"}, {"X-Cost", "3"}})->status, 429);
}

// Burst 10, one token a second, on a clock that stands still: a request that
// reports 25 tokens leaves 15 in debt, so the next request of 1 fits in 16 s.
TEST_F(HttplibMiddlewareTest, CostReportedAfterTheHandlerGoesIntoDebt) {
  for (const std::string route : {"/llm/chat", "/gen/chat"}) {
    SCOPED_TRACE(route);
    const std::string key = "debt" + route;
    auto first = Get(route + "?tokens=25", {{"X-Api-Key", key}});
    ASSERT_TRUE(first);
    EXPECT_EQ(first->status, 200);
    auto denied = Get(route + "?tokens=1", {{"X-Api-Key", key}});
    ASSERT_TRUE(denied);
    EXPECT_EQ(denied->status, 429);
    EXPECT_EQ(denied->get_header_value("Retry-After"), "16");
    f_.clock.Advance(std::chrono::seconds(16));
    EXPECT_EQ(Get(route + "?tokens=1", {{"X-Api-Key", key}})->status, 200);
  }
  const std::vector<RuleCounters> counters = f_.enforcer->Counters();
  ASSERT_NE(CountersFor(counters, "llm-handler"), nullptr);
  ASSERT_NE(CountersFor(counters, "llm-header"), nullptr);
  EXPECT_EQ(CountersFor(counters, "llm-handler")->settled_cost, 24u);
  EXPECT_EQ(CountersFor(counters, "llm-header")->settled_cost, 24u);
}

TEST_F(HttplibMiddlewareTest, FailedHandlerAnswersAreRefunded) {
  for (int i = 0; i < 12; ++i) {  // more than the burst: every charge came back
    auto r = Get("/llm/chat?tokens=9&status=503", {{"X-Api-Key", "refunds"}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 503) << i;
  }
  EXPECT_EQ(Get("/llm/chat?tokens=10", {{"X-Api-Key", "refunds"}})->status, 200);
  EXPECT_EQ(Get("/llm/chat?tokens=1", {{"X-Api-Key", "refunds"}})->status, 429);
  const std::vector<RuleCounters> counters = f_.enforcer->Counters();
  const RuleCounters* c = CountersFor(counters, "llm-handler");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->refunds.size(), 1u);
  EXPECT_EQ(c->refunds[0].first, "5xx");
  EXPECT_EQ(c->refunds[0].second, 12u);
}

TEST_F(HttplibMiddlewareTest, ShadowModeNeverRejects) {
  for (int i = 0; i < 4; ++i) {
    auto res = Get("/shadow/items", {{"X-Api-Key", "k6"}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "ok");
  }
  const auto counters = f_.enforcer->Counters();
  const RuleCounters* shadow = CountersFor(counters, "shadowed");
  ASSERT_NE(shadow, nullptr);
  EXPECT_EQ(shadow->shadow_rejected, 3u);
  EXPECT_EQ(shadow->rejected, 0u);
}

TEST_F(HttplibMiddlewareTest, SkippedPathsAndUnmatchedRoutesPass) {
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Get("/healthz", {{"X-Api-Key", "k7"}})->status, 200);
  EXPECT_EQ(Get("/nowhere", {{"X-Api-Key", "k7"}})->status, 404);
  EXPECT_EQ(Get("/api/items", {{"X-Api-Key", "bad"}})->status, 401);
}

TEST_F(HttplibMiddlewareTest, RejectedBodyClosesTheConnectionSafely) {
  httplib::Client client("127.0.0.1", port_);
  client.set_keep_alive(true);
  client.set_read_timeout(5);
  const httplib::Headers h = {{"X-Api-Key", "k8"}};
  ASSERT_EQ(client.Post("/api/items", h, std::string(1000, 'x'), "text/plain")->status, 200);
  ASSERT_EQ(client.Post("/api/items", h, std::string(1000, 'x'), "text/plain")->status, 200);
  auto rejected = client.Post("/api/items", h, std::string(1000, 'y'), "text/plain");
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->status, 429);
  EXPECT_EQ(rejected->get_header_value("Connection"), "close");
  // The unread body must not be parsed as the next request.
  auto next = client.Get("/api/items", {{"X-Api-Key", "k9"}});
  ASSERT_TRUE(next) << httplib::to_string(next.error());
  EXPECT_EQ(next->status, 200);
  EXPECT_EQ(next->body, "ok");
}

// The handler's answers feed the rollback guards that watch the upstream:
// 5xx from the handler trips "upstream_errors", a slow handler
// "upstream_latency_p99" (it sleeps past the 5 ms max: no speed assumed).
TEST(HttplibMiddlewareRollbackTest, HandlerErrorsAndSlownessTripTheGuard) {
  for (const bool slow : {false, true}) {
    testing::EnforcerFixture f(slow ? testing::kSlowWatchedPolicy : testing::kWatchedPolicy);
    httplib::Server server;
    middleware::InstallHttplib(server, *f.enforcer);
    server.Get("/fail", [](const httplib::Request&, httplib::Response& res) { res.status = 503; });
    server.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the behaviour under test
      res.set_content("ok", "text/plain");
    });
    const int port = server.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port, 0);
    std::thread thread([&] { server.listen_after_bind(); });
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(5);
    std::vector<int> statuses;
    for (int i = 0; i < 4; ++i) {
      const auto all = f.enforcer->Counters();
      const RuleCounters* c = CountersFor(all, "watched");
      EXPECT_TRUE(c == nullptr || !c->rolled_back) << i;
      auto res = client.Get(slow ? "/slow" : "/fail", {{"X-Api-Key", "k" + std::to_string(i)}});
      statuses.push_back(res ? res->status : -1);
    }
    server.stop();
    thread.join();
    EXPECT_EQ(statuses, std::vector<int>(4, slow ? 200 : 503));
    const auto all = f.enforcer->Counters();
    ASSERT_NE(CountersFor(all, "watched"), nullptr);
    const RuleCounters c = *CountersFor(all, "watched");
    EXPECT_TRUE(c.rolled_back) << slow;
    EXPECT_EQ(c.rollback_trigger,
              slow ? RollbackTrigger::kUpstreamLatencyP99 : RollbackTrigger::kUpstreamErrors)
        << c.rollback_reason;
  }
}

TEST(HttplibMiddlewareFailureTest, UnreachableStoreIs503BeforeTheHandler) {
  testing::FailingEnforcerFixture f;
  httplib::Server server;
  std::atomic<int> handler_calls{0};
  middleware::InstallHttplib(server, *f.enforcer);
  server.Get("/api/items", [&](const httplib::Request&, httplib::Response& res) {
    ++handler_calls;
    res.set_content("ok", "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread thread([&] { server.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  auto res = client.Get("/api/items", {{"X-Api-Key", "k1"}});
  server.stop();
  thread.join();
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/problem+json");
  EXPECT_NE(res->body.find("temporary-reduced-capacity"), std::string::npos) << res->body;
  EXPECT_EQ(handler_calls.load(), 0);
}

// Soft limits and per-rule answers (issue 34) through the middleware: over a
// soft limit the handler still runs and the answer says so; a rule's own
// refusal (403, its header field and title) is sent as the Enforcer rendered it.
TEST(HttplibMiddlewareAnswerTest, SoftLimitAndARulesOwnRefusal) {
  testing::EnforcerFixture f(R"({"rules": [
    {"name": "paid", "limit_keys": ["header:x-api-key"], "match": {"path": {"prefix": "/paid"}},
     "algorithm_config": {"count": 1, "period": "1h", "burst": 1},
     "response": {"status": 403, "headers": [{"name": "X-Upgrade", "value": "/plans"}],
                  "title": "Plan {rule} used up"}},
    {"name": "soft", "limit_keys": ["header:x-api-key"], "soft": true,
     "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}]})");
  httplib::Server server;
  std::atomic<int> handler_calls{0};
  middleware::InstallHttplib(server, *f.enforcer);
  auto handler = [&](const httplib::Request&, httplib::Response& res) {
    ++handler_calls;
    res.set_content("ok", "text/plain");
  };
  server.Get("/api/items", handler);
  server.Get("/paid/items", handler);
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread thread([&] { server.listen_after_bind(); });
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5);
  auto first = client.Get("/api/items", {{"X-Api-Key", "k1"}});
  auto over = client.Get("/api/items", {{"X-Api-Key", "k1"}});
  auto paid = client.Get("/paid/items", {{"X-Api-Key", "k2"}});
  auto refused = client.Get("/paid/items", {{"X-Api-Key", "k2"}});
  server.stop();
  thread.join();
  ASSERT_TRUE(first && over && paid && refused);
  EXPECT_EQ(first->status, 200);
  EXPECT_FALSE(first->has_header("X-RateLimit-Soft-Exceeded"));
  EXPECT_EQ(over->status, 200);
  EXPECT_EQ(over->get_header_value("X-RateLimit-Soft-Exceeded"), "soft");
  EXPECT_EQ(paid->status, 200);
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(refused->get_header_value("X-Upgrade"), "/plans");
  EXPECT_EQ(refused->get_header_value("Content-Type"), "application/problem+json");
  EXPECT_NE(refused->body.find("\"title\":\"Plan paid used up\""), std::string::npos)
      << refused->body;
  EXPECT_EQ(handler_calls.load(), 3);
}

}  // namespace
}  // namespace tollgate
