// Concurrency-lease scenarios shared by every store's tests (LocalStore,
// RedisStore, RedisClusterStore): the same contract, checked the same way.
#ifndef TOLLGATE_TESTS_LEASE_CASES_H_
#define TOLLGATE_TESTS_LEASE_CASES_H_

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/timing.h"
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

// The async calls: every store sends `calls_per_store` AcquireLeaseAsync on
// `key` back to back, none waiting for another (a remote store has them all in
// flight at once). Each callback runs exactly once; exactly max_in_flight are
// granted, the others denied with a Retry-After; then every granted lease is
// given back with ReleaseLeaseAsync through another store than the one that
// granted it (true once, false the second time), and all slots are free.
inline void ExpectAsyncAcquiresGrantExactly(const std::vector<Store*>& stores, std::string_view key,
                                            const LeaseLimit& limit, int calls_per_store) {
  // Shared with the callbacks, which may outlive a failed wait.
  struct Seen {
    std::mutex mu;
    std::vector<std::pair<size_t, std::string>> granted;  // (store, lease id)
    int callbacks = 0, denied = 0, errors = 0, denied_without_retry = 0;
    int released = 0, not_live = 0, release_errors = 0;
  };
  auto seen = std::make_shared<Seen>();
  auto count = [seen](auto member) {
    std::lock_guard<std::mutex> lock(seen->mu);
    return (*seen).*member;
  };
  const int total = static_cast<int>(stores.size()) * calls_per_store;
  for (size_t s = 0; s < stores.size(); ++s) {
    for (int i = 0; i < calls_per_store; ++i) {
      stores[s]->AcquireLeaseAsync(key, limit, [seen, s](Result<LeaseDecision> d) {
        std::lock_guard<std::mutex> lock(seen->mu);
        ++seen->callbacks;
        if (!d.ok()) {
          ++seen->errors;
        } else if (d->allowed) {
          seen->granted.emplace_back(s, d->lease_id);
        } else {
          ++seen->denied;
          if (d->retry_after <= Nanos(0)) ++seen->denied_without_retry;
        }
      });
    }
  }
  ASSERT_TRUE(WaitFor([&] { return count(&Seen::callbacks) >= total; }, std::chrono::seconds(20)))
      << count(&Seen::callbacks) << " of " << total << " acquire callbacks ran";
  std::vector<std::pair<size_t, std::string>> granted;
  {
    std::lock_guard<std::mutex> lock(seen->mu);
    EXPECT_EQ(seen->errors, 0);
    EXPECT_EQ(static_cast<int64_t>(seen->granted.size()), limit.max_in_flight());
    EXPECT_EQ(seen->denied, total - static_cast<int>(seen->granted.size()));
    EXPECT_EQ(seen->denied_without_retry, 0);
    granted = seen->granted;
  }
  // Each lease twice, through the next store: live the first time only.
  for (int round = 0; round < 2; ++round) {
    for (const auto& [s, id] : granted) {
      Store* other = stores[(s + 1) % stores.size()];
      other->ReleaseLeaseAsync(key, id, [seen](Result<bool> r) {
        std::lock_guard<std::mutex> lock(seen->mu);
        if (!r.ok()) {
          ++seen->release_errors;
        } else if (*r) {
          ++seen->released;
        } else {
          ++seen->not_live;
        }
      });
    }
    const int want = static_cast<int>(granted.size()) * (round + 1);
    ASSERT_TRUE(WaitFor(
        [&] {
          return count(&Seen::released) + count(&Seen::not_live) + count(&Seen::release_errors) >=
                 want;
        },
        std::chrono::seconds(20)))
        << "round " << round << ": release callbacks missing";
  }
  EXPECT_EQ(count(&Seen::release_errors), 0);
  EXPECT_EQ(count(&Seen::released), static_cast<int>(granted.size()));
  EXPECT_EQ(count(&Seen::not_live), static_cast<int>(granted.size()));
  EXPECT_EQ(count(&Seen::callbacks), total) << "an acquire callback ran twice";
  Store& any = *stores.back();
  std::vector<std::string> ids;
  for (int64_t i = 0; i < limit.max_in_flight(); ++i) {
    auto d = any.AcquireLease(key, limit);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_TRUE(d->allowed) << "slot " << i << " was not given back";
    ids.push_back(d->lease_id);
  }
  auto over = any.AcquireLease(key, limit);
  ASSERT_TRUE(over.ok());
  EXPECT_FALSE(over->allowed);
  for (const std::string& id : ids) {
    if (!id.empty()) {
      EXPECT_TRUE(*any.ReleaseLease(key, id));
    }
  }
}

}  // namespace tollgate::testing

#endif  // TOLLGATE_TESTS_LEASE_CASES_H_
