// The Envoy rate limit service over the Redis store, through real gRPC, against
// a real redis-server (persistence off, free loopback port). The store runs on
// the client clock (a ManualClock) so counts are exact.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls/rls_decider.h"
#include "rls/rls_scenarios.h"
#include "rls/rls_server.h"
#include "rls/rls_yaml.h"
#include "standalone_enforcer.h"
#include "testing/redis_server.h"
#include "testing/timing.h"
#include "tollgate/redis_store.h"

namespace tollgate::rls {
namespace {

using Code = rlspb::RateLimitResponse;

const char* kYaml = R"(
domain: r
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: plan
    value: free
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 5}
  - key: probe
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: weekly
    rate_limit: {unit: week, requests_per_unit: 1}
  - key: watch
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 6}
)";

rlspb::RateLimitRequest Req(
    std::initializer_list<std::vector<std::pair<std::string, std::string>>> descriptors) {
  rlspb::RateLimitRequest r;
  r.set_domain("r");
  for (const auto& d : descriptors) {
    auto* desc = r.add_descriptors();
    for (const auto& [k, v] : d) {
      auto* e = desc->add_entries();
      e->set_key(k);
      e->set_value(v);
    }
  }
  return r;
}

class RlsRedisTest : public ::testing::Test {
 protected:
  void Start(int port, const char* yaml = kYaml) {
    RedisOptions ro;
    ro.port = port;
    ro.use_client_clock = true;
    ro.clock = &clock_;
    ro.call_timeout = testing::Scaled(std::chrono::milliseconds(300));
    ro.reconnect_backoff_max = std::chrono::milliseconds(100);
    auto store = RedisStore::Create(ro);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    RlsCompileOptions co;
    co.supported_algorithms = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket};
    co.store_name = "the redis store";
    ParsedRlsConfig parsed = LoadRlsConfigYaml(yaml, co);
    for (const auto& e : parsed.errors) ADD_FAILURE() << e.ToString();
    ASSERT_NE(parsed.config, nullptr);
    auto enforcer = StandaloneEnforcer(store_.get(), &clock_);
    ASSERT_TRUE(enforcer.ok()) << enforcer.status().ToString();
    enforcer_ = std::move(enforcer).value();
    RlsServerOptions o;
    o.address = "127.0.0.1:0";
    o.enforcer = enforcer_.get();
    o.config = parsed.config;
    o.clock = &clock_;
    auto server = StartRlsServer(o);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    stub_ = rlspb::RateLimitService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }
  grpc::Status Call(const rlspb::RateLimitRequest& req, Code* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ShouldRateLimit(&ctx, req, resp);
  }

  ManualClock clock_{1'000'000'000'000LL, 1'700'000'000'000'000'000LL};
  std::unique_ptr<RedisStore> store_;
  std::unique_ptr<Enforcer> enforcer_;  // outlives the server
  std::unique_ptr<RlsServer> server_;
  std::unique_ptr<rlspb::RateLimitService::Stub> stub_;
};

TEST_F(RlsRedisTest, ExactCountsAllOrNothingAndShadow) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port());
  // [plan=free, user=u] (5/s) and [user=u] (10/s) and a shadow probe (2/s).
  const auto req = Req({{{"plan", "free"}, {"user", "u"}}, {{"user", "u"}}, {{"probe", "p"}}});
  for (int i = 0; i < 5; ++i) {
    Code resp;
    ASSERT_TRUE(Call(req, &resp).ok());
    ASSERT_EQ(resp.overall_code(), Code::OK) << i;
    EXPECT_EQ(resp.statuses(0).limit_remaining(), static_cast<uint32_t>(4 - i));
    EXPECT_EQ(resp.statuses(1).limit_remaining(), static_cast<uint32_t>(9 - i));
    EXPECT_EQ(resp.statuses(2).code(), Code::OK);  // shadow: never over
  }
  Code over;
  ASSERT_TRUE(Call(req, &over).ok());
  EXPECT_EQ(over.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(1).code(), Code::OK);
  // Nothing was charged: the per-user bucket alone still grants exactly 5.
  // (Its status above may say 4 or 5: the Redis store reports a fitting item of
  // a rejected batch as it would be after the charge; the local store, before.)
  EXPECT_GE(over.statuses(1).limit_remaining(), 4u);
  int allowed = 0;
  for (int i = 0; i < 8; ++i) {
    Code resp;
    ASSERT_TRUE(Call(Req({{{"user", "u"}}}), &resp).ok());
    allowed += resp.overall_code() == Code::OK;
  }
  EXPECT_EQ(allowed, 5);
  // Refill on the client clock: 10/s for 0.5 s = 5 more.
  clock_.Advance(std::chrono::milliseconds(500));
  allowed = 0;
  for (int i = 0; i < 8; ++i) {
    Code resp;
    ASSERT_TRUE(Call(Req({{{"user", "u"}}}), &resp).ok());
    allowed += resp.overall_code() == Code::OK;
  }
  EXPECT_EQ(allowed, 5);
  bool found = false;
  for (const auto& r : server_->counters().RuleSnapshot()) {
    if (r.rule == "r.probe") {
      found = true;
      EXPECT_EQ(r.total_hits, 6u);   // every hit counts, as upstream
      EXPECT_EQ(r.shadow_mode, 4u);  // 2/s: hits 3..6 would have been over
    }
  }
  EXPECT_TRUE(found);
}

// Upstream's quota-mode tests (rls_scenarios.h) on a real redis-server.
class RlsRedisQuotaModeTest : public RlsRedisTest {
 protected:
  quota_scenarios::Call Caller() {
    return [this](const rlspb::RateLimitRequest& r) {
      Code resp;
      const grpc::Status st = Call(r, &resp);
      EXPECT_TRUE(st.ok()) << st.error_message();
      return resp;
    };
  }
};

TEST_F(RlsRedisQuotaModeTest, TestServicePerDescriptorQuotaMode) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port(), quota_scenarios::kQuotaYaml);
  quota_scenarios::PerDescriptorQuotaMode(Caller());
}
TEST_F(RlsRedisQuotaModeTest, TestServiceMixedPerDescriptorModes) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port(), quota_scenarios::kQuotaYaml);
  quota_scenarios::MixedPerDescriptorModes(Caller());
}
TEST_F(RlsRedisQuotaModeTest, TestServiceQuotaModeOnlyAllOverTheLimit) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port(), quota_scenarios::kQuotaYaml);
  quota_scenarios::QuotaModeOnlyAllOverTheLimit(Caller());
}
TEST_F(RlsRedisQuotaModeTest, TestServiceQuotaModeOnlySomeOverTheLimit) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port(), quota_scenarios::kQuotaYaml);
  quota_scenarios::QuotaModeOnlySomeOverTheLimit(Caller());
}

// Stream-end charges (charge_only) into debt, on a real redis-server.
TEST_F(RlsRedisQuotaModeTest, ChargeOnlyDescriptorsChargeIntoDebtAndNeverRefuse) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port(), quota_scenarios::kStreamEndYaml);
  quota_scenarios::StreamEndCharges(Caller(),
                                    [&](int64_t s) { clock_.Advance(std::chrono::seconds(s)); });
}

// Issue 17 on Redis: 1/week is back in exactly 604800 s, and a shadow
// descriptor reports its own reset when another descriptor rejects the call.
TEST_F(RlsRedisTest, WeeklyResetAndShadowResetWhenAnotherRejects) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port());
  const auto req = Req({{{"weekly", "w"}}, {{"watch", "w"}}});
  Code first;
  ASSERT_TRUE(Call(req, &first).ok());
  ASSERT_EQ(first.overall_code(), Code::OK);
  EXPECT_EQ(first.statuses(0).duration_until_reset().seconds(), 604800);
  EXPECT_EQ(first.statuses(1).duration_until_reset().seconds(), 10);  // 1 of 6/minute
  clock_.Advance(std::chrono::seconds(4));
  Code over;
  ASSERT_TRUE(Call(req, &over).ok());
  ASSERT_EQ(over.overall_code(), Code::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 604796);
  EXPECT_EQ(over.statuses(1).code(), Code::OK);
  // The shadow bucket holds the first call's token: full again in 6 s (the
  // Redis store may report it as after this call's charge, 16 s; never 0).
  const int64_t shadow_reset = over.statuses(1).duration_until_reset().seconds();
  EXPECT_TRUE(shadow_reset == 6 || shadow_reset == 16) << shadow_reset;
}

TEST_F(RlsRedisTest, RedisDownIsUnavailable) {
  TOLLGATE_START_REDIS(redis);
  Start(redis.port());
  Code resp;
  ASSERT_TRUE(Call(Req({{{"user", "d"}}}), &resp).ok());
  redis.Kill();
  grpc::Status st = Call(Req({{{"user", "d"}}}), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  EXPECT_GE(server_->counters().ServiceSnapshot().store_errors, 1u);
}

TEST(RlsRedisConfigTest, WindowAlgorithmsAreLoadErrorsForRedis) {
  RlsCompileOptions co;
  co.supported_algorithms = {Algorithm::kTokenBucket, Algorithm::kLeakyBucket};
  co.store_name = "the redis store";
  ParsedRlsConfig p = LoadRlsConfigYaml(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5, "
      "algorithm: fixed_window}\n",
      co);
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(
      p.errors[0].ToString(),
      "descriptors[0].rate_limit.algorithm: fixed_window is not supported by the redis store");
}

}  // namespace
}  // namespace tollgate::rls
