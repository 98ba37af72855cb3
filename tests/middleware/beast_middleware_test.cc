// The Beast adapter end to end over real loopback sockets: a small synchronous
// Beast server (one connection at a time, keep-alive) wraps its handler with
// BeastRateLimited; an async session path uses CheckBeastRequestAsync.
#include "tollgate/middleware/beast.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <thread>

#include "middleware_fixture.h"

namespace tollgate {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using testing::CountersFor;
using testing::Pairs;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A blocking Beast server on 127.0.0.1:0 that serves connections one after the
// other on its own thread until Stop().
class BeastServer {
 public:
  using Handler = std::function<Response(const Request&, std::string_view peer)>;

  explicit BeastServer(Handler handler)
      : handler_(std::move(handler)),
        acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Run(); });
  }
  ~BeastServer() { Stop(); }

  void Stop() {
    if (stopping_.exchange(true)) return;
    // Wake the blocking accept with one last connection.
    beast::error_code ec;
    tcp::socket poke(ioc_);
    poke.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  void Run() {
    while (!stopping_) {
      tcp::socket socket(ioc_);
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stopping_) break;
      Serve(socket);
    }
  }

  void Serve(tcp::socket& socket) {
    beast::flat_buffer buffer;
    beast::error_code ec;
    const std::string peer = socket.remote_endpoint(ec).address().to_string();
    // Every connection gets a read timeout: a stuck client cannot hang the test.
    struct timeval tv = {5, 0};
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (true) {
      Request req;
      http::read(socket, buffer, req, ec);
      if (ec) break;
      Response res = handler_(req, peer);
      http::write(socket, res, ec);
      if (ec || !res.keep_alive()) break;
    }
    socket.shutdown(tcp::socket::shutdown_send, ec);
  }

  Handler handler_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

Response Ok(const Request& req) {
  Response res{http::status::ok, req.version()};
  res.set(http::field::content_type, "text/plain");
  res.keep_alive(req.keep_alive());
  res.body() = "ok";
  res.prepare_payload();
  return res;
}

class BeastMiddlewareTest : public ::testing::Test {
 protected:
  BeastMiddlewareTest()
      : server_(middleware::BeastRateLimited(*f_.enforcer,
                                             [this](const Request& req) {
                                               ++handler_calls_;
                                               return Ok(req);
                                             },
                                             {.skip_paths = {"/healthz"}})) {}

  httplib::Result Get(const std::string& path, httplib::Headers headers) {
    httplib::Client client("127.0.0.1", server_.port());
    client.set_connection_timeout(5);
    client.set_read_timeout(5);
    return client.Get(path, headers);
  }

  testing::EnforcerFixture f_;
  std::atomic<int> handler_calls_{0};
  BeastServer server_;
};

TEST_F(BeastMiddlewareTest, AllowedResponsesCarryRateLimitHeaders) {
  auto res = Get("/api/items?x=1", {{"X-Api-Key", "k1"}});
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");
  const auto pairs = Pairs(res->headers);
  const RateLimitInfo info = ParseRateLimitHeaders(pairs, f_.clock.WallNow());
  EXPECT_EQ(info.source, RateLimitSource::kDraft11);
  ASSERT_NE(info.Tightest(), nullptr);
  EXPECT_EQ(info.Tightest()->name, "per-key");
  EXPECT_EQ(info.Tightest()->remaining, 1);
}

TEST_F(BeastMiddlewareTest, OverTheLimitIs429WithoutCallingTheHandler) {
  ASSERT_EQ(Get("/api/items", {{"X-Api-Key", "k2"}})->status, 200);
  ASSERT_EQ(Get("/api/items", {{"X-Api-Key", "k2"}})->status, 200);
  auto res = Get("/api/items", {{"X-Api-Key", "k2"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/problem+json");
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_NE(res->body.find("quota-exceeded"), std::string::npos);
  EXPECT_EQ(handler_calls_.load(), 2);
  f_.clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Get("/api/items", {{"X-Api-Key", "k2"}})->status, 200);
}

TEST_F(BeastMiddlewareTest, KeepAliveSurvivesARejection) {
  httplib::Client client("127.0.0.1", server_.port());
  client.set_keep_alive(true);
  client.set_read_timeout(5);
  const httplib::Headers h = {{"X-Api-Key", "k3"}};
  EXPECT_EQ(client.Post("/api/items", h, "body", "text/plain")->status, 200);
  EXPECT_EQ(client.Post("/api/items", h, "body", "text/plain")->status, 200);
  auto rejected = client.Post("/api/items", h, "body", "text/plain");
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->status, 429);
  auto next = client.Get("/api/items", {{"X-Api-Key", "k4"}});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
}

TEST_F(BeastMiddlewareTest, CostComesFromTheHeader) {
  auto res = Get("/api/items", {{"X-Api-Key", "k5"}, {"X-Cost", "2"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const auto pairs = Pairs(res->headers);
  EXPECT_EQ(ParseRateLimitHeaders(pairs, 0).Tightest()->remaining, 0);
  EXPECT_EQ(Get("/api/items", {{"X-Api-Key", "k5"}})->status, 429);
}

TEST_F(BeastMiddlewareTest, ShadowModeNeverRejects) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Get("/shadow/items", {{"X-Api-Key", "k6"}})->status, 200);
  const auto counters = f_.enforcer->Counters();
  const RuleCounters* shadow = CountersFor(counters, "shadowed");
  ASSERT_NE(shadow, nullptr);
  EXPECT_EQ(shadow->shadow_rejected, 2u);
  EXPECT_EQ(handler_calls_.load(), 3);
}

TEST_F(BeastMiddlewareTest, SkippedPathsPass) {
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Get("/healthz", {{"X-Api-Key", "k7"}})->status, 200);
}

// The step-by-step API without a server: async check, rejection rendering, decorate.
TEST(BeastCheckTest, AsyncCheckRendersTheSameOutcome) {
  testing::EnforcerFixture f;
  Request req{http::verb::get, "/api/items", 11};
  req.set("X-Api-Key", "k1");
  req.set("X-Cost", "2");
  int calls = 0;
  middleware::CheckBeastRequestAsync(*f.enforcer, req, "127.0.0.1",
                                     [&](middleware::BeastCheck check) {
                                       ++calls;
                                       ASSERT_TRUE(check.allowed());
                                       Response res = Ok(req);
                                       check.Decorate(res);
                                       EXPECT_NE(res.find("RateLimit"), res.end());
                                     });
  EXPECT_EQ(calls, 1);
  const auto check = middleware::CheckBeastRequest(*f.enforcer, req, "127.0.0.1");
  ASSERT_FALSE(check.allowed());
  const Response res = check.Rejection(11, true);
  EXPECT_EQ(res.result_int(), 429);
  EXPECT_TRUE(res.keep_alive());
  EXPECT_EQ(res[http::field::content_length], std::to_string(res.body().size()));
  EXPECT_NE(res.find(http::field::retry_after), res.end());
}

// body:<JSON pointer> (issue 34): a string_body's JSON body keys the rule,
// over a real socket through BeastRateLimited; a body that is not JSON (by
// Content-Type) or is larger than kBodyKeyBytes leaves the key absent, so the
// rule skips it.
TEST(BeastBodyTest, JsonBodyMemberKeysTheRule) {
  testing::EnforcerFixture f(R"({"rules": [{"name": "login", "limit_keys": ["body:/username"],
    "algorithm_config": {"count": 1, "period": "1h", "burst": 1}}]})");
  std::atomic<int> calls{0};
  BeastServer server(middleware::BeastRateLimited(*f.enforcer, [&](const Request& req) {
    ++calls;
    return Ok(req);
  }));
  httplib::Client client("127.0.0.1", server.port());
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  auto post = [&](const std::string& body, const char* type) {
    auto r = client.Post("/login", body, type);
    return r ? r->status : -1;
  };
  EXPECT_EQ(post(R"({"username": "alice", "password": "a"})", "application/json"), 200);
  EXPECT_EQ(post(R"({"password": "b", "username": "alice"})", "application/json"), 429);
  EXPECT_EQ(post(R"({"username": "bob"})", "application/json"), 200);
  // Not JSON by its Content-Type, or too large: absent, the rule skips it.
  EXPECT_EQ(post(R"({"username": "alice"})", "text/plain"), 200);
  const std::string big =
      R"({"username": "alice", "pad": ")" + std::string(kBodyKeyBytes, 'x') + R"("})";
  EXPECT_EQ(post(big, "application/json"), 200);
  EXPECT_EQ(calls.load(), 4);
}

// A concurrency rule's lease is held while the handler runs and given back
// when it returns (RAII in BeastCheck).
TEST(BeastCheckTest, ConcurrencyLeaseIsHeldWhileTheHandlerRuns) {
  testing::EnforcerFixture f;
  Request req{http::verb::get, "/inflight/x", 11};
  req.set("X-Api-Key", "k1");
  int inner_status = 0;
  auto limited = middleware::BeastRateLimited(*f.enforcer, [&](const Request& r) {
    // A second request of the same key while this one is in flight.
    inner_status = middleware::CheckBeastRequest(*f.enforcer, r, "127.0.0.1").outcome().http_status;
    return Ok(r);
  });
  EXPECT_EQ(limited(req, "127.0.0.1").result_int(), 200);
  EXPECT_EQ(inner_status, 429);
  // Returned: the slot is free again.
  EXPECT_EQ(limited(req, "127.0.0.1").result_int(), 200);
}

// BeastRateLimited reports the handler's status to the guards watching the
// upstream: four 500s trip "upstream_errors".
TEST(BeastCheckTest, HandlerErrorsTripTheRollbackGuard) {
  testing::EnforcerFixture f(testing::kWatchedPolicy);
  auto limited = middleware::BeastRateLimited(*f.enforcer, [](const Request& req) {
    Response res{http::status::internal_server_error, req.version()};
    res.prepare_payload();
    return res;
  });
  for (int i = 0; i < 4; ++i) {
    const auto all = f.enforcer->Counters();
    const RuleCounters* c = CountersFor(all, "watched");
    EXPECT_TRUE(c == nullptr || !c->rolled_back) << i;
    Request req{http::verb::get, "/api/items", 11};
    req.set("X-Api-Key", "k" + std::to_string(i));
    EXPECT_EQ(limited(req, "127.0.0.1").result_int(), 500);
  }
  const auto all = f.enforcer->Counters();
  ASSERT_NE(CountersFor(all, "watched"), nullptr);
  const RuleCounters c = *CountersFor(all, "watched");
  EXPECT_TRUE(c.rolled_back);
  EXPECT_EQ(c.rollback_trigger, RollbackTrigger::kUpstreamErrors) << c.rollback_reason;
}

// A handler (or an upstream it proxies) that already set the fields tollgate
// owns: Decorate replaces them, one line each, and leaves the others alone.
TEST(BeastCheckTest, DecorateReplacesRateLimitFieldsTheHandlerSet) {
  testing::EnforcerFixture f;
  Request req{http::verb::get, "/api/items", 11};
  req.set("X-Api-Key", "k-dup");
  const auto check = middleware::CheckBeastRequest(*f.enforcer, req, "127.0.0.1");
  ASSERT_TRUE(check.allowed());
  ASSERT_FALSE(check.outcome().headers.empty());
  Response res = Ok(req);
  for (const auto& h : check.outcome().headers) res.insert(h.name, "stale-from-handler");
  res.insert("ratelimit", "lower-case-stale");  // field names are case-insensitive
  res.set("X-Handler", "kept");
  check.Decorate(res);
  for (const auto& h : check.outcome().headers) {
    std::vector<std::string> got;
    for (auto [it, end] = res.equal_range(h.name); it != end; ++it) {
      got.emplace_back(it->value());
    }
    std::vector<std::string> want;
    for (const auto& w : check.outcome().headers) {
      if (beast::iequals(w.name, h.name)) want.push_back(w.value);
    }
    EXPECT_EQ(got, want) << h.name;
  }
  EXPECT_EQ(res["X-Handler"], "kept");
  EXPECT_EQ(res[http::field::content_type], "text/plain");
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& field : res) fields.emplace_back(field.name_string(), field.value());
  const RateLimitInfo info = ParseRateLimitHeaders(Pairs(fields), f.clock.WallNow());
  ASSERT_NE(info.Tightest(), nullptr);
  EXPECT_EQ(info.Tightest()->remaining, 1);
}

// The middleware policy's llm-header rule (burst 10, 1/s, clock standing
// still): the handler's response reports 25 tokens, the key goes 15 into debt,
// and the next request is refused for 16 s; a 5xx of llm-handler is refunded.
TEST(BeastCheckTest, SettleChargesTheResponseCostAndRefunds) {
  testing::EnforcerFixture f;
  Request req{http::verb::get, "/gen/chat", 11};
  req.set("X-Api-Key", "k-settle");
  auto check = middleware::CheckBeastRequest(*f.enforcer, req, "127.0.0.1");
  ASSERT_TRUE(check.allowed());
  Response res = Ok(req);
  res.set("X-LLM-Tokens", "25");
  check.Settle(*f.enforcer, res);
  check.Settle(*f.enforcer, res);  // a second settlement does nothing
  const auto denied = middleware::CheckBeastRequest(*f.enforcer, req, "127.0.0.1");
  ASSERT_FALSE(denied.allowed());
  EXPECT_EQ(denied.outcome().retry_after_seconds, 16);

  Request handled{http::verb::get, "/llm/chat", 11};
  handled.set("X-Api-Key", "k-settle");
  for (int i = 0; i < 12; ++i) {  // more than the burst: each charge is given back
    auto c = middleware::CheckBeastRequest(*f.enforcer, handled, "127.0.0.1");
    ASSERT_TRUE(c.allowed()) << i;
    Response failed = Ok(handled);
    failed.result(http::status::bad_gateway);
    c.Settle(*f.enforcer, failed, 7);
  }
  auto c = middleware::CheckBeastRequest(*f.enforcer, handled, "127.0.0.1");
  ASSERT_TRUE(c.allowed());
  c.Settle(*f.enforcer, Ok(handled), 10);  // the handler reports 10: the bucket is empty
  EXPECT_FALSE(middleware::CheckBeastRequest(*f.enforcer, handled, "127.0.0.1").allowed());
}

TEST(BeastCheckTest, UnreachableStoreRenders503) {
  testing::FailingEnforcerFixture f;
  Request req{http::verb::get, "/api/items", 11};
  req.set("X-Api-Key", "k1");
  const auto check = middleware::CheckBeastRequest(*f.enforcer, req, "127.0.0.1");
  ASSERT_FALSE(check.allowed());
  const Response res = check.Rejection(11, false);
  EXPECT_EQ(res.result_int(), 503);
  EXPECT_FALSE(res.keep_alive());
  EXPECT_NE(res.body().find("temporary-reduced-capacity"), std::string::npos) << res.body();
}

}  // namespace
}  // namespace tollgate
