// grpc.health.v1.Health on the RLS listener (server/rls/rls_health.h), asked
// by a real gRPC client built from proto/grpc/health/v1/health.proto: SERVING
// only while the server's readiness says so, NOT_SERVING once it drains (while
// rate limit calls are still answered), NOT_FOUND for another service.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "rls/rls_test_util.h"

namespace tollgate::rls {
namespace {

namespace health = ::grpc::health::v1;
using Code = rlspb::RateLimitResponse;

class RlsHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = LocalStore::Create({});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    auto enforcer = StandaloneEnforcer(store_.get(), &SystemClock::Instance());
    ASSERT_TRUE(enforcer.ok()) << enforcer.status().ToString();
    enforcer_ = std::move(*enforcer);
    RlsServerOptions o;
    o.address = "127.0.0.1:0";
    o.enforcer = enforcer_.get();
    o.config = testing::CompileOrDie(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, "
        "requests_per_unit: 5}\n");
    o.serving = [this] { return ready_.load(); };
    auto server = StartRlsServer(o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    health_ = health::Health::NewStub(channel);
    rls_ = rlspb::RateLimitService::NewStub(channel);
  }

  // The status Check answers for `service`, or the gRPC error code as a negative number.
  int Check(const std::string& service) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    health::HealthCheckRequest req;
    req.set_service(service);
    health::HealthCheckResponse resp;
    const grpc::Status st = health_->Check(&ctx, req, &resp);
    return st.ok() ? static_cast<int>(resp.status()) : -static_cast<int>(st.error_code());
  }

  std::atomic<bool> ready_{false};
  std::unique_ptr<LocalStore> store_;
  std::unique_ptr<Enforcer> enforcer_;
  std::unique_ptr<RlsServer> server_;
  std::unique_ptr<health::Health::Stub> health_;
  std::unique_ptr<rlspb::RateLimitService::Stub> rls_;
};

TEST_F(RlsHealthTest, ServingFollowsReadinessAndDrain) {
  constexpr int kServing = health::HealthCheckResponse::SERVING;
  constexpr int kNotServing = health::HealthCheckResponse::NOT_SERVING;
  EXPECT_EQ(Check(""), kNotServing);  // not ready yet
  ready_ = true;
  EXPECT_EQ(Check(""), kServing);
  EXPECT_EQ(Check("envoy.service.ratelimit.v3.RateLimitService"), kServing);
  EXPECT_EQ(Check("some.other.Service"), -static_cast<int>(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(Check(std::string(300, 'x')), -static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  // Watch is not served: the protocol's clients take UNIMPLEMENTED as "no watching".
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto reader = health_->Watch(&ctx, health::HealthCheckRequest());
    health::HealthCheckResponse resp;
    EXPECT_FALSE(reader->Read(&resp));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  server_->Drain();
  EXPECT_EQ(Check(""), kNotServing);
  // Draining: health checkers move away, while calls are still decided.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  Code resp;
  ASSERT_TRUE(rls_->ShouldRateLimit(&ctx, testing::Request("d", {{"k", "v"}}), &resp).ok());
  EXPECT_EQ(resp.overall_code(), Code::OK);
  EXPECT_EQ(resp.statuses(0).limit_remaining(), 4u);
}

}  // namespace
}  // namespace tollgate::rls
