// Exactness of RedisStore under concurrent callers (threads and async).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "testing/redis_server.h"
#include "tollgate/redis_store.h"

namespace tollgate {
namespace {

Limit Bucket(double rate, int64_t burst) {
  LimitSpec s;
  s.rate = rate;
  s.burst = burst;
  return *Limit::Create(s);
}

std::unique_ptr<RedisStore> MakeStore(const testing::RedisServer& server) {
  RedisOptions o;
  o.port = server.port();
  o.call_timeout = std::chrono::milliseconds(5000);
  auto s = RedisStore::Create(o);
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(RedisConcurrency, ThreadsOnOneHotKeyGetExactlyTheBurst) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const Limit l = Bucket(0.001, 500);
  std::atomic<int> allowed{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 60; ++i) {
        auto r = AcquireOne(*store, "hot", l, 1);
        if (!r.ok()) {
          errors.fetch_add(1);
        } else if (r->allowed) {
          allowed.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(allowed.load(), 500);
}

TEST(RedisConcurrency, AsyncCallersAreMergedAndStayExact) {
  TOLLGATE_START_REDIS(server);
  auto store = MakeStore(server);
  ASSERT_NE(store, nullptr);
  const Limit l = Bucket(0.001, 1000);
  const Limit pair_limit = Bucket(0.001, 300);
  constexpr int kCalls = 4000;
  std::atomic<int> allowed{0}, errors{0}, done{0}, pairs_allowed{0};
  std::mutex mu;
  std::condition_variable cv;
  auto finish = [&] {
    if (done.fetch_add(1) + 1 == kCalls) {
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_one();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls / 4; ++i) {
        if (i % 2 == 0) {
          AcquireItem item{"async-hot", &l, 1};
          store->AcquireAsync(std::span<const AcquireItem>(&item, 1), [&](Result<BatchDecision> r) {
            if (!r.ok()) {
              if (errors.fetch_add(1) == 0) ADD_FAILURE() << r.status().ToString();
            } else if (r->allowed) {
              allowed.fetch_add(1);
            }
            finish();
          });
        } else {
          // A two-key batch: both or neither.
          AcquireItem items[] = {{"pair-a", &pair_limit, 1}, {"pair-b", &pair_limit, 1}};
          store->AcquireAsync(items, [&](Result<BatchDecision> r) {
            if (!r.ok()) {
              if (errors.fetch_add(1) == 0) ADD_FAILURE() << r.status().ToString();
            } else if (r->allowed) {
              pairs_allowed.fetch_add(1);
            }
            finish();
          });
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return done.load() == kCalls; }));
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(allowed.load(), 1000);
  EXPECT_EQ(pairs_allowed.load(), 300);
  EXPECT_EQ(server.Command({"GET", "tg:pair-a"}), server.Command({"GET", "tg:pair-b"}));
  // Merging: far fewer script calls than decisions.
  EXPECT_LT(store->Stats().script_calls, static_cast<uint64_t>(kCalls));
}

}  // namespace
}  // namespace tollgate
