// Many threads on one hot key over a simulated period: the lock-free CAS path
// must grant exactly burst + rate*T, never more. Runs under TSan in `make sanitize`.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "tollgate/local_store.h"

namespace tollgate {
namespace {

constexpr int kThreads = 8;

Limit Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

TEST(LocalConcurrencyTest, HotKeyGrantsExactlyBurstPlusRateTimesT) {
  ManualClock clock;
  LocalStoreOptions o;
  o.clock = &clock;
  o.max_keys = 1024;
  auto store = std::move(*LocalStore::Create(o));
  const Limit l = Bucket(100, 50);  // one token every 10 ms
  constexpr int kSteps = 200;       // 200 steps of 1 ms: T = 199 ms of refill
  const int64_t start = clock.Now();
  std::atomic<int64_t> allowed{0};
  // Every thread hammers the key at the current simulated time; the clock
  // moves only when all threads are done with a step, so demand always
  // exceeds supply and the count is exact.
  std::barrier sync(kThreads, [&]() noexcept { clock.Advance(Nanos(1'000'000)); });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int step = 0; step < kSteps; ++step) {
        for (int i = 0; i < 8; ++i) {
          if (store->Acquire("hot", l, 1).allowed) allowed.fetch_add(1);
        }
        sync.arrive_and_wait();
      }
    });
  }
  for (auto& t : threads) t.join();
  const int64_t elapsed = (kSteps - 1) * 1'000'000LL;  // time of the last step - start
  const int64_t bound = l.burst() + l.TokensIn(elapsed);
  EXPECT_LE(allowed.load(), bound);
  EXPECT_EQ(allowed.load(), bound) << "saturated demand must get every token";
  EXPECT_EQ(clock.Now() - start, kSteps * 1'000'000LL);
}

TEST(LocalConcurrencyTest, BatchesStayAllOrNothingUnderContention) {
  ManualClock clock;
  LocalStoreOptions o;
  o.clock = &clock;
  auto store = std::move(*LocalStore::Create(o));
  const Limit a = Bucket(0.001, 300), b = Bucket(0.001, 100);
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        // Half the threads charge both keys, half only `a`.
        std::vector<AcquireItem> items = {{"a", &a, 1}};
        if (t % 2 == 0) items.push_back({"b", &b, 1});
        auto r = store->Acquire(items);
        if (r.ok() && r->allowed && t % 2 == 0) granted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Every granted pair charged b exactly once, and no rejected pair charged a.
  const int64_t b_used = b.burst() - store->Acquire("b", b, 0).remaining;
  EXPECT_EQ(b_used, granted.load());
  EXPECT_LE(granted.load(), 100);
  const int64_t a_used = a.burst() - store->Acquire("a", a, 0).remaining;
  EXPECT_EQ(a_used, 300) << "400 single-key attempts and pairs must exhaust a exactly";
}

TEST(LocalConcurrencyTest, ManyKeysUnderEvictionPressure) {
  ManualClock clock;
  LocalStoreOptions o;
  o.clock = &clock;
  o.max_keys = 256;
  o.shards = 4;
  auto store = std::move(*LocalStore::Create(o));
  const Limit l = Bucket(1000, 2);
  std::vector<std::thread> threads;
  std::atomic<int64_t> decisions{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        store->Acquire("k" + std::to_string((i * 7 + t) % 1000), l, 1);
        decisions.fetch_add(1);
        if (t == 0 && i % 100 == 0) clock.Advance(Nanos(5'000'000));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(decisions.load(), kThreads * 2000);
  // max_keys plus the shards' headroom (local_store.h: a sparse shard admits past the cap).
  EXPECT_LE(store->Stats().keys, 256u + 4 * (256 / 4 / 10 + 16));
}

// AcquireEach decides prefetched groups through the same CAS: with the clock
// stopped, threads racing over a few keys (repeated inside each group, under
// reclamation pressure from other keys) are granted exactly burst per key.
TEST(LocalConcurrencyTest, AcquireEachGrantsExactlyBurstPerKey) {
  ManualClock clock;
  LocalStoreOptions o;
  o.clock = &clock;
  o.max_keys = 64;
  o.shards = 2;
  auto store = std::move(*LocalStore::Create(o));
  const Limit l = Bucket(1, 50);
  constexpr int kHotKeys = 4;
  const std::vector<std::string> hot = {"hot-0", "hot-1", "hot-2", "hot-3"};
  std::atomic<int64_t> granted[kHotKeys] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::string> cold(8);
      std::vector<AcquireItem> items(24);
      std::vector<Decision> out(items.size());
      for (int round = 0; round < 40; ++round) {
        for (size_t j = 0; j < items.size(); ++j) {
          if (j % 3 == 2) {
            cold[j / 3] = "cold-" + std::to_string((round * 31 + t * 7 + j) % 500);
            items[j] = {cold[j / 3], &l, 1};
          } else {
            items[j] = {hot[(j + t) % kHotKeys], &l, 1};
          }
        }
        ASSERT_TRUE(store->AcquireEach(items, out).ok());
        for (size_t j = 0; j < items.size(); ++j) {
          if (j % 3 != 2 && out[j].allowed) granted[(j + t) % kHotKeys].fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int k = 0; k < kHotKeys; ++k) EXPECT_EQ(granted[k].load(), 50) << hot[k];
}

}  // namespace
}  // namespace tollgate
