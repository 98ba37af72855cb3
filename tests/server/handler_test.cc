// tollgated's handlers without a socket: a tollgate::Runtime over a local
// store with a ManualClock and a policy text, a snapshot (server/runtime.h)
// pointing at it, and HandlerFor(op) called directly on an io_context.
#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/endpoints.h"
#include "server/runtime.h"
#include "tollgate/runtime.h"

namespace tollgate::server {
namespace {

std::string PolicyText(int burst) {
  return R"({"rules": [{"name": "per-ip", "limit_keys": ["ip:address"],
             "algorithm": "token_bucket",
             "algorithm_config": {"rps": 1, "burst": )" +
         std::to_string(burst) + "}}]}";
}

std::string HeaderOf(const Response& r, std::string_view name) {
  for (const HeaderField& h : r.headers) {
    if (h.name == name) return std::string(h.value);
  }
  return "";
}

// What Server::Create builds around the engine, minus listeners and threads.
class Handlers : public ::testing::Test {
 protected:
  void SetUp() override {
    RuntimeEnv env;
    env.clock = &clock_;
    env.io_clock = &clock_;
    // No on_reloaded: the snapshot holds no policy (the engine's one swap
    // publishes it), and this test rotates no admin tokens.
    RuntimeOptions options;
    options.policy.text = PolicyText(2);
    options.store.url = "local";
    auto made = tollgate::Runtime::Create(std::move(options), std::move(env));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    engine_ = std::move(made).value();
    auto log = Logger::Create(LogLevel::kOff, "");
    ASSERT_TRUE(log.ok());
    log_ = std::move(log).value();

    auto rt = std::make_shared<Runtime>();
    rt->config = std::make_shared<const ServerConfig>();
    rt->exposure = ExposureOf(*rt->config);
    rt->policy_source = engine_->policy_source();
    rt->enforcer = &engine_->enforcer();
    rt->policies = &engine_->policies();
    rt->engine = engine_.get();
    rt->clock = &clock_;
    rt->log = log_.get();
    rt->metrics = &metrics_;
    rt->top = &top_;
    rt->reject_gate = &gate_;
    rt->shadow_gate = &gate_;
    rt->upstream_error_gate = &gate_;
    rt->state = &state_;
    holder_.emplace(std::move(rt));
  }

  // Runs the handler of `op` for a request from `peer` to `path`.
  Response Call(Op op, std::string_view path, std::string_view peer,
                std::vector<HeaderPair> headers = {}) {
    Request request;
    request.listener = ListenerKind::kMain;
    request.view = RequestView{"GET", path, "", peer, headers};
    request.shard = &metrics_.shard(0);
    std::shared_ptr<const Runtime> rt = holder_->Load();
    boost::asio::io_context ioc;
    auto answer = boost::asio::co_spawn(ioc, HandlerFor(op)(request, *rt), boost::asio::use_future);
    ioc.run();
    return answer.get();
  }

  ManualClock clock_;
  std::unique_ptr<tollgate::Runtime> engine_;
  std::unique_ptr<Logger> log_;
  ServerMetrics metrics_{1};
  TopRejected top_{8, 60'000'000'000};
  RejectionGate gate_{1, 10};
  ServerState state_;
  std::optional<RuntimeHolder> holder_;
};

TEST_F(Handlers, AuthDecidesThroughTheRuntime) {
  const std::vector<HeaderPair> uri = {{"X-Original-URI", "/api/items"}};
  EXPECT_EQ(Call(Op::kAuth, "/v1/auth", "192.0.2.1", uri).status, 204);
  EXPECT_EQ(Call(Op::kAuth, "/v1/auth", "192.0.2.1", uri).status, 204);
  Response third = Call(Op::kAuth, "/v1/auth", "192.0.2.1", uri);
  EXPECT_EQ(third.status, 403);
  EXPECT_EQ(HeaderOf(third, "X-RateLimit-Decision"), "reject");
  EXPECT_EQ(Call(Op::kAuth, "/v1/auth", "192.0.2.2", uri).status, 204);  // its own bucket
  clock_.Advance(std::chrono::seconds(1));                               // one token back
  EXPECT_EQ(Call(Op::kAuth, "/v1/auth", "192.0.2.1", uri).status, 204);
}

TEST_F(Handlers, ReadyzAndAReloadSeenByTheNextRequest) {
  EXPECT_EQ(Call(Op::kReadyz, "/readyz", "127.0.0.1").status, 200);
  EXPECT_EQ(holder_->Load()->policies->generation(), 1u);
  ASSERT_TRUE(engine_->PutPolicy(PolicyText(50), "test").empty());
  // The snapshot the next request reads has the engine's policy and generation
  // (it holds no copy of its own: the engine's one swap published them).
  std::shared_ptr<const Runtime> rt = holder_->Load();
  EXPECT_EQ(rt->policies->generation(), 2u);
  EXPECT_EQ(rt->policies->Current(), engine_->view().policy);
  const std::vector<HeaderPair> uri = {{"X-Original-URI", "/api/items"}};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Call(Op::kAuth, "/v1/auth", "192.0.2.1", uri).status, 204);
}

}  // namespace
}  // namespace tollgate::server
