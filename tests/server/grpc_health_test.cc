// grpc.health.v1.Health through the real tollgated binary (a child process),
// asked by a gRPC client built from proto/grpc/health/v1/health.proto: the
// readiness tollgated's gRPC front end reports, and NOT_SERVING from the
// moment SIGTERM starts the drain. Its own binary: the process tests' shared
// one (server_tests) does not change for it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/server_fixture.h"
#include "server/test_http.h"
#include "server/tollgated_process.h"

namespace tollgate::testing {
namespace {

namespace health = ::grpc::health::v1;
namespace rlspb = ::envoy::service::ratelimit::v3;
using namespace std::chrono_literals;

class GrpcHealthProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Binary().c_str(), X_OK) != 0) GTEST_SKIP() << "no binary at " << Binary();
    policy_ = dir_ + "/policy.json";
    WriteFile(policy_, GenerousPolicy(1000000));
  }
  ScopedTempDir temp_;
  const std::string dir_ = temp_.path();
  std::string policy_;
};

rlspb::RateLimitRequest RlsRequest(const std::string& key, const std::string& value) {
  rlspb::RateLimitRequest req;
  req.set_domain("api");
  auto* entry = req.add_descriptors()->add_entries();
  entry->set_key(key);
  entry->set_value(value);
  return req;
}

// grpc.health.v1.Health on tollgated's gRPC listener: SERVING once the policy,
// the Envoy rules and the store are ready; NOT_SERVING while the process
// drains (an in-flight HTTP request holds the drain open), when rate limit
// calls are still answered; then the process exits.
TEST_F(GrpcHealthProcessTest, ServingUntilDraining) {
  TestUpstream upstream;
  const std::string rls_dir = dir_ + "/ratelimit";
  std::filesystem::create_directory(rls_dir);
  WriteFile(rls_dir + "/api.yaml",
            "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, "
            "requests_per_unit: 3}\n");
  const std::string upstream_url = "http://127.0.0.1:" + std::to_string(upstream.port());
  WriteFile(dir_ + "/tollgated.json", R"({"policy": ")" + policy_ +
                                          R"(", "listen": "127.0.0.1:0", "admin": "127.0.0.1:0",
      "threads": 1, "http": {"drain_timeout_ms": 20000},
      "gateway": {"upstream": ")" + upstream_url +
                                          R"("},
      "grpc": {"listen": "127.0.0.1:0", "rls_config": [")" +
                                          rls_dir + R"("]}})");
  Tollgated t({"--config", dir_ + "/tollgated.json"}, dir_);
  ASSERT_TRUE(t.WaitStarted()) << "log: " << t.Log() << " stdout: " << t.Stdout();
  ASSERT_GT(t.grpc_port(), 0) << t.Log();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(t.grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = health::Health::NewStub(channel);
  auto check = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    health::HealthCheckResponse resp;
    const grpc::Status st = stub->Check(&ctx, health::HealthCheckRequest(), &resp);
    return st.ok() ? resp.status() : health::HealthCheckResponse::UNKNOWN;
  };
  EXPECT_EQ(check(), health::HealthCheckResponse::SERVING);

  HttpResponse slow;
  std::thread client([&] { slow = Fetch(t.port(), "GET", "/slow?ms=3000", {{"X-Api-Key", "k"}}); });
  ASSERT_TRUE(WaitFor([&] { return upstream.requests() == 1; }));
  t.Signal(SIGTERM);
  EXPECT_TRUE(WaitFor([&] { return check() == health::HealthCheckResponse::NOT_SERVING; }, 3s))
      << t.Log();
  auto rls = rlspb::RateLimitService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  rlspb::RateLimitResponse resp;
  const grpc::Status st = rls->ShouldRateLimit(&ctx, RlsRequest("user", "drain"), &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.overall_code(), rlspb::RateLimitResponse::OK);
  client.join();
  EXPECT_EQ(slow.status, 200);
  EXPECT_EQ(t.WaitExit(10s), 0) << t.Log();
}

}  // namespace
}  // namespace tollgate::testing
