// Limiter over a RedisStore made from a URL, against a real redis-server:
// sync, async and try paths, and two Limiters on two stores (two "processes")
// sharing one bucket exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "testing/redis_server.h"
#include "testing/timing.h"
#include "tollgate/limiter.h"

namespace tollgate {
namespace {

// So slow that nothing refills during the test: only the burst can be granted.
LimitSpec NoRefill(int64_t burst) { return {.rate = 0.001, .burst = burst}; }

// The server's URL with `query`, and a call timeout (the first call also waits
// for the connection) scaled for a loaded machine.
std::string Url(const testing::RedisServer& server, const std::string& query = "") {
  const auto timeout = testing::Scaled(std::chrono::milliseconds(500));
  return server.url() + "?timeout_ms=" + std::to_string(timeout.count()) +
         (query.empty() ? "" : "&" + query);
}

TEST(LimiterRedisTest, SharedBucketAcrossStoresIsExact) {
  auto server = testing::RedisServer::Start();
  if (server.missing) GTEST_SKIP() << server.error;
  ASSERT_TRUE(server) << server.error;
  auto store_a = MakeStore(Url(*server));
  auto store_b = MakeStore(Url(*server));
  ASSERT_TRUE(store_a.ok()) << store_a.status().ToString();
  ASSERT_TRUE(store_b.ok()) << store_b.status().ToString();
  auto a = Limiter::Create({.limit = NoRefill(5), .name = "shared", .store = *store_a});
  auto b = Limiter::Create({.limit = NoRefill(5), .name = "shared", .store = *store_b});
  ASSERT_TRUE(a.ok() && b.ok());
  int granted = 0;
  for (int i = 0; i < 8; ++i) {
    Status error;
    granted += (*a)->TryAcquire("user-1", 1, nullptr, &error) ? 1 : 0;
    ASSERT_TRUE(error.ok()) << error.ToString();
    granted += (*b)->TryAcquire("user-1", 1, nullptr, &error) ? 1 : 0;
    ASSERT_TRUE(error.ok()) << error.ToString();
  }
  EXPECT_EQ(granted, 5);
  auto d = (*a)->Acquire("user-1");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_GT(d->retry_after, std::chrono::seconds(100));
  // WaitAcquire does not wait in vain for a refill beyond its budget.
  auto w = (*b)->WaitAcquire("user-1", 1, std::chrono::milliseconds(50));
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->allowed);
}

TEST(LimiterRedisTest, AsyncCompletesOnTheStoreThread) {
  auto server = testing::RedisServer::Start();
  if (server.missing) GTEST_SKIP() << server.error;
  ASSERT_TRUE(server) << server.error;
  auto store = MakeStore(Url(*server, "prefix=async:"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto limiter = Limiter::Create({.limit = NoRefill(3), .store = *store});
  ASSERT_TRUE(limiter.ok());
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, allowed = 0, errors = 0;
  for (int i = 0; i < 5; ++i) {
    (*limiter)->AcquireAsync("k", 1, [&](Result<Decision> r) {
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      if (!r.ok()) {
        ++errors;
      } else if (r->allowed) {
        ++allowed;
      }
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done == 5; }));
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(allowed, 3);
}

TEST(LimiterRedisTest, StoreErrorsAreValues) {
  // Nothing listens on port 1: decisions fail with a status, never throw.
  auto store = MakeStore("redis://127.0.0.1:1?timeout_ms=200&connect_timeout_ms=200");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto limiter = Limiter::Create({.limit = NoRefill(3), .store = *store});
  ASSERT_TRUE(limiter.ok());
  Status error;
  EXPECT_FALSE((*limiter)->TryAcquire("k", 1, nullptr, &error));
  EXPECT_FALSE(error.ok());
  EXPECT_FALSE((*limiter)->Acquire("k").ok());
}

}  // namespace
}  // namespace tollgate
