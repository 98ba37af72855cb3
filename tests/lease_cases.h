// Concurrency-lease scenarios shared by every store's tests (LocalStore,
// RedisStore, RedisClusterStore): the same contract, checked the same way.
#ifndef TOLLGATE_TESTS_LEASE_CASES_H_
#define TOLLGATE_TESTS_LEASE_CASES_H_

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "tollgate/store.h"

namespace tollgate::testing {

// `threads` callers per store all acquire on `key` at once (a barrier) and
// never release: exactly max_in_flight are admitted, however they interleave.
inline void ExpectSimultaneousAcquiresGrantExactly(const std::vector<Store*>& stores,
                                                   std::string_view key, const LeaseLimit& limit,
                                                   int threads_per_store, int tries) {
  std::atomic<int> granted{0}, errors{0};
  std::barrier start(static_cast<std::ptrdiff_t>(stores.size()) * threads_per_store);
  std::vector<std::thread> threads;
  for (Store* store : stores) {
    for (int t = 0; t < threads_per_store; ++t) {
      threads.emplace_back([&, store] {
        start.arrive_and_wait();
        for (int i = 0; i < tries; ++i) {
          auto d = store->AcquireLease(key, limit);
          if (!d.ok()) {
            errors.fetch_add(1);
          } else if (d->allowed) {
            granted.fetch_add(1);
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(granted.load(), limit.max_in_flight());
}

// Callers acquire, count themselves in flight, count themselves out, then
// release (so the observed count can only overstate the store's). The peak
// must never pass max_in_flight, every release of a live lease must say so,
// and once all are done every slot is free again.
inline void ExpectNeverMoreThanMaxInFlight(const std::vector<Store*>& stores, std::string_view key,
                                           const LeaseLimit& limit, int threads_per_store,
                                           int iterations) {
  std::atomic<int64_t> in_flight{0}, peak{0};
  std::atomic<int> granted{0}, errors{0}, lost_releases{0};
  std::vector<std::thread> threads;
  for (Store* store : stores) {
    for (int t = 0; t < threads_per_store; ++t) {
      threads.emplace_back([&, store] {
        for (int i = 0; i < iterations; ++i) {
          auto d = store->AcquireLease(key, limit);
          if (!d.ok()) {
            errors.fetch_add(1);
            continue;
          }
          if (!d->allowed) continue;
          const int64_t now = in_flight.fetch_add(1) + 1;
          int64_t seen = peak.load();
          while (now > seen && !peak.compare_exchange_weak(seen, now)) {
          }
          granted.fetch_add(1);
          in_flight.fetch_sub(1);
          auto released = store->ReleaseLease(key, d->lease_id);
          if (!released.ok() || !*released) lost_releases.fetch_add(1);
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(lost_releases.load(), 0);
  EXPECT_LE(peak.load(), limit.max_in_flight());
  EXPECT_GT(granted.load(), 0);
  Store& any = *stores.front();
  for (int64_t i = 0; i < limit.max_in_flight(); ++i) {
    auto d = any.AcquireLease(key, limit);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_TRUE(d->allowed) << "slot " << i << " was not given back";
  }
  auto over = any.AcquireLease(key, limit);
  ASSERT_TRUE(over.ok());
  EXPECT_FALSE(over->allowed);
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_LEASE_CASES_H_
