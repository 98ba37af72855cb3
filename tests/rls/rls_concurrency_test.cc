// Many threads deciding multi-descriptor requests through one RlsDecider while
// the configuration is swapped: no over-grant, and no partial charge (every
// bucket's remaining quota equals its limit minus what allowed requests took).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "rls/rls_decider.h"
#include "rls/rls_yaml.h"
#include "standalone_enforcer.h"
#include "tollgate/local_store.h"

namespace tollgate::rls {
namespace {

// Rates whose emission interval is a whole number of ns (1e15 / rate_micro):
// the core rounds interval and tolerance separately, which for other rates can
// make the last token of a burst ungrantable (reported to the core owner).
const char* kYaml = R"(
domain: c
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 40, algorithm: token_bucket}
  - key: all
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket}
)";

rlspb::RateLimitRequest Req(int user) {
  rlspb::RateLimitRequest r;
  r.set_domain("c");
  auto* a = r.add_descriptors()->add_entries();
  a->set_key("user");
  a->set_value("u" + std::to_string(user));
  auto* b = r.add_descriptors()->add_entries();
  b->set_key("all");
  b->set_value("x");
  return r;
}

TEST(RlsConcurrencyTest, AllOrNothingUnderContention) {
  ManualClock clock;  // frozen: no refill during the test
  LocalStoreOptions so;
  so.clock = &clock;
  so.max_keys = 1024;
  auto store = LocalStore::Create(so);
  ASSERT_TRUE(store.ok());
  auto counters = std::make_shared<RlsCounters>();
  ParsedRlsConfig parsed = LoadRlsConfigYaml(kYaml, {}, counters);
  ASSERT_NE(parsed.config, nullptr);
  auto enforcer = StandaloneEnforcer(store->get(), &clock);
  ASSERT_TRUE(enforcer.ok()) << enforcer.status().ToString();
  auto made = RlsDecider::Standalone(enforcer->get(), parsed.config, &clock);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  RlsDecider& decider = **made;

  constexpr int kThreads = 4, kPerThread = 300;
  std::atomic<int> per_user[kThreads] = {};
  std::atomic<bool> stop_reload{false};
  std::thread reloader([&] {
    while (!stop_reload.load()) {
      ParsedRlsConfig again = LoadRlsConfigYaml(kYaml, {}, counters);
      if (again.config) decider.SetConfig(again.config);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        rlspb::RateLimitResponse resp;
        Status st = decider.DecideSync(Req(t), &resp);
        ASSERT_TRUE(st.ok()) << st.ToString();
        if (resp.overall_code() == rlspb::RateLimitResponse::OK) per_user[t].fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop_reload = true;
  reloader.join();

  int total = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_LE(per_user[t].load(), 40);
    total += per_user[t].load();
  }
  EXPECT_EQ(total, 100);  // 4 users x 40 > 100: the global bucket is the bound, exactly
  // No partial charges: peek every bucket through the service (hits_addend 0).
  for (int t = 0; t < kThreads; ++t) {
    rlspb::RateLimitRequest r = Req(t);
    for (auto& d : *r.mutable_descriptors()) d.mutable_hits_addend()->set_value(0);
    rlspb::RateLimitResponse resp;
    ASSERT_TRUE(decider.DecideSync(r, &resp).ok());
    EXPECT_EQ(resp.statuses(0).limit_remaining(), static_cast<uint32_t>(40 - per_user[t].load()));
    EXPECT_EQ(resp.statuses(1).limit_remaining(), 0u);
  }
  const auto service = counters->ServiceSnapshot();
  EXPECT_EQ(service.requests, static_cast<uint64_t>(kThreads * kPerThread + kThreads));
  EXPECT_EQ(service.ok + service.over_limit, service.requests);
}

}  // namespace
}  // namespace tollgate::rls
