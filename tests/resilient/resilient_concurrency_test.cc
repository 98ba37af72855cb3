// Many callers decide through a ResilientStore whose primary fails and
// recovers while the maintenance work runs concurrently: no error leaks out,
// and every token granted locally is charged back exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "resilient/fake_store.h"
#include "tollgate/resilient_store.h"

namespace tollgate {
namespace {

TEST(ResilientConcurrencyTest, EveryLocalGrantIsChargedBackOnce) {
  ManualClock clock;
  ResilientStoreOptions o;
  o.mode = FailureMode::kDegrade;
  o.degrade_fraction = 0.5;
  o.background = false;
  o.clock = &clock;
  o.breaker.clock = &clock;
  o.breaker.consecutive_failures = 2;
  o.breaker.open_duration = std::chrono::microseconds(200);
  o.breaker.half_open_probes = 2;
  auto fake = std::make_unique<testing::FakeStore>(&clock);
  testing::FakeStore* primary = fake.get();
  auto created = ResilientStore::Create(std::move(fake), std::move(o));
  ASSERT_TRUE(created.ok());
  ResilientStore& store = **created;

  LimitSpec spec;
  spec.rate = 1e6;
  spec.burst = 1'000'000;  // never denies: every local grant must be charged back in full
  const Limit limit = *Limit::Create(spec);

  constexpr int kThreads = 4, kCalls = 5000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> local_grants{0}, errors{0};
  std::thread chaos([&] {
    while (!done.load()) {
      clock.Advance(std::chrono::microseconds(50));
      store.RunMaintenance();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        // Caller 0 drives the outages, so they happen however the threads are scheduled.
        if (t == 0 && i % 500 == 0)
          primary->fail = (i / 500) % 2 ? StatusCode::kConnection : StatusCode::kOk;
        const std::string key = "r\x1f" + std::to_string((t * 7 + i) % 16);
        auto r = AcquireOne(store, key, limit, 1);
        if (!r.ok()) {
          errors.fetch_add(1);
          continue;
        }
        if (r->limit != limit.burst()) local_grants.fetch_add(r->allowed ? 1 : 0);
      }
    });
  }
  for (auto& c : callers) c.join();
  done = true;
  chaos.join();

  primary->fail = StatusCode::kOk;
  store.breaker().Reset();
  store.RunMaintenance();
  const auto s = store.Stats();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GT(local_grants.load(), 0u);
  EXPECT_EQ(s.charge_back_pending_keys, 0u);
  EXPECT_EQ(s.charge_back_dropped, 0u);
  EXPECT_EQ(s.charge_back_tokens + s.charge_back_forgiven, local_grants.load());
  EXPECT_EQ(s.charge_back_forgiven, 0u);
  EXPECT_EQ(s.degraded_allowed, local_grants.load());
}

}  // namespace
}  // namespace tollgate
